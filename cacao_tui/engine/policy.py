"""The search policy's rules, as pure functions: where an iteration starts, who gets spare iterations.

They take plain numbers, so the engine (worker.py, pool.py) and the design bench
(bench/agent_policy.py) run the same rules. docs/ARCHITECTURE.md, "The search policy",
explains them.

- Start point: an iteration starts from the branch's best kernel, unless the decision names
  the latest files (a retry fixes what just failed; a configuration-only iteration re-tunes
  the kernel just measured; a decision may ask for ``start_from: latest``). After a slower
  iteration the work goes on from the faster kernel, not from the slower one.
- Spare iterations (a bandit on recent gain): each branch is scored by where it would be
  after one more iteration at its recent pace, ``best / (1 + gain)`` (its gain: how much its
  best improved over its last ``window`` iterations). A branch that has used its share may
  draw one more iteration from the pool when it is still improving (gain >= ``min_gain``)
  and the pool has an iteration that no more promising live branch (a lower score) may still
  claim. Iterations the other live branches may still use are held back for them, except
  those of a branch that stalled (no gain over its window) or is hopeless (below).
- Weak branches yield: a branch with at least ``window`` results whose score is still over
  ``HOPELESS`` times the run's best ends at its next step boundary when another live branch
  can use the iterations; its unused share goes back to the pool, to branches that pay.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from cacao_tui.store.state import Decision

GAIN_WINDOW = 2  # iterations the recent gain is measured over
MIN_GAIN = 0.02  # a relative improvement below this over the window is a stall
FIRST_RESULT_GAIN = 1.0  # the gain of a branch whose first valid result arrived within the window
HOPELESS = 1.5  # a branch whose score stays this far above the run's best yields its iterations


def start_iteration(latest: int | None, best: int | None, decision: Decision | None) -> int | None:
    """The earlier iteration (of this branch's line) the next one starts from.

    ``latest``: the newest iteration with files; ``best``: the branch's fastest live iteration
    (None: no valid time yet); ``decision``: the decision that ends ``latest``.
    """
    if latest is None:
        return best
    if best is None or best == latest or decision is None:
        return latest
    if decision.action == "retry" or decision.skip_implement or decision.start_from == "latest":
        return latest
    return best


def recent_gain(times: Sequence[float | None], window: int = GAIN_WINDOW) -> float:
    """How much a branch's best improved over its last ``window`` iterations.

    ``times``: each finished iteration's tuned time, oldest first (None: no valid result).
    ``before / now - 1`` over the best times before and after the window; 0 without any valid
    time; FIRST_RESULT_GAIN when the first valid time came within the window.
    """
    valid_now = [t for t in times if t is not None and t > 0]
    if not valid_now:
        return 0.0
    earlier = [t for t in times[: max(0, len(times) - window)] if t is not None and t > 0]
    if not earlier:
        return FIRST_RESULT_GAIN
    return min(earlier) / min(valid_now) - 1.0


@dataclass(frozen=True)
class Standing:
    """What the pool rule knows of one branch."""

    name: str
    live: bool  # not finished (running, paused or waiting to start)
    claim: int  # iterations of its own allowance it may still begin (0 for a finished branch)
    gain: float  # recent_gain of its iterations
    decided: int  # its iterations with a result (tuned, or failed and decided)
    best_ms: float | None = None  # its best time so far
    run_best_ms: float | None = None  # the run's best time so far

    @property
    def score(self) -> float:
        """Where one more iteration at the recent pace would bring it (lower is more promising)."""
        if self.best_ms is None:
            return math.inf
        return self.best_ms / (1.0 + max(0.0, self.gain))

    @property
    def stalled(self) -> bool:
        """No gain over a full window: its unused share may go to an improving branch."""
        return self.decided >= GAIN_WINDOW and self.gain < MIN_GAIN

    @property
    def hopeless(self) -> bool:
        """Even at its recent pace it stays far behind the run's best."""
        if self.decided < GAIN_WINDOW or self.best_ms is None or not self.run_best_ms:
            return False
        return self.score > HOPELESS * self.run_best_ms

    @property
    def holds(self) -> bool:
        """Whether the pool keeps its unused share for it."""
        return self.live and not self.stalled and not self.hopeless


def held_back(others: Sequence[Standing]) -> int:
    """Iterations the pool keeps for the other live branches (stalled and hopeless ones keep none)."""
    return sum(o.claim for o in others if o.holds)


def grant_extra(me: Standing, others: Sequence[Standing], left: int, min_gain: float = MIN_GAIN) -> bool:
    """Whether ``me``, at the end of its allowance, gets one more iteration from the pool.

    ``left``: pool iterations not drawn yet. Only an improving branch that is not hopeless gets
    one, and only from iterations nobody else still holds, after each more promising live
    branch (who may ask too) has had one.
    """
    if me.gain < min_gain or me.hopeless:
        return False
    rest = [o for o in others if o.name != me.name]
    free = left - held_back(rest)
    rivals = sum(1 for o in rest if o.holds and o.score < me.score)
    return free > rivals


def should_yield(me: Standing, others: Sequence[Standing]) -> bool:
    """Whether a hopeless branch ends now, its iterations going to a branch that can use them."""
    return me.hopeless and any(o.holds for o in others if o.name != me.name)
