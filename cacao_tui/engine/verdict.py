"""The run's verdict: what it produced decides how it ended, never that it got to its end.

A run is ``ok`` only when at least one kernel was validated and timed (the run has a best),
or, in a dry run, when at least one kernel was written, compile-checked (some sampled
configuration compiled) and kept (its iteration did not fail). Otherwise it is ``failed``,
with one line saying why: every step refused, every branch failed, the LLM budget spent
before a kernel, the recording of a replay ended, no kernel written, none valid. An LLM
budget reached after a kernel was timed is ``budget`` (a result, exit 0). A replay whose
recording ended before the run's own end says how far it reached, whatever the verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cacao_tui.store.state import BestResult, BranchManifest, IterState

RECORDING_ENDED = "recording ended"  # the stop reason of a branch a replay could not take further
REFUSED = "refused"  # in an iteration's error: the model refused the step (llm/refusals.py)


@dataclass
class BranchRecord:
    """One branch as the verdict sees it: its manifest and its iterations' states."""

    manifest: BranchManifest
    states: list[IterState] = field(default_factory=list)

    def live_states(self) -> list[IterState]:
        return [st for st in self.states if self.manifest.live(st.index)]


@dataclass(frozen=True)
class Verdict:
    status: str  # ok | budget | failed
    message: str | None


def compile_checked(st: IterState) -> bool:
    """A dry run's iteration that wrote a kernel, compiled some sampled configuration and did not fail."""
    return (
        st.error is None
        and st.author is not None
        and st.author.ok
        and st.run is not None
        and (st.run.compiled or 0) > 0
    )


def _written(st: IterState) -> bool:
    return st.author is not None and st.author.ok


def _first(texts: list[str], limit: int = 160) -> str:
    text = " ".join(texts[0].split()) if texts else ""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def recording_note(branches: list[BranchRecord], replayed: tuple[int, int] | None) -> str | None:
    """How far a replay's recording reached, when it ended before the run did (None otherwise)."""
    ended = [
        (b.manifest.name, b.manifest.stop_reason or "")
        for b in branches
        if (b.manifest.stop_reason or "").startswith(RECORDING_ENDED)
    ]
    if not ended:
        return None
    where = "; ".join(f"{name}: {reason.removeprefix(RECORDING_ENDED).lstrip(': ')}" for name, reason in ended[:4])
    more = f"; {len(ended) - 4} more branch(es)" if len(ended) > 4 else ""
    calls = f"{replayed[0]} of {replayed[1]} recorded calls replayed; " if replayed else ""
    return f"the recording ended ({calls}{where}{more})"


def run_verdict(
    branches: list[BranchRecord],
    *,
    best: BestResult | None,
    dry_run: bool,
    budget_reached: bool,
    with_cases: bool = False,
    replayed: tuple[int, int] | None = None,
) -> Verdict:
    """The verdict of a run that got to its end (a stop or a crash is ``interrupted``, decided elsewhere)."""
    note = recording_note(branches, replayed)
    states = [st for b in branches for st in b.live_states()]
    produced = best is not None if not dry_run else any(compile_checked(st) for st in states)
    if produced:
        return Verdict("budget" if budget_reached else "ok", note)
    what = "compile-checked" if dry_run else "timed"
    if budget_reached:
        why = f"the LLM budget was spent before any kernel was {what}"
    elif not branches:
        why = "no branch was created"
    elif note is not None and not any(_written(st) for st in states):
        why = f"no kernel was written before {note}"
    elif all(b.manifest.status == "killed" for b in branches):
        why = "every branch was killed by the user"
    elif all(b.manifest.status == "failed" for b in branches):
        errors = sorted({b.manifest.error or b.manifest.stop_reason or "?" for b in branches})
        others = f" (and {len(errors) - 1} other error(s))" if len(errors) > 1 else ""
        why = f"every branch failed: {_first(errors)}{others}"
    elif not any(_written(st) for st in states):
        errors = [st.error for st in states if st.error]
        if errors and all(REFUSED in e for e in errors):
            why = f"every step was refused by the model; no kernel was written ({len(errors)} iteration(s) failed)"
        elif errors:
            why = f"no kernel was written: every iteration failed before its kernel (first: {_first(errors)})"
        else:
            why = "no kernel was written"
    elif dry_run:
        why = "no kernel compiled: every compile check failed"
    elif with_cases:
        why = "no kernel has a valid result on every case (the score needs them all)"
    elif not any(st.run is not None and st.run.ran for st in states):
        why = "no kernel was tuned"
    else:
        why = "no kernel passed validation"
    if note is not None and not why.startswith("no kernel was written before"):
        why += f"; {note}"
    return Verdict("failed", why)
