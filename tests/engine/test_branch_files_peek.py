"""The read-only views of a branch's files (engine/branch_files.py) follow every write."""

from __future__ import annotations

from pathlib import Path

from cacao_tui.engine.branch_files import BranchFiles
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import BranchManifest, IterState, Strategy, TuneOutcome


def test_peeked_states_and_manifest_follow_each_write(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path).branch("b1-a")
    files = BranchFiles(layout)
    strategy = Strategy(name="a", title="A", description="d")
    files.save_manifest(BranchManifest(name="b1-a", title="A", strategy=strategy))
    assert files.peek_state(1) is None and files.peek_manifest().status == "pending"
    before = files.version
    files.save_state(IterState(branch="b1-a", index=1))
    assert files.version > before
    assert files.peek_state(1) is not None and files.peek_state(1).run is None
    st = files.state(1)
    assert st is not None and st is not files.peek_state(1)  # a copy to change, not the shared one
    st.run = TuneOutcome(ran=True, best_ms=1.5)
    assert files.peek_state(1).run is None  # changing the copy changes nothing shared
    files.save_state(st)
    assert files.peek_state(1).run is not None and files.peek_state(1).run.best_ms == 1.5
    m = files.manifest()
    m.status = "running"
    files.save_manifest(m)
    assert files.peek_manifest().status == "running"
    fresh = BranchFiles(layout)  # a new worker reads the disk
    assert fresh.peek_state(1).run.best_ms == 1.5 and fresh.peek_manifest().status == "running"
