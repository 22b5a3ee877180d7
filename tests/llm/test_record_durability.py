"""A call record is renamed into place without an fsync; the run's state files keep theirs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cacao_tui.llm.recording import CallRecord, read_records, write_record
from cacao_tui.store import atomic
from cacao_tui.store.state import IterState


def _record(node: str, index: int = 0) -> CallRecord:
    return CallRecord.model_validate(
        {
            "provider": "scripted",
            "model": "m",
            "branch": "b1",
            "iteration": 1,
            "node": node,
            "index": index,
            "messages": [{"role": "user", "content": "hi"}],
            "response": {"text": "ok"},
        }
    )


def test_records_skip_the_fsync_and_state_writes_keep_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(atomic.os, "fsync", lambda fd: (synced.append(fd), real(fd)))
    path = write_record(tmp_path, _record("plan"))
    assert path.is_file() and synced == []
    atomic.write_model(tmp_path / "state.json", IterState(branch="b1", index=1))
    assert len(synced) == 1


def test_an_empty_record_left_by_a_power_cut_reads_as_absent(tmp_path: Path) -> None:
    write_record(tmp_path, _record("plan"))
    cut = write_record(tmp_path, _record("propose"))
    cut.write_bytes(b"")
    assert [r.node for r in read_records(tmp_path)] == ["plan"]
