"""The mbarrier protocol of the gemm_bf16 Hopper kernel, played out on the CPU under random schedules.

A model of problems/gemm_bf16/example/kernels.cu's pipeline, transcribed from its device code
(the parities are the kernel's own: tests/problem/test_gemm_bf16_layout.py checks them):
each CTA has per stage a `full` barrier (1 arrival: the producer's arrive.expect_tx of the
stage's bytes, then the copies' complete_tx) and an `empty` barrier (one arrival per consumer
warpgroup of every CTA of the cluster); TMA copies land at arbitrary later times (BT's slices
multicast to every CTA of the cluster); a consumer waits on `full`, keeps its wgmma group in
flight until it commits the next one (wait_group 1), then releases the stage on every CTA's
`empty`. With PRODUCER = 0 the first consumer warpgroup refills the stage it released.

Barrier semantics (PTX ISA, mbarrier): a phase completes when its pending arrivals reach zero and
its transaction count is zero; try_wait.parity P returns once the phase of parity P has completed.
For every schedule the kernel must finish (no deadlock), a consumer must see exactly its k-tile in
the stage (every copy of it landed, none of a later one), no copy may land in a stage a consumer is
still reading, and no barrier may run two phases ahead of a waiter (the parity would alias).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest


class ProtocolError(AssertionError):
    pass


@dataclass
class Barrier:
    count: int
    phase: int = 0  # phases completed
    pending: int = 0
    tx: int = 0

    def __post_init__(self) -> None:
        self.pending = self.count

    def _maybe_complete(self) -> None:
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.count

    def arrive(self, expect_tx: int = 0) -> None:
        self.tx += expect_tx
        self.pending -= 1
        if self.pending < 0:
            raise ProtocolError("more arrivals than the barrier's count in one phase")
        self._maybe_complete()

    def complete_tx(self, nbytes: int) -> None:
        self.tx -= nbytes
        self._maybe_complete()

    def passed(self, parity: int, wanted_phase: int) -> bool:
        if self.phase > wanted_phase + 1:
            raise ProtocolError(f"barrier ran {self.phase - wanted_phase} phases past a waiter: parity aliases")
        return self.phase > wanted_phase and (self.phase - 1) % 2 == parity


@dataclass
class Cta:
    full: list[Barrier]
    empty: list[Barrier]
    stage: list[dict] = field(default_factory=list)  # part -> k-tile that last landed there
    reading: list[set] = field(default_factory=list)  # (warpgroup, k-tile) reads in flight per stage


def play(cfg: dict[str, int], kt_count: int, seed: int, drop_remote_arrive: bool = False) -> None:
    stages, cons, cm, producer = cfg["STAGES"], cfg["CONSUMERS"], cfg["CLUSTER_M"], cfg["PRODUCER"]
    a_bytes, b_slice = 1000, 600  # any sizes: the stage expects a_bytes + cm * b_slice
    tx = a_bytes + cm * b_slice
    ctas = [Cta([Barrier(1) for _ in range(stages)], [Barrier(cons * cm) for _ in range(stages)],
                [{} for _ in range(stages)], [set() for _ in range(stages)]) for _ in range(cm)]  # fmt: skip
    in_flight: list[tuple[int, int, str, int, int]] = []  # (dst cta, stage, part, k-tile, bytes)
    rng = random.Random(seed)

    def full_parity(kt: int) -> int:
        return (kt // stages) & 1

    def empty_parity(kt: int) -> int:
        return ((kt // stages) - 1) & 1

    # An actor yields None for a step, or a predicate: it is blocked until the predicate holds.
    def wait(bar: Barrier, parity: int, phase: int):
        yield lambda: bar.passed(parity, phase)

    def produce(c: int, kt: int):
        s = kt % stages
        ctas[c].full[s].arrive(expect_tx=tx)
        in_flight.append((c, s, "A", kt, a_bytes))
        for dst in range(cm):  # multicast of this CTA's slice
            in_flight.append((dst, s, f"B{c}", kt, b_slice))
        yield None

    def producer_loop(c: int):
        for kt in range(kt_count):
            if kt >= stages:
                yield from wait(ctas[c].empty[kt % stages], empty_parity(kt), kt // stages - 1)
            yield from produce(c, kt)

    def release(c: int, kt: int):
        for dst in range(cm):
            if drop_remote_arrive and dst != c:
                continue
            ctas[dst].empty[kt % stages].arrive()
        yield None

    def consumer(c: int, w: int):
        cta = ctas[c]
        if not producer and w == 0:
            for kt in range(min(stages, kt_count)):
                yield from produce(c, kt)
        for kt in range(kt_count):
            s = kt % stages
            yield from wait(cta.full[s], full_parity(kt), kt // stages)
            parts = {"A", *(f"B{r}" for r in range(cm))}
            if cta.stage[s] != dict.fromkeys(parts, kt):
                raise ProtocolError(f"CTA {c} warpgroup {w} read k-tile {kt} from a stage holding {cta.stage[s]}")
            cta.reading[s].add((w, kt))
            yield None  # wgmma of kt issued and committed; then wait_group 1 retires kt - 1
            if kt > 0:
                cta.reading[(kt - 1) % stages].discard((w, kt - 1))
                yield from release(c, kt - 1)
            if not producer and w == 0 and kt > 0 and kt - 1 + stages < kt_count:
                nxt = kt - 1 + stages
                yield from wait(cta.empty[nxt % stages], empty_parity(nxt), nxt // stages - 1)
                yield from produce(c, nxt)
        cta.reading[(kt_count - 1) % stages].discard((w, kt_count - 1))
        yield from release(c, kt_count - 1)

    actors = [consumer(c, w) for c in range(cm) for w in range(cons)]
    if producer:
        actors += [producer_loop(c) for c in range(cm)]
    blocked: dict[int, object] = {}  # actor index -> the predicate it waits on
    live = set(range(len(actors)))
    while live or in_flight:
        runnable = [i for i in sorted(live) if i not in blocked or blocked[i]()]  # type: ignore[operator]
        if not runnable and not in_flight:
            raise ProtocolError(f"deadlock: {len(live)} actors wait and no copy is in flight")
        pick = rng.randrange(len(runnable) + len(in_flight))
        if pick < len(runnable):
            i = runnable[pick]
            blocked.pop(i, None)
            try:
                step = next(actors[i])
            except StopIteration:
                live.discard(i)
                continue
            if step is not None:
                blocked[i] = step
            continue
        dst, s, part, kt, nbytes = in_flight.pop(pick - len(runnable))
        cta = ctas[dst]
        if cta.reading[s]:
            raise ProtocolError(f"a copy of k-tile {kt} landed in CTA {dst} stage {s} while {cta.reading[s]} read it")
        cta.stage[s][part] = kt
        cta.full[s].complete_tx(nbytes)
    for c, cta in enumerate(ctas):
        for s in range(stages):
            if cta.reading[s]:
                raise ProtocolError(f"CTA {c} stage {s} still read at the end")


CONFIGS = [
    {"STAGES": s, "CONSUMERS": c, "CLUSTER_M": m, "PRODUCER": p}
    for s in (3, 4) for c in (1, 2) for m in (1, 2) for p in (0, 1)
]  # fmt: skip


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: "-".join(f"{k[0]}{v}" for k, v in c.items()))
def test_the_pipeline_finishes_and_never_reads_or_overwrites_a_wrong_stage(cfg: dict[str, int]) -> None:
    for seed in range(60):
        play(cfg, 3 * cfg["STAGES"] + 2, seed)


@pytest.mark.parametrize("producer", [0, 1])
def test_the_model_catches_a_missing_remote_arrive(producer: int) -> None:
    """Without the arrive on the peer's empty barrier a cluster's producer never refills: deadlock."""
    cfg = {"STAGES": 3, "CONSUMERS": 1, "CLUSTER_M": 2, "PRODUCER": producer}
    with pytest.raises(ProtocolError, match="deadlock"):
        play(cfg, 3 * cfg["STAGES"] + 2, 0, drop_remote_arrive=True)


def test_the_model_catches_an_empty_barrier_counting_too_few() -> None:
    """With one arrival expected per stage instead of one per consumer warpgroup, the protocol breaks
    (a phase gets more arrivals than it counts, or a stage is refilled while read)."""
    cfg = {"STAGES": 3, "CONSUMERS": 2, "CLUSTER_M": 1, "PRODUCER": 1}
    original = Barrier.__post_init__

    def fewer(self: Barrier) -> None:
        if self.count == 2:
            self.count = 1
        original(self)

    Barrier.__post_init__ = fewer  # type: ignore[method-assign]
    try:
        with pytest.raises(ProtocolError):
            for seed in range(60):
                play(cfg, 3 * cfg["STAGES"] + 2, seed)
    finally:
        Barrier.__post_init__ = original  # type: ignore[method-assign]
