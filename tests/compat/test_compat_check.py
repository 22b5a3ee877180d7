"""The compat corpus: problem directories in the original CACAO's format, checked by ``cacao --check``.

Every directory under problems/ is written the way the original's guides and code define
the format (init: file with file_name, init: custom bodies using shared_setup and headers,
rules shorthands, cases with their own budgets and files, multi-output python, µs
reference-time seeds, the older inline form). Each must pass ``--check`` with the real
NVRTC and host compiler, mean what it means in the original, and leave its directory
untouched. Broken copies must fail with one line, exit 2, nothing written.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from cacao_tui.cli import main
from ktt.host_reference import produce
from ktt.inputs import GeneratorError, generated_inputs, make_inputs
from ktt.problem import load_problem
from ktt.problem.inputs_hpp import render_inputs_hpp
from ktt.workdir import WorkDir

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "problems"
PROBLEMS = sorted(p.name for p in CORPUS.iterdir() if (p / "problem.yaml").is_file())

pytestmark = pytest.mark.skipif(
    shutil.which("cc") is None or shutil.which("c++") is None, reason="no host C/C++ compiler"
)


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under root -> its bytes (None for a directory): equal snapshots mean untouched."""
    return {str(p.relative_to(root)): None if p.is_dir() else p.read_bytes() for p in sorted(root.rglob("*"))}


@pytest.fixture(autouse=True)
def private_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Build products of these tests go to a temporary cache, never ~/.cache."""
    monkeypatch.setenv("KTT_CACHE_DIR", str(tmp_path / "cache"))


# What each directory's --check must say it proved (a substring of its "checked" lines).
EXPECTED_STEPS = {
    "spmv_files": [
        "data files: 6 files under inputs/ present with the exact byte count",
        "cases: 2 cases resolved (skewed, wide); the primary is skewed",
        "cuda ref_kernel.cu: compiled with NVRTC for sm_",
        "kernel spmv_ref found",
        "custom x: built with",
    ],
    "terrain_custom": ["cpu_c ref_cpu.c: built with", "function below_level", "custom heights: built with"],
    "softmax_rows_py": ["python ref.py: imported in its own process", "reference function softmax_rows"],
    "minmax_multi_py": ["reference function minmax, with prepare_input"],
    "legacy_inline": ["cuda ref_kernel.cu: compiled with NVRTC", "kernel hadamard_reference found"],
    "pair_sums_inline": ["cpu_c ref_cpu.c: built with", "function pair_sums"],
    "accumulate_zeroed": ["cuda ref_kernel.cu: compiled with NVRTC", "kernel total_ref found"],
    "null_seeds": ["cases: 2 cases resolved (big, small); the primary is big", "function clamp_ref"],
    "old_run": ["python ref.py: imported in its own process", "reference function relu"],
}
# What each directory's --check must say about output/reference_time.json, shape by shape.
EXPECTED_BASELINES = {
    "null_seeds": ["big seeded 0.85 ms", "small no baseline (null): never timed; its speedup and the score are null"],
    "spmv_files": ["skewed seeded 0.0035 ms", "wide to be measured on the first tuning"],
    "legacy_inline": ["output/reference_time.json: none yet; every shape is timed on its first tuning"],
    "old_run": ["default seeded 2.4 ms"],
}


def test_the_corpus_covers_every_feature() -> None:
    assert set(EXPECTED_STEPS) == set(PROBLEMS)


@pytest.mark.parametrize("name", PROBLEMS)
def test_corpus_problem_passes_check_and_writes_nothing(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    directory = CORPUS / name
    before = snapshot(directory)
    code = main(["--dir", str(directory), "--check"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "\nOK: " in out
    flat = " ".join(out.split())  # the summary wraps long lines
    for words in EXPECTED_STEPS[name]:
        assert words in flat, words
    assert "blocks of (1, 1, 1)" not in out
    for words in EXPECTED_BASELINES.get(name, []):
        assert words in flat, words
    assert snapshot(directory) == before


def test_data_files_are_what_make_data_writes() -> None:
    spec = importlib.util.spec_from_file_location("compat_make_data", HERE / "make_data.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name, data in module.files().items():
        assert (CORPUS / "spmv_files" / "inputs" / name).read_bytes() == data, name


def _small_integer(i: int, modulus: int) -> float:
    """shared_setup's helper of spmv_files, in Python."""
    i = ((i ^ (i >> 7)) * 0x9E3779B97F4A7C15) % 2**64
    return float(1 + i % modulus)


def test_spmv_files_cases_files_budgets_and_custom_data(tmp_path: Path) -> None:
    p = load_problem(CORPUS / "spmv_files")
    assert p.declared_cases and [s.name for s in p.shapes] == ["skewed", "wide"] and p.primary.name == "skewed"
    assert [s.duration_s for s in p.shapes] == [12.0, 5.0]
    wide = p.shape("wide")
    assert wide.scalars == {"NROWS": 3, "NNZ": 12, "NCOLS": 9, "XMOD": 3}
    assert {k: v.name for k, v in wide.files.items()} == {
        "row_offsets": "wide.rowptr.bin",
        "col_indices": "wide.col.bin",
        "values": "wide.val.bin",
    }
    assert p.gpu_info["model"] == "NVIDIA H200" and p.gpu_info["sm_count"] == 132
    assert not p.warnings
    for shape in p.shapes:
        x = generated_inputs(p, shape, tmp_path)["x"]
        modulus = int(shape.scalars["XMOD"])
        assert x.tolist() == [_small_integer(i, modulus) for i in range(int(shape.scalars["NCOLS"]))]
    seed = json.loads((CORPUS / "spmv_files" / "output" / "reference_time.json").read_text())
    assert seed == {"reference_time_us": 3.5, "cases": {"skewed": 3.5}}  # wide is not named: measured


def test_terrain_custom_generator_uses_headers_shared_setup_and_case_scalars(tmp_path: Path) -> None:
    p = load_problem(CORPUS / "terrain_custom")
    assert p.rules_text == ["Exact integer output; no atomics are needed."] and not p.forbid
    for shape in p.shapes:
        h = generated_inputs(p, shape, tmp_path)["heights"]
        assert h.dtype == np.int32 and h.size == shape.sizes["heights"]
        assert h.min() == 0 and h.max() == 999  # rank-transformed: every level is present
    assert p.shape("strip").duration_s == 3 and p.shape("square").duration_s == 8


def test_rules_shorthands_and_malformed_entries() -> None:
    listed = load_problem(CORPUS / "softmax_rows_py")
    assert listed.rules_text == ["Subtract the row maximum before exponentiating.", "Keep fp32 arithmetic."]
    assert listed.reference.function is None  # the first public function of ref.py, as in the original
    mapped = load_problem(CORPUS / "minmax_multi_py")
    assert [r.pattern.pattern for r in mapped.forbid] == ["thrust::", "cub::"]
    assert mapped.rules_text == ["One pass over the data."]
    assert any("rules.forbid[2]" in w and "skipped" in w for w in mapped.warnings)
    assert any("rules.forbid[3]" in w and "invalid regular expression" in w for w in mapped.warnings)


def test_legacy_inline_form_means_what_the_first_tuner_meant() -> None:
    p = load_problem(CORPUS / "legacy_inline")
    assert p.global_size_type == "opencl"  # the grid counts threads
    assert p.reference.type == "cuda" and p.reference.block.as_tuple() == (16, 8, 1)
    by = {b.name: b for b in p.buffers}
    assert by["mat_a"].value_range == (0.0, 1.0) and by["mat_b"].value_range == (-2.0, 2.0)
    assert by["mat_c"].init == "zeros" and by["mat_c"].validate
    assert [(s.name, s.dtype) for s in p.scalars] == [("M", "int"), ("N", "int"), ("ALPHA", "float")]
    assert p.gpu_info["model"] == "NVIDIA H200" and "unknown key" not in " ".join(p.warnings)
    assert p.primary.grid.as_tuple() == (640, 96, 1)


def test_inline_form_sizes_are_python_and_its_integer_dtypes_are_the_first_tuners(tmp_path: Path) -> None:
    """'N // 2' is floor division there (C++ would read N); long/int64 are 64-bit, Int16 16-bit; the
    cpu_c reference gets exactly those element types (run here on the CPU)."""
    p = load_problem(CORPUS / "pair_sums_inline")
    by = {b.name: b for b in p.buffers}
    assert [(b.name, b.dtype, b.ctype, b.numpy_dtype) for b in p.buffers] == [
        ("V", "long", "long long", "int64"),
        ("W", "short", "short", "int16"),
        ("OUT", "long", "long long", "int64"),
    ]
    assert p.primary.sizes == {"V": 100001, "W": 100001, "OUT": 50000}
    assert p.primary.grid.as_tuple() == (50000, 1, 1) and p.global_size_type == "opencl"
    changed = [w for w in p.warnings if "'N // 2' is 50000 as the original reads it" in w]
    assert len(changed) == 2 and "100001 read as C++" in changed[0]  # OUT.size and grid.x
    assert by["V"].value_range == (-1e12, 1e12)
    header = render_inputs_hpp(p)
    assert "typedef long long OUT_t;" in header and "#define OUT_SIZE ((size_t)50000ULL)" in header
    work = WorkDir(tmp_path / "work")
    work.prepare_shape(p, p.primary)
    produce(p, p.primary, [0], 0, work, want_time=False)
    inputs = make_inputs(p, p.primary, 0, 0, work.root)
    assert inputs["V"].dtype == np.int64 and np.abs(inputs["V"]).max() > 2**32  # 64-bit values survive
    got = np.load(work.reference_file(p.primary.name, 0, "OUT"))
    v, w = inputs["V"], inputs["W"].astype(np.int64)
    assert got.dtype == np.int64 and np.array_equal(got, v[0:100000:2] + v[1:100001:2] + w[0:100000:2])


def test_a_write_buffer_starts_with_its_init_data() -> None:
    """accumulate_zeroed: TOTAL is zeros in every input set (the kernel may accumulate into it);
    under validation.poison_outputs the problem says so."""
    p = load_problem(CORPUS / "accumulate_zeroed")
    assert not p.poison_outputs and not p.poisoned(p.buffers[1])
    for k in (0, 1):
        assert make_inputs(p, p.primary, k, 5, Path("/nonexistent"))["TOTAL"].tolist() == [0]


def test_check_says_what_each_shape_has_as_its_baseline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "null_seeds"
    shutil.copytree(CORPUS / "null_seeds", d)
    (d / "output" / "reference_time.json").write_text('{"reference_time_us": 850, "cases": {"other": 3}}')
    assert main(["--dir", str(d), "--check"]) == 0
    flat = " ".join(capsys.readouterr().out.split())
    assert "big seeded 0.85 ms" in flat and "small to be measured on the first tuning" in flat
    assert "not a case of this problem (ignored): other" in flat


# -- broken copies: one line, exit 2, nothing written ------------------------------------------


def _replace(rel: str, old: str, new: str) -> Callable[[Path], None]:
    def change(d: Path) -> None:
        text = (d / rel).read_text()
        assert old in text, old
        (d / rel).write_text(text.replace(old, new, 1))

    return change


def _unlink(rel: str) -> Callable[[Path], None]:
    return lambda d: (d / rel).unlink()


def _truncate(rel: str, size: int) -> Callable[[Path], None]:
    def change(d: Path) -> None:
        data = (d / rel).read_bytes()
        (d / rel).write_bytes(data[:size])

    return change


def _line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), start=1) if text in line)


def _framework_form(d: Path) -> None:
    """The original's newest form: no inputs.yaml, the boundary as C++ in inputs.hpp (written here)."""
    (d / "inputs.yaml").unlink()
    text = "#include <Ktt.h>\nstruct Inputs {};\ninline Inputs DefineInputs(ktt::Tuner& t) { return {}; }\n"
    (d / "inputs.hpp").write_text(text)


BROKEN: list[tuple[str, str, Callable[[Path], None], str]] = [
    (
        "framework-file-form",
        "accumulate_zeroed",
        _framework_form,
        "accumulate_zeroed/inputs.yaml: file not found; this is the original's framework-file form",
    ),
    (
        "reference-time-not-json",
        "null_seeds",
        _replace("output/reference_time.json", '"small": null', '"small": nul'),
        "null_seeds/output/reference_time.json: not valid JSON",
    ),
    (
        "reference-time-negative",
        "null_seeds",
        _replace("output/reference_time.json", '"big": 850.0', '"big": -3'),
        "output/reference_time.json: cases.big: -3 is not a positive number of microseconds (or null: no baseline)",
    ),
    (
        "reference-time-not-an-object",
        "spmv_files",
        lambda d: (d / "output" / "reference_time.json").write_text("[3.5]\n"),
        'spmv_files/output/reference_time.json: expected a JSON object such as {"reference_time_us": 120.5}',
    ),
    (
        "unknown-dtype-in-inputs-yaml",
        "accumulate_zeroed",
        _replace("inputs.yaml", "dtype: int, size: 1,", "dtype: int64, size: 1,"),
        "inputs.yaml: args[2] (TOTAL).dtype: unknown dtype 'int64' "
        "(allowed: int, float, double, char, short, long, bf16, half)",
    ),
    (
        "inline-fractional-size",
        "pair_sums_inline",
        _replace("problem.yaml", 'size: "N // 2"', 'size: "N / 2"'),
        "problem.yaml: args[3] (OUT).size: expected an integer, got 50000.5 (a Python expression here",
    ),
    (
        "inline-unknown-dtype",
        "pair_sums_inline",
        _replace("problem.yaml", 'dtype: "Int16"', 'dtype: "uint16"'),
        "problem.yaml: vectors[1] (W).dtype: unknown dtype 'uint16' (the older inline form takes char, int8, short",
    ),
    (
        "missing-data-file",
        "spmv_files",
        _unlink("inputs/wide.val.bin"),
        "problem.yaml: cases[1] (wide).files.values: inputs/wide.val.bin: not found "
        "(this shape needs 12 float elements = 48 bytes, raw little-endian)",
    ),
    (
        "short-data-file",
        "spmv_files",
        _truncate("inputs/skewed.col.bin", 36),
        "problem.yaml: cases[0] (skewed).files.col_indices: skewed.col.bin holds 36 bytes, expected 40 "
        "(10 int elements)",
    ),
    (
        "file-name-dotdot",
        "spmv_files",
        _replace("inputs.yaml", "file_name: skewed.val.bin", "file_name: ../spmv_files/inputs/skewed.val.bin"),
        "inputs.yaml: args[6] (values).file_name: '../spmv_files/inputs/skewed.val.bin' contains '..'",
    ),
    (
        "custom-body-does-not-compile",
        "spmv_files",
        _replace("inputs.yaml", "small_integer(i, XMOD)", "small_integr(i, XMOD)"),
        "inputs.yaml: args[7] (x).body: line {line}: 'small_integr' was not declared in this scope",
    ),
    (
        "shared-setup-does-not-compile",
        "terrain_custom",
        _replace("inputs.yaml", "inline float smooth(float t)", "inline float smooth(floot t)"),
        "inputs.yaml: shared_setup: line {line}:",
    ),
    (
        "cuda-reference-does-not-compile",
        "spmv_files",
        _replace("ref_kernel.cu", "sum += values[j]", "sum += valuez[j]"),
        'ref_kernel.cu: line 9: identifier "valuez" is undefined (NVRTC for sm_90)',
    ),
    (
        "cuda-reference-not-extern-c",
        "legacy_inline",
        _replace("ref_kernel.cu", 'extern "C" __global__', "__global__"),
        "problem.yaml: reference.function: no kernel 'hadamard_reference' in the compiled ref_kernel.cu",
    ),
    (
        "cpu-reference-does-not-compile",
        "terrain_custom",
        _replace("ref_cpu.c", "<= LEVEL;", "<= LEVEL"),
        "ref_cpu.c: line 4: expected ';' before '}' token (host compiler, shape square)",
    ),
    (
        "ref-py-missing-module",
        "softmax_rows_py",
        _replace("ref.py", "import numpy as np\n", "import numpy as np\nimport cacao_no_such_module\n"),
        "ref.py: line 4: imports 'cacao_no_such_module', which is not installed for this Python",
    ),
    (
        "ref-py-raises-on-import",
        "minmax_multi_py",
        _replace("ref.py", "import numpy as np\n", "import numpy as np\nraise RuntimeError('no GPU here')\n"),
        "ref.py: line 4: importing it failed: RuntimeError: no GPU here",
    ),
    (
        "ref-py-function-missing",
        "minmax_multi_py",
        _replace("problem.yaml", "function: minmax", "function: min_max"),
        "problem.yaml: reference.function: 'min_max' is not defined in ref.py itself",
    ),
    (
        "duplicate-case-name",
        "terrain_custom",
        _replace("problem.yaml", "- name: strip", "- name: square"),
        "problem.yaml: cases[1].name: 'square' is used twice (names must be unique)",
    ),
    (
        "bad-case-name",
        "spmv_files",
        _replace("problem.yaml", "- name: wide", "- name: wide one"),
        "problem.yaml: cases[1].name: 'wide one' must match [A-Za-z0-9_-]+",
    ),
    (
        "case-file-for-a-random-buffer",
        "spmv_files",
        _replace("problem.yaml", "      values: wide.val.bin", "      values: wide.val.bin\n      y: wide.val.bin"),
        "problem.yaml: cases[1] (wide).files.y: buffer 'y' is not initialised from a file (init: file)",
    ),
]


@pytest.mark.parametrize(("label", "source", "change", "expected"), BROKEN, ids=[b[0] for b in BROKEN])
def test_broken_copy_is_one_line_exit_2_and_nothing_written(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    label: str,
    source: str,
    change: Callable[[Path], None],
    expected: str,
) -> None:
    d = tmp_path / source
    shutil.copytree(CORPUS / source, d)
    change(d)
    if "{line}" in expected:
        needle = "small_integr(" if "small_integr" in expected else "smooth(floot"
        expected = expected.replace("{line}", str(_line_of(d / "inputs.yaml", needle)))
    before = snapshot(d)
    monkeypatch.chdir(tmp_path)
    code = main(["--dir", source, "--check"])
    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert out == ""
    lines = err.splitlines()
    assert 1 <= len(lines) <= 2 and (len(lines) == 1 or lines[1].startswith("hint: ")), err
    assert lines[0].startswith(f"{source}/"), lines[0]
    assert expected in lines[0], lines[0]
    assert snapshot(d) == before


def test_a_run_stops_on_ref_py_before_the_engine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    d = tmp_path / "softmax_rows_py"
    shutil.copytree(CORPUS / "softmax_rows_py", d)
    _replace("ref.py", "import numpy as np\n", "import numpy as np\nimport torch_is_not_here\n")(d)
    started: list[object] = []
    monkeypatch.setattr("cacao_tui.cli.load_engine", lambda: started.append(1) or (lambda args: 0))
    before = snapshot(d)
    code = main(["--dir", str(d), "--no-ui", "--dry-run"])
    err = capsys.readouterr().err
    assert code == 2 and not started
    assert "ref.py: line 4: imports 'torch_is_not_here'" in err.splitlines()[0]
    assert snapshot(d) == before


def test_generator_of_wrong_length_names_the_buffer(tmp_path: Path) -> None:
    d = tmp_path / "spmv_files"
    shutil.copytree(CORPUS / "spmv_files", d)
    _replace("inputs.yaml", "std::vector<float> v(static_cast<size_t>(NCOLS));", "std::vector<float> v(5);")(d)
    p = load_problem(d)
    with pytest.raises(GeneratorError) as info:
        generated_inputs(p, p.primary, tmp_path / "work")
    assert str(info.value).endswith(
        "inputs.yaml: args[7] (x).body: returned 5 elements, expected 7 (its size in shape skewed)"
    )


def test_generator_that_throws_names_the_buffer(tmp_path: Path) -> None:
    d = tmp_path / "terrain_custom"
    shutil.copytree(CORPUS / "terrain_custom", d)
    _replace("inputs.yaml", "    return out;", '    throw std::runtime_error("terrain too flat");')(d)
    _replace("inputs.yaml", "headers: ['<algorithm>'", "headers: ['<stdexcept>', '<algorithm>'")(d)
    p = load_problem(d)
    with pytest.raises(GeneratorError) as info:
        generated_inputs(p, p.primary, tmp_path / "work")
    assert str(info.value).endswith("inputs.yaml: args[3] (heights).body: threw terrain too flat")


def test_gpu_metadata_reaches_the_problem_brief() -> None:
    from cacao_tui.nodes.problem_brief import _description

    text = _description(load_problem(CORPUS / "legacy_inline"))
    assert text.startswith("C = ALPHA * A .* B")
    assert "problem.yaml describes its GPU as: model NVIDIA H200, sm_count 132, shared_memory_per_block 49152" in text
