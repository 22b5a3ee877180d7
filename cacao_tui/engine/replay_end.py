"""Where a replay's recording ends for a branch: the branch stops there, not as failed.

A replay answers each call from its recording; a call the recording does not hold (a timed run
granted an iteration the dry run that was recorded never had, say) raises ``ReplayMismatch``.
The iteration in progress then ends where the recording does — what it measured is kept, under
an automatic stop; one that wrote no kernel is marked failed with the reason — and the branch
stops with ``recording ended: ...`` as its reason (engine/verdict.py reads it back for the run's
verdict). The engine also begins no iteration, sub-branch or polish of which the recording holds
no call at all (``TrackedLLM.covers``).
"""

from __future__ import annotations

from typing import Protocol

from cacao_tui.engine.verdict import RECORDING_ENDED
from cacao_tui.llm import CallKey, ReplayMismatch
from cacao_tui.store.state import BranchManifest, Decision, IterState


class _Reporter(Protocol):
    def log(self, message: str, level: str = "info") -> None: ...


class EndingWorker(Protocol):
    """What of a branch worker (engine/worker.py) the end of a recording needs."""

    reporter: _Reporter

    def manifest(self) -> BranchManifest: ...
    def state(self, index: int) -> IterState | None: ...
    def set_iter_status(self, st: IterState, status: str, message: str | None = None) -> None: ...
    def emit_decision(self, st: IterState) -> None: ...
    def summary_of(self, st: IterState) -> str: ...
    def count_done(self, m: BranchManifest) -> int: ...
    def set_status(self, m: BranchManifest, status: str, reason: str | None = None) -> None: ...


def nothing_recorded(index: int) -> str:
    """The stop reason of a branch whose next iteration the recording holds no call of."""
    return f"{RECORDING_ENDED}: nothing recorded for iteration {index}"


def end_at_recording(worker: EndingWorker, exc: ReplayMismatch) -> None:
    """The replay has no call for this step: the iteration in progress and the branch end here."""
    key = exc.key if isinstance(exc.key, CallKey) else None
    if key is not None:
        reason = f"{RECORDING_ENDED}: no recorded {key.node} call for iteration {key.iteration}"
    else:
        reason = f"{RECORDING_ENDED}: {exc}"
    m = worker.manifest()
    st = worker.state(m.current_iteration) if m.current_iteration is not None else None
    if st is not None and st.decision is None:
        if st.error is None and (st.author is None or not st.author.ok):
            st.error = reason
        summary = worker.summary_of(st)
        st.decision = Decision(action="stop", reason=reason, iteration_summary=summary, automatic=True)
        worker.set_iter_status(st, "decided" if st.error is None else "failed", st.error)
        worker.emit_decision(st)
        m = worker.manifest()
        m.current_iteration = None
        m.iterations_done = worker.count_done(m)
    worker.set_status(m, "stopped", reason)
    worker.reporter.log(reason, "warning")
