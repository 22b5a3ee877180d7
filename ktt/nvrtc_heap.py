"""Reserve NVRTC's precompiled-header heap when imported: the compile pool's forkserver preloads this.

NVRTC uses a precompiled header only in a process whose PCH heap sits where the creating
process's did. Workers forked from one forkserver share its address space layout, so the
heap is reserved there, once, before any of them forks, and they can all use a header one
of them made (ktt.pch). Import it nowhere else: the heap is address space, not memory, until
a header is made, but a process that never compiles does not need it.
"""

from __future__ import annotations

import contextlib
import os

from ktt.pch import HEAP_BYTES

RESERVED = False
RESERVED_IN = os.getpid()  # a worker that sees another pid here inherited the heap from the forkserver
if os.environ.get("KTT_NO_PCH") is None:
    with contextlib.suppress(Exception):  # no NVRTC here: compiles will say so, not this import
        from cuda.bindings import nvrtc as _api

        (_result,) = _api.nvrtcSetPCHHeapSize(HEAP_BYTES)
        RESERVED = _result == _api.nvrtcResult.NVRTC_SUCCESS
