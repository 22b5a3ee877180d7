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
import tempfile

from ktt.pch import HEAP_BYTES

RESERVED = False
RESERVED_IN = os.getpid()  # a worker that sees another pid here inherited the heap from the forkserver


def _reserve() -> bool:
    """Size the heap, then make one tiny header: NVRTC maps the heap on first use, not when sized.

    (Measured: a worker that made a header with a heap mapped after the fork produced one its
    siblings rejected as "incompatible ... heap allocation address"; mapped here, before the
    fork, every worker's heap is at the same address.)
    """
    from cuda.bindings import nvrtc as api

    (result,) = api.nvrtcSetPCHHeapSize(HEAP_BYTES)
    if result != api.nvrtcResult.NVRTC_SUCCESS:
        return False
    with tempfile.TemporaryDirectory(prefix="ktt-pch-heap-") as d:
        err, prog = api.nvrtcCreateProgram(b"#pragma nv_hdrstop\nint ktt_heap;\n", b"ktt_heap.cu", 0, [], [])
        if err != api.nvrtcResult.NVRTC_SUCCESS:
            return False
        try:
            opts = [f"--create-pch={os.path.join(d, 'heap.pch')}".encode()]
            old = os.environ.get("TMPDIR")
            os.environ["TMPDIR"] = d
            try:
                api.nvrtcCompileProgram(prog, len(opts), opts)
            finally:
                if old is None:
                    os.environ.pop("TMPDIR", None)
                else:
                    os.environ["TMPDIR"] = old
            (status,) = api.nvrtcGetPCHCreateStatus(prog)
            return status == api.nvrtcResult.NVRTC_SUCCESS
        finally:
            api.nvrtcDestroyProgram(prog)


if os.environ.get("KTT_NO_PCH") is None:
    with contextlib.suppress(Exception):  # no NVRTC here: compiles will say so, not this import
        RESERVED = _reserve()
