"""Design bench: the old search policy against the new one, on a FAKE model of iteration outcomes.

    python bench/agent_policy.py [--seeds 200] [--strategies 4] [--max-iter 5]

THE OUTCOME MODEL IS A FAKE, calibrated on nothing real: per strategy a quality (the best time
it can reach, log-normally spread around 1.0), per iteration a random factor on the time
(an iteration closes a random part of the gap between its start kernel and that floor, and
may make it slower) and a failure probability (no valid kernel; the next iteration retries
from the failed files). The FAKE "model" decides like the prompts ask: it stops a branch
after two iterations without a new best. There are no sub-branches. It is a tool to see
what the rules do with plausible numbers, not a measurement of what an LLM achieves.

Both policies run the same seeds (the same strategies and random draws per branch and
iteration number):

- old: every branch runs up to max_iter; an iteration starts from the branch's latest files;
  what a stopped branch leaves is lost; no polish;
- new: the real engine rules. The start point is ``engine.policy.start_iteration``; the
  iteration pool is ``engine.pool.RunBudget`` over ``engine.pool.IterationPool`` (strategies x
  max_iter iterations; a grant goes to a branch that still improves), with the engine's
  branch manifests and configs built in memory; a final polish iteration on the run's best
  kernel when the pool has one left.

Branches take turns one iteration at a time (as concurrent workers would). Printed per
scenario (failure probability, spread of the strategies' floors) and policy, with two
ablations (each new rule alone): the final best relative to the best reachable (geometric
mean over seeds), how often the run ends within 5 % of the best reachable, the iterations
spent until it first is (median over the runs that get there), and the iterations used.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
from dataclasses import dataclass, field

from cacao_tui.engine.policy import start_iteration
from cacao_tui.engine.pool import IterationPool, RunBudget
from cacao_tui.store.state import BranchConfig, BranchManifest, Decision, Strategy

START_MS = 10.0  # the first kernel of every strategy starts here (FAKE)
QUALITY_SIGMA = 0.35  # spread of the strategies' floors (log-normal around 1 ms; FAKE)
STEP_MU, STEP_SIGMA = -1.2, 0.8  # log of the part of the gap an iteration leaves (FAKE)
FAIL_P = 0.2  # an iteration finds no valid kernel (FAKE)
POLISH_MU, POLISH_SIGMA, POLISH_FAIL = -0.3, 0.4, 0.1  # the polish: a careful small step (FAKE)
WITHIN = 1.05


@dataclass
class Sim:
    """One branch: its strategy's floor and what its iterations produced."""

    name: str
    floor_ms: float
    rng_seed: int
    times: list[float | None] = field(default_factory=list)  # each iteration's tuned time
    starts: list[int | None] = field(default_factory=list)  # the iteration each one started from
    stopped: bool = False

    def kernel_ms(self, i: int | None) -> float:
        """The time of iteration i's kernel (its files); a failed one is the kernel it started from."""
        if i is None:
            return START_MS
        t = self.times[i - 1]
        return t if t is not None else self.kernel_ms(self.starts[i - 1])

    def best(self) -> tuple[int | None, float | None]:
        valid = [(t, i) for i, t in enumerate(self.times, 1) if t is not None]
        if not valid:
            return None, None
        t, i = min(valid)
        return i, t


def draw(sim: Sim, index: int, start_ms: float, polish: bool = False) -> float | None:
    """The FAKE outcome of iteration ``index`` started from a kernel of ``start_ms``."""
    rng = random.Random(sim.rng_seed * 1000 + index + (500 if polish else 0))
    fail, mu, sigma = (POLISH_FAIL, POLISH_MU, POLISH_SIGMA) if polish else (FAIL_P, STEP_MU, STEP_SIGMA)
    if rng.random() < fail:
        return None
    gap = max(0.0, start_ms - sim.floor_ms)
    return sim.floor_ms + gap * math.exp(rng.gauss(mu, sigma))


def fake_decision(sim: Sim) -> Decision:
    """What the FAKE model decides after an iteration: retry a failure, stop on a plateau."""
    if sim.times[-1] is None:
        return Decision(action="retry", reason="no valid kernel")
    best_i, _ = sim.best()
    if best_i is not None and len(sim.times) - best_i >= 2:
        return Decision(action="stop", reason="two iterations without a new best")
    return Decision(action="continue", reason="go on")


def branches(seed: int, n: int) -> list[Sim]:
    rng = random.Random(seed)
    return [Sim(f"b{k}", math.exp(rng.gauss(0.0, QUALITY_SIGMA)), seed * 100 + k) for k in range(1, n + 1)]


@dataclass
class Outcome:
    best_ms: float
    reachable_ms: float
    used: int
    to_within: int | None  # iterations spent when the run's best first came within 5 % of reachable


def _track(outcome: list[tuple[int, float]], used: int, sims: list[Sim]) -> None:
    bests = [t for s in sims if (t := s.best()[1]) is not None]
    if bests:
        outcome.append((used, min(bests)))


def _finish(sims: list[Sim], trail: list[tuple[int, float]], used: int) -> Outcome:
    reachable = min(s.floor_ms for s in sims)
    best = min((t for _, t in trail), default=START_MS)
    first = next((u for u, t in trail if t <= WITHIN * reachable), None)
    return Outcome(best, reachable, used, first)


def run_old(seed: int, n: int, max_iter: int, from_best: bool = False) -> Outcome:
    """Every branch its max_iter; ``from_best``: with the new start rule (an ablation)."""
    sims = branches(seed, n)
    used, trail = 0, []
    last: dict[str, Decision] = {}
    while any(not s.stopped for s in sims):
        for s in sims:
            if s.stopped:
                continue
            latest = len(s.times) or None
            start = start_iteration(latest, s.best()[0], last.get(s.name)) if from_best else latest
            s.starts.append(start)
            s.times.append(draw(s, len(s.times) + 1, s.kernel_ms(start)))
            used += 1
            _track(trail, used, sims)
            last[s.name] = fake_decision(s)
            if last[s.name].action == "stop" or len(s.times) >= max_iter:
                s.stopped = True
    return _finish(sims, trail, used)


def run_new(seed: int, n: int, max_iter: int, from_best: bool = True) -> Outcome:
    """The engine's pool and polish; ``from_best`` False: with the old start rule (an ablation)."""
    sims = branches(seed, n)
    by_name = {s.name: s for s in sims}
    manifests = {
        s.name: BranchManifest(name=s.name, title=s.name, strategy=Strategy(name=s.name, title=s.name, description=""))
        for s in sims
    }
    cfg = BranchConfig(max_iter=max_iter)
    pool = IterationPool(n * max_iter)  # in memory: the same class the engine persists as pool.json
    budget = RunBudget(pool, lambda: list(manifests), manifests.get, lambda name: list(by_name[name].times))
    for s in sims:
        pool.register(s.name, max_iter)
    used, trail = 0, []
    last: dict[str, Decision] = {}
    while any(m.status not in ("done", "stopped") for m in manifests.values()):
        for s in sims:
            m = manifests[s.name]
            if m.status in ("done", "stopped"):
                continue
            index = len(s.times) + 1
            if m.iterations_done >= budget.allowance(m, cfg) or budget.begin_iteration(m, index, cfg) is not None:
                m.status = "done"
                budget.branch_ended(s.name)
                continue
            m.status = "running"
            latest = len(s.times) or None
            start = start_iteration(latest, s.best()[0], last.get(s.name)) if from_best else latest
            s.starts.append(start)
            s.times.append(draw(s, index, s.kernel_ms(start)))
            used += 1
            _track(trail, used, sims)
            has_next = budget.has_next_iteration(m, cfg)  # reserves the next one, or asks for a grant
            decision = fake_decision(s) if has_next else Decision(action="stop", reason="budget", automatic=True)
            last[s.name] = decision
            m.iterations_done = len(s.times)
            if decision.action == "stop":
                m.status = "stopped"
                budget.branch_ended(s.name)
    # The polish: one iteration on the run's best kernel, when the pool has one left.
    owner = min((s for s in sims if s.best()[1] is not None), key=lambda s: s.best()[1] or 0.0, default=None)
    if owner is not None and pool.left() >= 1:
        _, best_t = owner.best()
        polished = draw(owner, len(owner.times) + 1, best_t or START_MS, polish=True)
        used += 1
        if polished is not None and polished < (best_t or math.inf):
            trail.append((used, min(polished, min(t for _, t in trail))))
    return _finish(sims, trail, used)


def summarise(outcomes: list[Outcome]) -> tuple[float, float, float | None, float]:
    ratio = math.exp(statistics.fmean(math.log(o.best_ms / o.reachable_ms) for o in outcomes))
    within = sum(1 for o in outcomes if o.best_ms <= WITHIN * o.reachable_ms) / len(outcomes)
    reached = [o.to_within for o in outcomes if o.to_within is not None]
    median = statistics.median(reached) if reached else None
    return ratio, within, median, statistics.fmean(o.used for o in outcomes)


POLICIES = (
    ("old", lambda seed, n, m: run_old(seed, n, m)),
    ("new", lambda seed, n, m: run_new(seed, n, m)),
    ("old + start from best", lambda seed, n, m: run_old(seed, n, m, from_best=True)),
    ("new, start from latest", lambda seed, n, m: run_new(seed, n, m, from_best=False)),
)
SCENARIOS = (  # (label, failure probability, spread of the strategies' floors)
    ("base", 0.2, 0.35),
    ("failures p 0.4", 0.4, 0.35),
    ("spread 0.15", 0.2, 0.15),
    ("spread 0.7", 0.2, 0.7),
)


def main() -> int:
    global FAIL_P, QUALITY_SIGMA
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--strategies", type=int, default=4)
    ap.add_argument("--max-iter", type=int, default=5)
    args = ap.parse_args()
    print(f"FAKE outcome model (not calibrated on anything real): {args.seeds} seeds, {args.strategies} strategies, "
          f"max_iter {args.max_iter} (pool {args.strategies * args.max_iter})")  # fmt: skip
    print(f"{'scenario':<16}{'policy':<24}{'final best/reachable':>21}{'within 5 %':>12}{'iters to 5 %':>14}"
          f"{'iters used':>12}")  # fmt: skip
    for label, fail, spread in SCENARIOS:
        FAIL_P, QUALITY_SIGMA = fail, spread
        for name, policy in POLICIES:
            outcomes = [policy(seed, args.strategies, args.max_iter) for seed in range(args.seeds)]
            ratio, within, median, used = summarise(outcomes)
            shown = f"{median:.0f}" if median is not None else "-"
            print(f"{label:<16}{name:<24}{ratio:>21.3f}{within:>11.0%} {shown:>13}{used:>12.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
