"""GPU work is serialised per device: one tuning or profiling job per GPU at a time.

With several GPUs, different branches' GPU steps run at once, one per device; LLM
calls never wait here, so they overlap GPU work.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class GpuScheduler:
    def __init__(self, indices: list[int]) -> None:
        if not indices:
            raise ValueError("at least one GPU index is needed")
        self.indices = list(indices)
        self._free: asyncio.Queue[int] = asyncio.Queue()
        for i in self.indices:
            self._free.put_nowait(i)
        self.busy: set[int] = set()

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[int]:
        device = await self._free.get()
        self.busy.add(device)
        try:
            yield device
        finally:
            self.busy.discard(device)
            self._free.put_nowait(device)
