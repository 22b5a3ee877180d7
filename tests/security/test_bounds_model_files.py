"""Class 2 and 6 of issue 10: the files the model writes through the author tools are capped in size
(kernels.cu 256 KiB, tuning.yaml 64 KiB, UTF-8 bytes), so every later read of them is bounded."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from cacao_tui.nodes.workspace import MAX_WRITE_BYTES, Workspace, WorkspaceError


def fake_workspace(tmp_path: Path) -> Workspace:
    """A Workspace over a fake branch view: write() needs only the mode and the iteration directory."""
    branch = SimpleNamespace(mode="kernel", it=SimpleNamespace(root=tmp_path / "iter1"))
    return Workspace(deps=None, branch=branch)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["kernels.cu", "tuning.yaml"])
def test_writes_over_the_cap_are_refused_and_nothing_is_written(name: str, tmp_path: Path) -> None:
    ws = fake_workspace(tmp_path)
    cap = MAX_WRITE_BYTES[name]
    with pytest.raises(WorkspaceError, match="too large"):
        ws.write(name, "x" * (cap + 1))
    assert not (tmp_path / "iter1" / name).exists()
    with pytest.raises(WorkspaceError, match="too large"):
        ws.write(name, "é" * (cap // 2 + 1))  # counted in bytes, not characters
    assert ws.write(name, "x" * cap).startswith("wrote")


def test_a_lone_surrogate_from_a_json_reply_does_not_crash_the_write(tmp_path: Path) -> None:
    ws = fake_workspace(tmp_path)
    assert ws.write("kernels.cu", "int x; // \ud800\n").startswith("wrote")
    assert (tmp_path / "iter1" / "kernels.cu").read_bytes() == b"int x; // ?\n"
