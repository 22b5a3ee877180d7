"""Where each run of a suite goes: one local GPU per run, or a share of a Ray cluster.

Locally a run is given one GPU of its own (``--gpus N``), so two runs never time kernels
against each other, and the next problem starts on whichever GPU comes free first. On a
Ray cluster every run gets the whole cluster (``--cluster``) and Ray places its jobs; the
suite only bounds how many runs are in flight (the cluster's GPU count).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Slot:
    label: str  # "GPU 1", "cluster slot 3", "dry-run slot 2"
    flags: tuple[str, ...]  # what the run is given: ("--gpus", "1") or ("--cluster", "ray://...")


class SlotPool:
    """At most one run per slot; a run waits for the first slot to come free."""

    def __init__(self, slots: list[Slot]) -> None:
        if not slots:
            raise ValueError("a suite needs at least one slot")
        self.slots = list(slots)
        self._free: asyncio.Queue[Slot] = asyncio.Queue()
        for s in self.slots:
            self._free.put_nowait(s)

    @property
    def size(self) -> int:
        return len(self.slots)

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[Slot]:
        slot = await self._free.get()
        try:
            yield slot
        finally:
            self._free.put_nowait(slot)


def local_gpu_slots(indices: list[int]) -> list[Slot]:
    return [Slot(f"GPU {i}", ("--gpus", str(i))) for i in indices]


def cluster_slots(cluster: str, count: int) -> list[Slot]:
    return [Slot(f"cluster slot {i}", ("--cluster", cluster)) for i in range(max(1, count))]


def dry_run_slots(count: int) -> list[Slot]:
    return [Slot(f"dry-run slot {i + 1}", ()) for i in range(max(1, count))]
