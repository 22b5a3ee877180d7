"""Time to a good configuration on a large space: every ktt strategy against Kernel Tuner 1.5.0's.

    python bench/search_large_space.py --establish [--establish-budget 90]    # once: the best-known time
    python bench/search_large_space.py [--budget 10] [--seeds 3]              # the comparison (one GPU)
    python bench/search_large_space.py --dry-run                              # FAKE tuners, CPU only

The space (bench/large_space/): bench/gemm_space's tiled SGEMM with five more parameters
(load widths of A and B, k-loop unrolling, double buffering, block swizzle), 359,856 valid
configurations of 442,368, M = N = K = 2048 (the problem directory is bench/gemm_space/problem).

``--establish`` runs ``ktt tune --strategy auto`` for a long budget, re-times its ten best in
one ktt run and records the fastest as bench/large_space/best_known.json (with the command,
date, device and counts). The comparison then runs, on the same GPU and one after the other,
the ktt strategies of ``--strategies`` (default auto, genetic, annealing, surrogate; any registered
name may be added: ``ktt tune --strategy NAME``, a fresh compile cache per run) and Kernel
Tuner's random_sample, genetic_algorithm, dual_annealing and bayes_opt
(bench/large_space/kt_run.py), ``--seeds`` seeds each, every run with the same wall budget
counted from the tool's start (ktt: its process start, so its setup counts against it; Kernel
Tuner: the call of tune_kernel, so its search-space construction counts, the harness's
reference product does not). Per run: the time until a configuration within 2 % of the
best-known was measured, and the best reached within the budget.

Kernel Tuner's own times (a mean of 7 runs without an L2 flush) are not ktt's (a median with
a flush), so every Kernel Tuner configuration that could matter (within 10 % of the fastest
Kernel Tuner time, and each run's best) is re-timed by ktt in one run at the end, and Kernel
Tuner's runs are judged by those times; the best-known configuration is re-timed in the same
run, to show the drift since it was recorded. Prints a table, writes OUT/search_large_space.json.

On the GPU machine (the project not pip-installed, the wheels in .whl/), both modes in one
call, about 7.5 minutes (establish about 2; the comparison about 5.5: 8 strategies x 3 seeds x
about 13.5 s, then one re-timing run):

    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site:$PWD
    python3 bench/search_large_space.py --establish --out /tmp/sls && python3 bench/search_large_space.py --out /tmp/sls
    cp /tmp/sls/best_known.json /tmp/sls/search_large_space.json $OUT/

then commit best_known.json as bench/large_space/best_known.json.

``--dry-run`` replaces both tools by FAKES (no GPU, no compiler): ktt's strategies are driven
in-process at a simulated 35 configurations/s after a simulated 3 s setup, Kernel Tuner's
names by uniform random sampling at 3.5 configurations/s, all timed by the fake model of
bench/large_space/fake_gemm.py. It tests the harness; its figures mean nothing about the GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SPACE = HERE / "large_space"
PROBLEM = HERE / "gemm_space" / "problem"
KERNEL = SPACE / "sgemm_large.cu"
SPEC = SPACE / "tuning.yaml"
BEST_KNOWN = SPACE / "best_known.json"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(SPACE))

BAND = 0.02
KTT_STRATEGIES = ["auto", "genetic", "annealing", "surrogate"]  # random, random_local, exhaustive: --strategies
KT_STRATEGIES = ["random_sample", "genetic_algorithm", "dual_annealing", "bayes_opt"]
RETIME_MARGIN = 1.10  # Kernel Tuner configurations within this factor of its fastest are re-timed by ktt
RETIME_MAX = 120  # configurations per re-timing run (the spec's expression limits)
TARGET_RATIO = 1 / 3
ESTABLISH_SEED = 1000  # not one of the comparison's seeds (0, 1, ...): no run replays the long run's start
KT_REFERENCE = Path(tempfile.gettempdir()) / f"kt_reference_{os.getpid()}.npz"  # 48 MB: kept out of OUT
FAKE_KTT = {"rate": 35.0, "setup_s": 3.0, "in_flight": 30}
FAKE_KT = {"rate": 3.5, "setup_s": 2.0}


@dataclass
class Run:
    tool: str  # "ktt" or "kernel_tuner" (or "fake ktt" / "fake kernel_tuner")
    strategy: str
    seed: int
    events: list[list[Any]] = field(default_factory=list)  # [seconds from the tool's start, config, ms | None]
    wall_s: float = 0.0
    label: str = ""  # what the tool said it did (ktt's summary strategy)
    error: str | None = None


def params() -> tuple[list[str], dict[str, list[Any]], list[str]]:
    import yaml

    spec = yaml.safe_load(SPEC.read_text())
    return list(spec["tune_params"]), spec["tune_params"], spec["restrictions"]


def ckey(config: dict[str, Any], names: list[str]) -> str:
    return json.dumps([config[n] for n in names])


# -- ktt on the GPU ----------------------------------------------------------------------------------


def ktt_run(strategy: str, seed: int, budget: float, out: Path, ref_time: Path, spec: Path = SPEC) -> Run:
    out.mkdir(parents=True, exist_ok=True)
    cache = Path(tempfile.mkdtemp(prefix="ktt-cache-"))  # a fresh compile cache: no run profits from another
    cmd = [
        sys.executable, "-m", "ktt", "tune", "--problem", str(PROBLEM), "--kernel", str(KERNEL),
        "--spec", str(spec), "--output", str(out), "--duration", f"{budget:g}", "--seed", str(seed),
        "--strategy", strategy, "--reference-time", str(ref_time), "--cache-dir", str(cache), "--json",
    ]  # fmt: skip
    run = Run("ktt", strategy, seed)
    t0 = time.time()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=max(budget, 30) * 4 + 120, cwd=ROOT)
    except subprocess.TimeoutExpired:
        run.error = "timed out"
        return run
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    run.wall_s = time.time() - t0
    (out / "stdout.jsonl").write_text(proc.stdout)
    (out / "stderr.txt").write_text(proc.stderr[-20000:])
    lines = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines or lines[-1].get("type") != "result":
        run.error = f"exit {proc.returncode}: {(proc.stderr or proc.stdout)[-500:]}"
        return run
    run.label = lines[-1].get("strategy", "")
    for line in (out / "results.jsonl").read_text().splitlines():
        row = json.loads(line)
        ms = row["time_ms"] if row["status"] == "ok" else None
        run.events.append([round(row["finished_at"] - t0, 4), row["config"], ms])
    run.events.sort(key=lambda e: e[0])
    return run


def retime_spec(configs: list[dict[str, Any]], path: Path) -> None:
    """A spec whose valid configurations are exactly ``configs``: PICK = i selects the i-th.

    One restriction per parameter: for each of its values, the PICK indices that have it (as
    ranges; the configurations are sorted so that ranges are long), OR-ed in a balanced tree
    (the expression limits: 4,096 characters, 100 levels). ValueError when one is too long.
    """
    import yaml

    names, _, _ = params()
    spec = yaml.safe_load(SPEC.read_text())

    def any_of(terms: list[str]) -> str:
        if len(terms) == 1:
            return terms[0]
        mid = len(terms) // 2
        return f"({any_of(terms[:mid])} || {any_of(terms[mid:])})"

    def ranges(indices: list[int]) -> list[str]:
        out, start = [], indices[0]
        for prev, cur in zip(indices, [*indices[1:], None], strict=True):
            if cur != prev + 1:
                out.append(f"PICK == {start}" if start == prev else f"(PICK >= {start} && PICK <= {prev})")
                start = cur
        return out

    restrictions = []
    for n in names:
        by_value: dict[Any, list[int]] = {}
        for i, c in enumerate(configs):
            by_value.setdefault(c[n], []).append(i)
        text = any_of([f"({n} == {v} && {any_of(ranges(idx))})" for v, idx in by_value.items()])
        if len(text) > 4000:
            raise ValueError(f"re-timing {len(configs)} configurations at once: the restriction on {n} is too long")
        restrictions.append(text)
    tune_params = {"PICK": list(range(len(configs)))}
    tune_params.update({n: sorted({c[n] for c in configs}) for n in names})
    spec["tune_params"] = tune_params
    spec["restrictions"] = restrictions
    path.write_text(yaml.safe_dump(spec, sort_keys=False, width=10_000))


def ktt_retime(configs: list[dict[str, Any]], out: Path, ref_time: Path) -> dict[str, float | None]:
    """ktt's time of each configuration, in runs of ``RETIME_MAX`` (exhaustive, no time limit)."""
    names, _, _ = params()
    times: dict[str, float | None] = {}
    configs = sorted(configs, key=lambda c: [c[n] for n in names])  # long PICK ranges in retime_spec
    chunks = [configs[i : i + RETIME_MAX] for i in range(0, len(configs), RETIME_MAX)]
    done = 0
    while chunks:
        chunk = chunks.pop(0)
        d = out / f"retime_{done}"
        d.mkdir(parents=True, exist_ok=True)
        spec = d / "retime.yaml"
        try:
            retime_spec(chunk, spec)
        except ValueError:  # a restriction too long: two smaller runs
            mid = len(chunk) // 2
            chunks[:0] = [chunk[:mid], chunk[mid:]]
            continue
        done += 1
        run = ktt_run("exhaustive", 0, 0, d, ref_time, spec)
        if run.error:
            raise RuntimeError(f"re-timing failed: {run.error}")
        for _, config, ms in run.events:
            times[ckey(config, names)] = ms
    return times


# -- Kernel Tuner on the GPU ---------------------------------------------------------------------------


def kt_run(strategy: str, seed: int, budget: float, out: Path) -> Run:
    out.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable, str(SPACE / "kt_run.py"), "--strategy", strategy, "--seed", str(seed),
        "--time-limit", f"{budget:g}", "--ref-cache", str(KT_REFERENCE),
    ]  # fmt: skip
    run = Run("kernel_tuner", strategy, seed)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=max(budget, 30) * 6 + 300, cwd=ROOT)
    except subprocess.TimeoutExpired:
        run.error = "timed out"
        return run
    (out / f"kt_{strategy}_{seed}.log").write_text(proc.stdout[-200000:] + "\n--- stderr ---\n" + proc.stderr[-20000:])
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        run.error = f"exit {proc.returncode}: {proc.stderr[-500:]}"
        return run
    data = json.loads(lines[-1])
    run.events, run.wall_s, run.label = data["events"], data["wall_s"], data["tool"]
    return run


# -- the fakes (--dry-run) -----------------------------------------------------------------------------


class FakeWorld:
    """FAKE tuners on the fake timing model: simulated clocks, no GPU, no compiler."""

    def __init__(self) -> None:
        from fake_gemm import FakeGemm

        from ktt.expressions import Expression
        from ktt.space import SearchSpace

        names, values, restrictions = params()
        self.names = names
        self.space = SearchSpace(values, [Expression(r) for r in restrictions], {"M": 2048, "N": 2048, "K": 2048})
        self.model = FakeGemm()

    def time_ms(self, config: dict[str, Any]) -> float | None:
        return self.model.time_ms(config)

    def ktt(self, strategy: str, seed: int, budget: float, horizon: float | None = None) -> Run:
        """ktt's real strategy, driven as the tuner drives it, on a simulated clock."""
        from ktt.search import Search

        rate, setup, in_flight = FAKE_KTT["rate"], FAKE_KTT["setup_s"], FAKE_KTT["in_flight"]
        limit = horizon if horizon is not None else budget
        search = Search(self.space, None, strategy, seed)
        run = Run("fake ktt", strategy, seed)
        inflight: list[tuple] = []
        n = 0
        while True:
            clock = setup + (n + 1) / rate
            if clock > limit + setup:
                break
            while len(inflight) < in_flight:
                key = search.propose()
                if key is None:
                    break
                inflight.append(key)
            if not inflight:
                break
            key = inflight.pop(0)
            n += 1
            ms = self.time_ms(self.space.config(key))
            search.report(key, ms)
            run.events.append([round(clock, 4), self.space.config(key), ms])
            if n % 35 == 0:
                search.pace(n, n / rate, limit - n / rate)
        run.wall_s = setup + n / rate
        run.label = search.strategy_name()
        return run

    def kernel_tuner(self, strategy: str, seed: int, budget: float) -> Run:
        """A FAKE Kernel Tuner: uniform random sampling at its measured rate, whatever the strategy's name."""
        rng = random.Random(f"{strategy}:{seed}")
        run = Run("fake kernel_tuner", strategy, seed)
        seen: set = set()
        n = 0
        while FAKE_KT["setup_s"] + (n + 1) / FAKE_KT["rate"] <= budget + FAKE_KT["setup_s"]:
            key = self.space.sample(rng, seen)
            if key is None:
                break
            seen.add(key)
            n += 1
            ms = self.time_ms(self.space.config(key))
            run.events.append([round(FAKE_KT["setup_s"] + n / FAKE_KT["rate"], 4), self.space.config(key), ms])
        run.wall_s = FAKE_KT["setup_s"] + n / FAKE_KT["rate"]
        run.label = "fake (random sampling)"
        return run


# -- analysis ------------------------------------------------------------------------------------------


def run_figures(run: Run, budget: float, best_ms: float, times: dict[str, float | None] | None, names: list[str]):
    """(seconds to the 2 % band or None, best within the budget in ms or None, evaluated within the budget)."""
    hit = None
    best = None
    evaluated = 0
    for t, config, own in run.events:
        if t > budget:
            break
        evaluated += 1
        ms = own if times is None else times.get(ckey(config, names))
        if ms is None:
            continue
        if best is None or ms < best:
            best = ms
        if hit is None and ms <= best_ms * (1 + BAND):
            hit = t
    return hit, best, evaluated


def summarise(values: list[float | None]) -> tuple[float, float, float]:
    """Median, min, max, where None counts as infinity (not reached)."""
    v = sorted(math.inf if x is None else x for x in values)
    return statistics.median(v), v[0], v[-1]


def fmt_s(x: float, budget: float) -> str:
    return f"> {budget:g}" if math.isinf(x) else f"{x:.1f}"


def analyse(runs: list[Run], budget: float, best: dict[str, Any], times: dict[str, float | None] | None) -> dict:
    names, _, _ = params()
    best_ms = best["time_ms"]
    groups: dict[tuple[str, str], list[Run]] = {}
    for r in runs:
        groups.setdefault((r.tool, r.strategy), []).append(r)
    rows = []
    for (tool, strategy), group in groups.items():
        figs = [
            run_figures(r, budget, best_ms, times if "kernel_tuner" in tool else None, names)
            for r in group
            if not r.error
        ]
        hits = [f[0] for f in figs]
        bests = [f[1] / best_ms if f[1] else None for f in figs]
        rows.append(
            {
                "tool": tool,
                "strategy": strategy,
                "runs": len(group),
                "failed_runs": [r.error for r in group if r.error],
                "reached": sum(h is not None for h in hits),
                "time_to_band_s": hits,
                "time_to_band": summarise(hits) if hits else None,
                "best_over_known": bests,
                "best": summarise(bests) if bests else None,
                "evaluated_median": statistics.median([f[2] for f in figs]) if figs else 0,
                "labels": sorted({r.label for r in group if r.label}),
            }
        )
    ours = next((r for r in rows if r["tool"].endswith("ktt") and r["strategy"] == "auto"), None)
    peers = [r for r in rows if r["tool"].endswith("kernel_tuner") and r["time_to_band"]]
    verdict: dict[str, Any] = {}
    if ours and ours["time_to_band"] and peers:
        peer = min(peers, key=lambda r: (r["time_to_band"][0], r["best"][0] if r["best"] else math.inf))
        mine, theirs = ours["time_to_band"][0], peer["time_to_band"][0]
        verdict = {
            "ktt_auto_median_s": mine,
            "best_peer": peer["strategy"],
            "best_peer_median_s": theirs,
            "ratio": None if math.isinf(theirs) or math.isinf(mine) else mine / theirs,
            "peer_censored": math.isinf(theirs),
            # A peer that never reached the band took more than the budget: then the bound is budget / 3.
            "met": (not math.isinf(mine)) and mine <= TARGET_RATIO * (budget if math.isinf(theirs) else theirs),
        }
    return {"rows": rows, "verdict": verdict}


def print_table(report: dict, budget: float, seeds: int) -> None:
    print()
    print(
        f"2 % band of the best-known {report['best_known']['time_ms']:.4g} ms; {seeds} seeds; "
        f"budget {budget:g} s per run (from the tool's start)"
    )
    head = f"{'tool':18s} {'strategy':18s} {'in band':>8s} {'time to band s: median [min-max]':>34s} "
    head += f"{'best/known: median [min-max]':>30s} {'evaluated':>9s}"
    print(head)
    for r in report["analysis"]["rows"]:
        ttb = r["time_to_band"]
        tb = f"{fmt_s(ttb[0], budget)} [{fmt_s(ttb[1], budget)}-{fmt_s(ttb[2], budget)}]" if ttb else "-"
        b = r["best"]
        bb = "-" if not b else f"{b[0]:.3f} [{b[1]:.3f}-{b[2]:.3f}]"
        reached = f"{r['reached']}/{r['runs']}"
        print(f"{r['tool']:18s} {r['strategy']:18s} {reached:>8s} {tb:>34s} {bb:>30s} {r['evaluated_median']:>9g}")
        for e in r["failed_runs"]:
            print(f"    failed run: {e[:200]}")
    v = report["analysis"]["verdict"]
    if v:
        peer = fmt_s(v["best_peer_median_s"], budget)
        if v["ratio"] is not None:
            ratio = f"{v['ratio']:.3f}"
        elif math.isinf(v["ktt_auto_median_s"]):
            ratio = "- (ktt auto did not reach the band in half its runs)"
        else:
            ratio = f"<= {v['ktt_auto_median_s'] / budget:.3f} (a bound: the peer never reached the band in budget)"
        print(
            f"\nktt auto median {fmt_s(v['ktt_auto_median_s'], budget)} s vs Kernel Tuner's best ({v['best_peer']}) "
            f"{peer} s: ratio {ratio}; target <= {TARGET_RATIO:.3f}: {'met' if v['met'] else 'NOT met'}"
        )
    drift = report.get("best_known_retimed_ms")
    if drift:
        recorded = report["best_known"]["time_ms"]
        print(f"best-known configuration re-timed in this run: {drift:.4g} ms (recorded {recorded:.4g})")


# -- the modes -------------------------------------------------------------------------------------------


def establish(args: argparse.Namespace) -> int:
    out = args.out / "establish"
    out.mkdir(parents=True, exist_ok=True)
    names, _, _ = params()
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    if args.dry_run:
        world = FakeWorld()
        run = world.ktt("auto", ESTABLISH_SEED, args.establish_budget, horizon=args.establish_budget)
        top = sorted((e for e in run.events if e[2] is not None), key=lambda e: e[2])[:10]
        retimed = {ckey(e[1], names): world.time_ms(e[1]) for e in top}
        device = "FAKE (fake_gemm.py)"
    else:
        run = ktt_run("auto", ESTABLISH_SEED, args.establish_budget, out / "long", out / "reference_time.json")
        if run.error:
            print(f"error: the long run failed: {run.error}", file=sys.stderr)
            return 1
        top = sorted((e for e in run.events if e[2] is not None), key=lambda e: e[2])[:10]
        retimed = ktt_retime([e[1] for e in top], out / "retime", out / "reference_time.json")
        summary = json.loads((out / "long" / "summary.json").read_text())
        device = summary.get("device", "")
    pairs = [(ms, e[1]) for e in top if (ms := retimed.get(ckey(e[1], names))) is not None]
    if not pairs:
        print("error: no valid configuration to record", file=sys.stderr)
        return 1
    ms, config = min(pairs, key=lambda p: p[0])
    record = {
        "time_ms": ms,
        "config": config,
        "made": (
            f"python bench/search_large_space.py --establish --establish-budget {args.establish_budget:g}: "
            f"ktt tune --strategy auto --seed {ESTABLISH_SEED} for {args.establish_budget:g} s, then its 10 best "
            "re-timed in one "
            "ktt run (exhaustive); the fastest re-timed median is this time"
        ),
        "date": started,
        "device": device,
        "evaluated": len(run.events),
        "valid": sum(1 for e in run.events if e[2] is not None),
        "long_run_best_ms": top[0][2],
        "retimed_top10_ms": sorted(m for m, _ in pairs),
        "fake": bool(args.dry_run),
    }
    text = json.dumps(record, indent=2) + "\n"
    (args.out / "best_known.json").write_text(text)
    if not args.dry_run:
        BEST_KNOWN.write_text(text)  # the checkout's copy: commit it from the device's $OUT
    print(text)
    return 0


def compare(args: argparse.Namespace) -> int:
    names, _, _ = params()
    best_file = args.best_known or (args.out / "best_known.json" if args.dry_run else BEST_KNOWN)
    if not best_file.exists():
        print(f"error: {best_file}: no best-known time; run --establish first", file=sys.stderr)
        return 2
    best = json.loads(best_file.read_text())
    if best.get("fake") and not args.dry_run:
        print(f"error: {best_file}: a fake (--dry-run) best-known time; run --establish on the GPU", file=sys.stderr)
        return 2
    ours = args.strategies.split(",") if args.strategies else KTT_STRATEGIES
    theirs = args.kt_strategies.split(",") if args.kt_strategies is not None else KT_STRATEGIES
    theirs = [s for s in theirs if s]
    from ktt import strategies

    unknown = [s for s in ours if s not in strategies.REGISTRY]
    if unknown:
        print(f"error: --strategies: unknown ktt strategy {unknown[0]!r}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    world = FakeWorld() if args.dry_run else None
    ref_time = args.out / "reference_time.json"
    runs: list[Run] = []
    started = time.monotonic()
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    for seed in seeds:  # seeds outermost: drift over the session hits every strategy alike
        for s in ours:
            where = args.out / "ktt" / f"{s}_{seed}"
            run = world.ktt(s, seed, args.budget) if world else ktt_run(s, seed, args.budget, where, ref_time)
            runs.append(run)
            print(f"[{time.monotonic() - started:6.0f}s] {run.tool} {s} seed {seed}: {len(run.events)} results"
                  + (f", error {run.error}" if run.error else ""), flush=True)  # fmt: skip
        for s in theirs:
            run = world.kernel_tuner(s, seed, args.budget) if world else kt_run(s, seed, args.budget, args.out / "kt")
            runs.append(run)
            print(f"[{time.monotonic() - started:6.0f}s] {run.tool} {s} seed {seed}: {len(run.events)} results"
                  + (f", error {run.error}" if run.error else ""), flush=True)  # fmt: skip
    # Re-time with ktt what Kernel Tuner found (its own times are another method), and the best-known.
    kt_events = [e for r in runs if "kernel_tuner" in r.tool and not r.error for e in r.events if e[0] <= args.budget]
    times: dict[str, float | None] | None = None
    retimed_best = None
    retime_error = None
    if kt_events:
        fastest = min((e[2] for e in kt_events if e[2] is not None), default=None)
        picks: dict[str, dict[str, Any]] = {ckey(best["config"], names): best["config"]}
        for e in sorted((e for e in kt_events if e[2] is not None), key=lambda e: e[2]):
            if fastest is not None and e[2] <= fastest * RETIME_MARGIN:
                picks.setdefault(ckey(e[1], names), e[1])
        for r in runs:  # each run's own best within the budget, whatever its margin
            ok = [e for e in r.events if e[0] <= args.budget and e[2] is not None]
            if "kernel_tuner" in r.tool and ok:
                e = min(ok, key=lambda e: e[2])
                picks.setdefault(ckey(e[1], names), e[1])
        configs = list(picks.values())
        if world:
            times = {ckey(c, names): world.time_ms(c) for c in configs}
        else:
            try:
                times = ktt_retime(configs, args.out / "retime", ref_time)
            except RuntimeError as exc:  # keep the runs: Kernel Tuner is then judged by its own times
                retime_error = str(exc)
                print(f"warning: {exc}; Kernel Tuner's runs are judged by its own times", file=sys.stderr)
        retimed_best = times.get(ckey(best["config"], names)) if times else None
    report = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "fake": bool(args.dry_run),
        "budget_s": args.budget,
        "seeds": args.seeds,
        "seed_list": list(seeds),
        "band": BAND,
        "best_known": best,
        "best_known_retimed_ms": retimed_best,
        "kt_retimed": len(times or {}),
        "retimed": times or {},
        "retime_error": retime_error,
        "analysis": analyse(runs, args.budget, best, times),
        "runs": [asdict(r) for r in runs],
        "harness_wall_s": round(time.monotonic() - started, 1),
    }
    with contextlib.suppress(Exception):
        report["commit"] = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT, timeout=10
        ).stdout.strip()
    KT_REFERENCE.unlink(missing_ok=True)
    (args.out / "search_large_space.json").write_text(json.dumps(report, indent=1))
    if args.dry_run:
        print(
            "\nFAKE RUN (--dry-run): fake tuners on the fake model of bench/large_space/fake_gemm.py, not a measurement"
        )
    print_table(report, args.budget, args.seeds)
    print(f"\nwritten: {args.out / 'search_large_space.json'} ({report['harness_wall_s']:.0f} s)")
    return 0


def merge(paths: list[Path], out: Path) -> int:
    """One table from comparisons run in several calls (``--first-seed``): the runs and the re-timings, joined.

    Each part re-timed its own Kernel Tuner configurations (and the best-known) in its own
    call; a configuration re-timed in two parts keeps the later part's time.
    """
    reports = []
    for p in paths:
        try:
            reports.append(json.loads(p.read_text()))
        except (OSError, ValueError) as exc:
            print(f"error: {p}: {exc}", file=sys.stderr)
            return 2
    budgets = {r["budget_s"] for r in reports}
    if len(budgets) != 1 or (any(r.get("fake") for r in reports) and not all(r.get("fake") for r in reports)):
        print("error: --merge: the parts differ in budget or in being fake runs", file=sys.stderr)
        return 2
    seen: set[int] = set()
    for r in reports:
        part = set(r.get("seed_list") or range(r["seeds"]))
        if part & seen:
            print(f"error: --merge: seed {min(part & seen)} is in two parts", file=sys.stderr)
            return 2
        seen |= part
    budget = budgets.pop()
    runs = [Run(**run) for r in reports for run in r["runs"]]
    times: dict[str, float | None] = {}
    for r in reports:
        times.update(r.get("retimed") or {})
    best = reports[-1]["best_known"]
    report = {
        **reports[-1],
        "seeds": len(seen),
        "seed_list": sorted(seen),
        "parts": [str(p) for p in paths],
        "part_dates": [r["date"] for r in reports],
        "best_known_retimed_ms_by_part": [r.get("best_known_retimed_ms") for r in reports],
        "retimed": times,
        "analysis": analyse(runs, budget, best, times or None),
        "runs": [asdict(r) for r in runs],
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "search_large_space.json").write_text(json.dumps(report, indent=1))
    print(f"merged {len(paths)} parts, seeds {sorted(seen)}")
    print_table(report, budget, len(seen))
    print(f"\nwritten: {out / 'search_large_space.json'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--establish", action="store_true", help="record the best-known time (a long ktt run)")
    ap.add_argument("--establish-budget", type=float, default=90.0, help="seconds of the long run (default 90)")
    ap.add_argument("--budget", type=float, default=10.0, help="wall-clock seconds per run (default 10)")
    ap.add_argument("--seeds", type=int, default=3, help="seeds per strategy (default 3; 5 for the issue's figure)")
    ap.add_argument("--first-seed", type=int, default=0, help="the first seed (to split the seeds over calls)")
    ap.add_argument("--merge", type=Path, nargs="+", default=None, help="join search_large_space.json parts")
    ap.add_argument("--strategies", default=None, help=f"ktt strategies (default {','.join(KTT_STRATEGIES)})")
    ap.add_argument(
        "--kt-strategies", default=None, help=f"Kernel Tuner's (default {','.join(KT_STRATEGIES)}; '' for none)"
    )
    ap.add_argument("--best-known", type=Path, default=None, help=f"default {BEST_KNOWN.relative_to(ROOT)}")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp")) / "search_large_space")
    ap.add_argument("--dry-run", action="store_true", help="FAKE tuners on a fake model, CPU only (tests the harness)")
    args = ap.parse_args(argv)
    if args.budget <= 0 or args.seeds < 1 or args.establish_budget <= 0 or args.first_seed < 0:
        print("error: --budget, --establish-budget and --seeds must be positive", file=sys.stderr)
        return 2
    if args.merge:
        return merge(args.merge, args.out)
    return establish(args) if args.establish else compare(args)


if __name__ == "__main__":
    sys.exit(main())
