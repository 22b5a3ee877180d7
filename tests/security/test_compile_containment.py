"""Class 1: what the model writes cannot make the compiler read host files or leak secrets.

Hostile kernels and specs go through the same paths a run uses (``ktt check`` on a copy of
a problem, the compile cache); the OS-level wall (Landlock) is tested on its own by
letting a macro-built include past the scan.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from bounds_problem import scale_spec

from ktt import includes, nvrtc, sandbox
from ktt.check import check_kernel
from ktt.compile_cache import CompileCache, cache_key, compile_cached
from ktt.nvrtc import CompileRequest, compile_cubin
from ktt.problem import ProblemError, load_problem
from ktt.spec import load_spec_text
from ktt.toolkit import cuda_include_dirs
from ktt.workdir import local_headers

TINY = Path(__file__).resolve().parents[1] / "ktt" / "data" / "tiny"
SECRET = "sk-h4testsecret0123456789abcdef"
needs_landlock = pytest.mark.skipif(sandbox.landlock_abi() == 0, reason="this kernel has no Landlock")

KERNEL = """#include "inputs.hpp"
{include}
extern "C" __global__ void scale(const float* __restrict__ X, float* __restrict__ Y) {{
    int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < N) Y[i] = 3.0f * X[i];
}}
"""
SPEC = scale_spec(64, 128)


@pytest.fixture
def problem_dir(tmp_path: Path) -> Path:
    d = tmp_path / "problem"
    shutil.copytree(TINY, d)
    return d


@pytest.fixture(autouse=True)
def secret_in_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)


def check(problem_dir: Path, kernel_text: str, cache: Path, spec: str = SPEC):
    problem = load_problem(problem_dir)
    kernel = problem_dir / "kernels.cu"
    kernel.write_text(kernel_text)
    return check_kernel(problem, kernel_text, spec, sample=2, arch="sm_90", kernel_path=kernel, cache_dir=cache)


def everything_in(directory: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in directory.rglob("*") if p.is_file() and p.suffix == ".json")


@pytest.mark.parametrize(
    ("line", "expect", "at"),
    [
        ('#include "/proc/self/environ"', "an absolute path", 2),
        ('#include "../../../../../../etc/passwd"', "'..' in the path", 2),
        ("#include </etc/hostname>", "an absolute path", 2),
        ('%:include "/proc/self/environ"', "an absolute path", 2),  # the digraph of #
        ('#  /* hidden */ include /**/ "/proc/self/environ"', "an absolute path", 2),
        ('#inc\\\nlude "/proc/self/environ"', "an absolute path", 2),  # a line splice inside the word
        ('#if __has_include("/etc/shadow")\n#endif', "an absolute path", 2),
        ('#include ".env"', "a hidden file", 2),
        ("#define P(x) #x\n#define Q(x) P(x)\n#include Q(/proc/self/environ)", "macro operand", 4),
    ],
)
def test_includes_outside_the_view_are_refused_before_nvrtc(
    problem_dir: Path, tmp_path: Path, line: str, expect: str, at: int
) -> None:
    (problem_dir / ".env").write_text(f"OPENAI_API_KEY={SECRET}\n")
    cache = tmp_path / "cache"
    report = check(problem_dir, KERNEL.format(include=line), cache)
    assert not report.ok
    text = report.model_dump_json()
    assert expect in text and "kernels.cu" in text
    bad = next(c for c in report.configs if not c.ok)
    assert bad.diagnostics[0].line == at  # the line of the include in kernels.cu
    assert SECRET not in text and "root:" not in text and "PATH=" not in text
    assert SECRET not in everything_in(cache) if cache.exists() else True


def test_a_problem_header_linked_to_dev_zero_is_never_read(problem_dir: Path, tmp_path: Path) -> None:
    (problem_dir / "zero.h").symlink_to("/dev/zero")
    (problem_dir / "passwd.h").symlink_to("/etc/passwd")
    start = time.monotonic()
    names = [name for name, _ in local_headers(load_problem(problem_dir))]
    assert "zero.h" not in names and "passwd.h" not in names
    for header in ("zero.h", "passwd.h"):
        report = check(problem_dir, KERNEL.format(include=f'#include "{header}"'), tmp_path / "cache")
        assert not report.ok and "link leading out" in report.model_dump_json()
    assert time.monotonic() - start < 30


def test_a_problem_header_is_allowed_and_its_own_includes_are_scanned(problem_dir: Path, tmp_path: Path) -> None:
    (problem_dir / "helpers.cuh").write_text("#pragma once\n#define TRIPLE(x) (3.0f * (x))\n")
    report = check(problem_dir, KERNEL.format(include='#include "helpers.cuh"'), tmp_path / "cache")
    assert report.ok, report.message
    (problem_dir / "evil.cuh").write_text('#pragma once\n#include "/proc/self/environ"\n')
    report = check(problem_dir, KERNEL.format(include='#include "evil.cuh"'), tmp_path / "cache")
    assert not report.ok
    assert "evil.cuh" in report.model_dump_json() and "an absolute path" in report.model_dump_json()


@pytest.mark.parametrize(
    "option",
    [
        "-Xptxas=--options-file,/etc/hostname",
        "--ptxas-options=-optf,/etc/hostname",
        "-Xptxas=-v,--output-file,/tmp/x",
        "--pre-include=/etc/hostname",
        "-include=/etc/hostname",
        "--use-pch=/etc/hostname",
        "--time=/tmp/ktt-time.csv",
        "--fdevice-time-trace=/tmp/trace.json",
        "-I/etc",
        "--use_fast_math",
        "-Xptxas=",
    ],
)
def test_compiler_options_outside_the_whitelist_are_refused(problem_dir: Path, tmp_path: Path, option: str) -> None:
    problem = load_problem(problem_dir)
    with pytest.raises(ProblemError) as err:
        load_spec_text(SPEC + f"compiler_options: [{json.dumps(option)}]\n", problem)
    assert "compiler_options[0]" in str(err.value)
    # The compiler refuses it too, whatever built the request.
    out = compile_cubin(request(tmp_path, 'extern "C" __global__ void k() {}', options=(option,)))
    assert not out.ok and "not allowed" in out.errors[0].message
    assert "vm" not in out.log.split() and not Path("/tmp/ktt-time.csv").exists()


def test_allowed_options_still_compile(tmp_path: Path) -> None:
    opts = ("-lineinfo", "-maxrregcount=64", "-Xptxas=-v,--warn-on-spills", "--ptxas-options=-O3", "-dopt=on")
    out = compile_cubin(request(tmp_path, 'extern "C" __global__ void k(float* p) { p[0] = 1.0f; }', options=opts))
    assert out.ok, out.log


def request(tmp: Path, source: str, options: tuple[str, ...] = (), include_dirs: tuple[str, ...] = ()):
    (tmp / "work").mkdir(exist_ok=True)
    return CompileRequest(
        source=source,
        program_path=str(tmp / "work" / "kernels.cu"),
        display_name="kernels.cu",
        arch="sm_90",
        defines=(),
        include_dirs=(str(tmp / "work"), *include_dirs, *cuda_include_dirs()),
        options=options,
    )


@needs_landlock
def test_landlock_stops_an_include_the_scan_let_through(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second wall on its own: with the scan switched off, NVRTC still cannot open the file."""
    monkeypatch.setattr(includes, "refused_include", lambda *a, **k: None)
    source = "#define P(x) #x\n#define Q(x) P(x)\n#include Q(/proc/self/environ)\n__global__ void k() {}\n"
    out = compile_cubin(request(tmp_path, source))
    assert not out.ok
    assert "Permission denied" in out.log and SECRET not in out.log and "PATH=" not in out.log
    etc = compile_cubin(request(tmp_path, '#include "/etc/hostname"\n__global__ void k() {}\n'))
    assert "Permission denied" in etc.log


@needs_landlock
def test_landlock_allows_the_headers_of_the_view_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(includes, "refused_include", lambda *a, **k: None)
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "ok.cuh").write_text("#define OK_VALUE 3\n")
    (lib / "notes.txt").write_text("#define NOTE_VALUE 4\n")  # valid code, but not a header
    src = '#include "ok.cuh"\n#include <cuda/std/cstdint>\nextern "C" __global__ void k(int* p) { *p = OK_VALUE; }\n'
    assert compile_cubin(request(tmp_path, src, include_dirs=(str(lib),))).ok
    notes = '#include "notes.txt"\nextern "C" __global__ void k(int* p) { *p = NOTE_VALUE; }\n'
    blocked = compile_cubin(request(tmp_path, notes, include_dirs=(str(lib),)))
    assert not blocked.ok and "cannot open source file" in blocked.log
    monkeypatch.setenv("KTT_NO_LANDLOCK", "1")  # the same compile unconfined: it is Landlock that said no
    sandbox.landlock_abi.cache_clear()
    try:
        assert compile_cubin(request(tmp_path, notes, include_dirs=(str(lib),))).ok
    finally:
        sandbox.landlock_abi.cache_clear()


def test_without_landlock_the_scan_still_refuses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KTT_NO_LANDLOCK", "1")
    sandbox.landlock_abi.cache_clear()
    try:
        assert "unavailable" in sandbox.status()
        out = compile_cubin(request(tmp_path, '#include "/proc/self/environ"\n'))
        assert not out.ok and "an absolute path" in out.errors[0].message
        assert compile_cubin(request(tmp_path, 'extern "C" __global__ void k() {}')).ok
    finally:
        sandbox.landlock_abi.cache_clear()


def test_compiler_messages_and_cached_logs_are_scrubbed(tmp_path: Path) -> None:
    """A secret that reaches a compiler message (here from an allowed header) never leaves ktt."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "config.h").write_text(f"ANTHROPIC_API_KEY={SECRET}x\nGITHUB_TOKEN=ghp_{'a' * 36}\n")
    req = request(tmp_path, '#include "config.h"\n', include_dirs=(str(lib),))
    cache = tmp_path / "cache"
    out, key = compile_cached(req, str(cache))
    assert not out.ok
    shown = out.log + json.dumps([d.message for d in out.diagnostics])
    assert SECRET not in shown and "ghp_aaaa" not in shown and "[redacted]" in shown
    stored = (cache / key[:2] / f"{key}.json").read_text()
    assert SECRET not in stored and "ghp_aaaa" not in stored
    # An entry planted with a secret (an older cache, a hand edit) is scrubbed when served.
    meta = json.loads(stored)
    meta["log"] = f"leak OPENAI_API_KEY={SECRET}"
    meta["diagnostics"][0]["message"] = f"leak {SECRET}"
    (cache / key[:2] / f"{key}.json").write_text(json.dumps(meta))
    hit = CompileCache(str(cache)).get(key)
    assert hit is not None and SECRET not in hit.log and SECRET not in hit.diagnostics[0].message


def test_the_cache_key_changed_with_scrubbed_logs(tmp_path: Path) -> None:
    """Format 1 entries (unscrubbed logs) are never looked up."""
    req = request(tmp_path, 'extern "C" __global__ void k() {}')
    import ktt.compile_cache as cc

    assert cc.CACHE_FORMAT >= 2
    key = cache_key(req)
    old = cc.CACHE_FORMAT
    try:
        cc.CACHE_FORMAT = 1
        assert cache_key(req) != key
    finally:
        cc.CACHE_FORMAT = old


def test_compiler_output_is_capped(tmp_path: Path) -> None:
    body = "\n".join(f"int undefined_{i} = missing_{i}_{'x' * 2000};" for i in range(300))
    out = compile_cubin(request(tmp_path, body))
    assert not out.ok
    assert len(out.log) <= nvrtc.MAX_LOG_CHARS + 200 and "cut" in out.log
    assert len(out.diagnostics) <= nvrtc.MAX_DIAGNOSTICS


@pytest.mark.parametrize(
    "unit",
    ["#/*", "# /**/", '#include "', "__has_include(", "\\\n", "/*#*/", '"#include "', "%:", "#include X\n"],
)
def test_the_include_scan_is_linear(unit: str) -> None:
    """Inputs built to make a backtracking scanner quadratic: 400 KB must take well under a second."""
    source = unit * (400_000 // len(unit))
    start = time.perf_counter()
    includes.find_includes(source)
    assert time.perf_counter() - start < 1.5


def test_the_include_scan_ignores_what_is_not_a_directive() -> None:
    source = 'int a = 1; // see #include "../x.h" in the docs\nconst char* s = "#include </etc/passwd>";\n'
    assert includes.find_includes(source) == []
    found = includes.find_includes("  /* c */ # include <cuda/std/cstdint>\n")
    assert found == [(1, "#include", "<", "cuda/std/cstdint")]


def test_a_run_still_compiles_the_shipped_examples(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2] / "problems" / "mmul"
    problem = load_problem(root)
    kernel = root / "example" / "kernels.cu"
    report = check_kernel(
        problem, kernel.read_text(), root / "example" / "tuning.yaml", sample=1, arch="sm_90",
        kernel_path=kernel, cache_dir=tmp_path / "cache",
    )  # fmt: skip
    assert report.ok, report.message
    assert os.environ.get("OPENAI_API_KEY") == SECRET  # the fixture's secret was in the environment throughout
