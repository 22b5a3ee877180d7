"""Precompiled headers (ktt.pch) and unread defines (ktt.macro_use): same programs, faster, never unsafe."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ktt import pch
from ktt.compile_cache import compile_cached, effective_request
from ktt.macro_use import names_read
from ktt.nvrtc import CompileRequest, _pch_options, compile_cubin
from ktt.toolkit import cuda_include_dirs

CUB_KERNEL = """// a comment that names BLOCK does not count
#include "inputs.hpp"
#include <cub/block/block_reduce.cuh>

extern "C" __global__ void total(const float* x, float* y) {
    using R = cub::BlockReduce<float, BLOCK>;
    __shared__ typename R::TempStorage tmp;
    float v = x[blockIdx.x * BLOCK + threadIdx.x] * SCALE;
    float s = R(tmp).Sum(v);
    if (threadIdx.x == 0) y[blockIdx.x] = s + (float)ROWS_FIXED;
}
"""


def cub_request(tmp: Path, block: int, scale: str = "2.0f", source: str = CUB_KERNEL) -> CompileRequest:
    (tmp / "inputs.hpp").write_text("#pragma once\ntypedef float X_t;\n")
    defines = (("BLOCK", str(block)), ("ROWS_FIXED", "7"), ("SCALE", scale))
    headers = (("inputs.hpp", (tmp / "inputs.hpp").read_text()),)
    dirs = (str(tmp), *cuda_include_dirs())
    path = str(tmp / "kernels.cu")
    return CompileRequest(
        source, path, "kernels.cu", "sm_90", defines, dirs, header_texts=headers, fixed_defines=("ROWS_FIXED",)
    )


# -- the include prefix ------------------------------------------------------------------


def test_the_prefix_is_the_leading_include_lines() -> None:
    split = pch.split_prefix(CUB_KERNEL)
    assert split is not None
    assert split.prefix.endswith("#include <cub/block/block_reduce.cuh>\n")
    assert split.body.lstrip().startswith('extern "C"') and split.body_line == 4
    text = pch.transformed(split, (("BLOCK", "128"),))
    lines = text.split("\n")
    assert lines[3] == pch.HDRSTOP and lines[4] == "#define BLOCK 128" and lines[5] == "#line 4"


@pytest.mark.parametrize(
    "source",
    [
        'extern "C" __global__ void k() {}\n',  # no includes
        '#include "inputs.hpp"\nextern "C" __global__ void k() {}\n',  # no <...> include
        "#define X 1\n#include <cub/cub.cuh>\nint y;\n",  # a define first
        "#include MACRO_HEADER\nint y;\n",  # a macro operand
        "/* block */\n#include <cub/cub.cuh>\nint y;\n",  # a block comment
        "#include <cub/cub.cuh> \\\n\nint y;\n",  # a line splice
        "#include <cub/cub.cuh>\n",  # nothing after the includes
    ],
)
def test_sources_without_a_plain_include_prefix_do_not_qualify(source: str) -> None:
    assert pch.split_prefix(source) is None


def test_a_define_a_header_could_read_keeps_the_ordinary_compile(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    req = cub_request(tmp_path, 128)
    moved = (("BLOCK", "128"), ("SCALE", "2.0f"))
    opts = _pch_options(req)
    assert pch.plan(req.source, moved, req.header_texts, "sm_90", opts, store) is not None
    # a local header that names a moved define
    headers = (("inputs.hpp", "#define SCALE_TWICE (2 * SCALE)\n"),)
    assert pch.plan(req.source, moved, headers, "sm_90", opts, store) is None
    # a name the CUDA headers use (cub's BlockLoad has BLOCK_THREADS)
    assert pch.plan(req.source, (("BLOCK_THREADS", "128"),), req.header_texts, "sm_90", opts, store) is None
    # reserved-looking and very short names
    for name in ("NDEBUG", "CUB_FOO", "_X", "N"):
        assert pch.plan(req.source, ((name, "1"),), req.header_texts, "sm_90", opts, store) is None
    # a value that would end the #define line
    injected = (("BLOCK", "1\n#include </etc/passwd>"),)
    assert pch.plan(req.source, injected, req.header_texts, "sm_90", opts, store) is None


def test_the_store_must_be_private(tmp_path: Path) -> None:
    req = cub_request(tmp_path, 128)
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    os.chmod(shared, 0o777)
    moved = (("BLOCK", "128"), ("SCALE", "2.0f"))
    assert pch.plan(req.source, moved, req.header_texts, "sm_90", _pch_options(req), str(shared)) is None
    link = tmp_path / "link"
    private = tmp_path / "private"
    assert pch.private_dir(str(private))
    link.symlink_to(private)
    assert pch.plan(req.source, moved, req.header_texts, "sm_90", _pch_options(req), str(link)) is None


def test_prune_keeps_the_store_under_its_limit(tmp_path: Path) -> None:
    for i in range(3):
        (tmp_path / f"{i}.pch").write_bytes(b"x" * 1000)
        (tmp_path / f"{i}.json").write_text("{}")
        os.utime(tmp_path / f"{i}.pch", (1000 + i, 1000 + i))
    pch.prune(str(tmp_path), limit=2000)
    assert sorted(p.name for p in tmp_path.glob("*.pch")) == ["1.pch", "2.pch"]


# -- compiling with it (NVRTC, in this process) ---------------------------------------------


def test_a_precompiled_header_gives_the_same_program_faster(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    first = compile_cubin(cub_request(tmp_path, 128), pch_dir=store)
    assert first.ok and first.pch == "created", first.log
    c0 = time.process_time()
    plain = compile_cubin(cub_request(tmp_path, 256))
    plain_cpu = time.process_time() - c0
    c0 = time.process_time()
    fast = compile_cubin(cub_request(tmp_path, 256), pch_dir=store)
    fast_cpu = time.process_time() - c0
    assert plain.ok and fast.ok and fast.pch == "used"
    assert fast.cubin == plain.cubin, "the precompiled header must not change the program"
    assert fast_cpu < plain_cpu, (fast_cpu, plain_cpu)
    assert "precompiled" not in fast.log


def test_errors_in_the_kernel_keep_their_lines_with_a_precompiled_header(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    assert compile_cubin(cub_request(tmp_path, 128), pch_dir=store).pch == "created"
    broken = CUB_KERNEL.replace("float s = R(tmp).Sum(v);", "float s = R(tmp).Sum(v) + undefined_name;")
    plain = compile_cubin(cub_request(tmp_path, 128, source=broken))
    fast = compile_cubin(cub_request(tmp_path, 128, source=broken), pch_dir=store)
    assert not fast.ok and not plain.ok
    assert [(d.file, d.line) for d in fast.errors] == [(d.file, d.line) for d in plain.errors]
    assert fast.errors[0].line == 9


def test_unread_defines_leave_the_program_and_the_key(tmp_path: Path) -> None:
    src = 'extern "C" __global__ void k(float* x) { x[0] = A * 2; }\n'
    req = CompileRequest(src, str(tmp_path / "k.cu"), "k.cu", "sm_90", (("A", "1"), ("UNREAD_ONE", "5")),
                         (str(tmp_path), *cuda_include_dirs()))  # fmt: skip
    assert effective_request(req).defines == (("A", "1"),)
    pasted = CompileRequest("#define CAT(a, b) a##b\n" + src, *list(req.__dict__.values())[1:])
    assert effective_request(pasted).defines == req.defines, "token pasting can build any name"
    chained = CompileRequest(src, str(tmp_path / "k.cu"), "k.cu", "sm_90", (("A", "B_VALUE"), ("B_VALUE", "3")),
                             (str(tmp_path), *cuda_include_dirs()))  # fmt: skip
    assert effective_request(chained).defines == chained.defines, "a kept value names another define"
    out1, key1 = compile_cached(req, str(tmp_path / "cache"))
    other = CompileRequest(src, req.program_path, "k.cu", "sm_90", (("A", "1"), ("UNREAD_ONE", "6")), req.include_dirs)
    out2, key2 = compile_cached(other, str(tmp_path / "cache"))
    assert out1.ok and key1 == key2 and out2.cached


def test_names_read_is_conservative() -> None:
    dirs = cuda_include_dirs()
    assert names_read(["FOO_KNOB"], ["int x = FOO_KNOB;"], dirs) == {"FOO_KNOB"}
    assert names_read(["FOO_KNOB"], ["// FOO_KNOB in a comment"], dirs) == {"FOO_KNOB"}
    assert names_read(["FOO_KNOBS_UNUSED"], ["int x = FOO_KNOB;"], dirs) == set()
    assert names_read(["BLOCK_THREADS"], ["int x;"], dirs) == {"BLOCK_THREADS"}  # cub reads it
    assert names_read(["FOO_KNOB"], ["#define J(a, b) a ## b"], dirs) is None


# -- on the GPU: a whole tuning of the cub example ---------------------------------------------


@pytest.mark.gpu
def test_the_cub_example_tunes_with_a_shared_precompiled_header(tmp_path: Path) -> None:
    """bench/cub_reduce through ``python -m ktt tune``: valid results, one header made, the others use it."""
    import json
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    ex = root / "bench" / "cub_reduce"
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "ktt", "tune", "--problem", str(ex), "--kernel", str(ex / "kernels.cu"),
            "--spec", str(ex / "tuning.yaml"), "--output", str(out), "--cache-dir", str(tmp_path / "cache"),
            "--duration", "60", "--json"]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=root)
    lines = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = lines[-1]
    assert summary["type"] == "result" and summary["ok"] and summary["evaluated"] == 60
    pool = next(ln["message"] for ln in lines if ln.get("type") == "log" and "compile pool:" in ln["message"])
    print(pool)
    used = int(pool.split("precompiled header used ")[1].split(" ")[0])
    assert "(created 1)" in pool and used >= 30, pool
    assert not list(tmp_path.glob("cache/pch-*")), "the pool's store is removed at its end"


def test_the_command_line_fallback_spells_what_cuda_core_spells(monkeypatch: pytest.MonkeyPatch) -> None:
    """For a cuda.core without ProgramOptions.as_bytes the precompiled-header path builds the same options."""
    from ktt import nvrtc

    opts = ("-lineinfo", "-maxrregcount=64", "-Xptxas=-v,-O3", "--extra-device-vectorization", "-restrict",
            "-default-device")  # fmt: skip
    req = CompileRequest("x", "/tmp/k.cu", "k.cu", "sm_90", (("A", "1"),), ("/a", "/b"), options=opts)
    if not hasattr(nvrtc._program_options(req), "as_bytes"):
        pytest.skip("this cuda.core has no as_bytes to compare with")
    expected = sorted(nvrtc.option_bytes(req))
    real = nvrtc._program_options

    class Without:
        def __init__(self, r: CompileRequest) -> None:
            self._o = real(r)

    monkeypatch.setattr(nvrtc, "_program_options", Without)
    assert sorted(nvrtc.option_bytes(req)) == expected
    with pytest.raises(AttributeError):
        nvrtc.option_bytes(CompileRequest("x", "/tmp/k.cu", "k.cu", "sm_90", (), (), options=("-dopt=off",)))


def test_nvrtc_notes_about_the_header_are_dropped_and_a_refusal_is_noticed() -> None:
    from ktt.nvrtc import _without_pch_notes

    ok = '"/w/kernels.cu": using precompiled header file "/s/a.pch"\n\x00'
    assert _without_pch_notes(ok) == ("", False)
    refused = (
        'Warning #20282-D: incompatible precompiled header (PCH) heap allocation address from PCH file "/s/a.pch".\n'
        '\nRemark: The warnings can be suppressed with "-diag-suppress <warning-number>"\n'
    )
    assert _without_pch_notes(refused) == ("", True)
    kernel_warning = 'kernels.cu(3): warning #177-D: variable "x" was declared but never referenced\n' + ok
    text, was_refused = _without_pch_notes(kernel_warning)
    assert not was_refused and "declared but never referenced" in text and "precompiled" not in text
