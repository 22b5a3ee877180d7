from __future__ import annotations

from pathlib import Path

from ktt.compile_cache import cache_key, compile_cached
from ktt.nvrtc import CompileRequest, compile_cubin, cubin_kernels, define_pairs, kernel_definition_lines, macro_value
from ktt.toolkit import cuda_include_dirs, normalize_arch

GOOD = """// no CUDA headers needed: these tests run where only NVRTC is installed
extern "C" __global__ void __launch_bounds__(128, 2)
add(const float* a, float* b) {
    int unused = 1;
    b[threadIdx.x] = a[threadIdx.x] + VALUE;
}
"""


def request(source: str, tmp: Path, **kw: object) -> CompileRequest:
    return CompileRequest(
        source=source,
        program_path=str(tmp / "kernels.cu"),
        display_name="kernels.cu",
        arch="sm_90",
        defines=kw.get("defines", (("VALUE", "1.0f"),)),
        include_dirs=(str(tmp), *cuda_include_dirs()),  # type: ignore[arg-type]
    )


def test_compiles_to_a_cubin_with_warnings_mapped(tmp_path: Path) -> None:
    out = compile_cubin(request(GOOD, tmp_path))
    assert out.ok and out.cubin and out.cubin[:4] == b"\x7fELF"
    assert out.kernels == ("add",)
    warn = [d for d in out.diagnostics if d.severity == "warning"]
    assert warn and warn[0].file == "kernels.cu" and warn[0].line == 4 and warn[0].column == 9


def test_errors_point_at_their_line_and_column(tmp_path: Path) -> None:
    bad = GOOD.replace("+ VALUE", "+ undefined_name")
    out = compile_cubin(request(bad, tmp_path))
    assert not out.ok and out.cubin is None
    err = out.errors[0]
    assert (err.file, err.line, err.column) == ("kernels.cu", 5, 39)
    assert "undefined_name" in err.message
    assert out.first_error() == f"kernels.cu:5: {err.message}"


def test_ptxas_errors_are_mapped_to_the_kernel(tmp_path: Path) -> None:
    src = (
        'extern "C" __global__ void big(float* a) {\n  __shared__ float s[20000];\n  s[threadIdx.x] = a[0];\n'
        "  __syncthreads();\n  a[threadIdx.x] = s[threadIdx.x + 1];\n}\n"
    )
    out = compile_cubin(request(src, tmp_path))
    assert not out.ok
    assert out.errors[0].line == 1 and "too much shared data" in out.errors[0].message


def test_the_generated_header_wins_over_a_stale_one(tmp_path: Path, monkeypatch) -> None:
    work, stale = tmp_path / "work", tmp_path / "problem"
    work.mkdir()
    stale.mkdir()
    (work / "inputs.hpp").write_text("#define WHICH 2\n")
    (stale / "inputs.hpp").write_text("#define WHICH 1\n")
    monkeypatch.chdir(stale)
    src = '#include "inputs.hpp"\nstatic_assert(WHICH == 2, "stale header");\nextern "C" __global__ void k() {}\n'
    req = CompileRequest(
        src, str(work / "kernels.cu"), "kernels.cu", "sm_90", (), (str(work), str(stale), *cuda_include_dirs())
    )
    assert compile_cubin(req).ok


def test_cache_hits_and_keys(tmp_path: Path) -> None:
    req = request(GOOD, tmp_path)
    first, key = compile_cached(req, str(tmp_path / "cache"))
    again, key2 = compile_cached(req, str(tmp_path / "cache"))
    assert key == key2 and not first.cached and again.cached and again.cubin == first.cubin
    assert again.kernels == ("add",)
    other = request(GOOD, tmp_path, defines=(("VALUE", "2.0f"),))
    assert cache_key(other) != key
    moved = request(GOOD, tmp_path / "elsewhere")
    assert cache_key(moved) == key  # the work directory's path is not part of the key
    bad = request(GOOD.replace("VALUE", "nope"), tmp_path)
    compile_cached(bad, str(tmp_path / "cache"))
    cached_bad, _ = compile_cached(bad, str(tmp_path / "cache"))
    assert cached_bad.cached and not cached_bad.ok and cached_bad.errors


def test_small_helpers() -> None:
    assert macro_value(3) == "3" and macro_value(0.5) == "0.5" and macro_value(2.0) == "2.0"
    assert define_pairs({"B": 1}, {"A": 2.5}) == (("A", "2.5"), ("B", "1"))
    assert kernel_definition_lines(GOOD) == {"add": 3}
    assert cubin_kernels(b"not an elf") == set()
    assert normalize_arch("9.0") == "sm_90" and normalize_arch("compute_90a") == "sm_90a"
