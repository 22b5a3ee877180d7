"""The guides' examples are real: assembled into problem directories and loaded, compiled or run.

Markers in the guides (HTML comments, invisible when rendered):
- ``<!-- example: DIR/FILE -->`` before a code block: the whole FILE of example DIR.
- ``<!-- example: DIR/FILE from BASE -->``: DIR starts as a copy of BASE; a YAML block
  replaces only the top-level keys it names, any other block the whole file.
- ``<!-- binary: DIR/PATH BYTES -->``: a zero-filled file of that size.
- ``<!-- generated: DIR/inputs.hpp -->`` before a block: what cacao generates for DIR.
- ``<!-- error: DIR: FILE: FIELD: message -->``: loading DIR fails with exactly this line.
Every other DIR must load. Every yaml, cuda, c and python block must carry a marker.
"""

from __future__ import annotations

import ctypes
import importlib.util
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import yaml

from ktt.problem import ProblemError, load_problem
from ktt.problem.inputs_hpp import render_inputs_hpp

REPO = Path(__file__).resolve().parents[2]
GUIDES = ["PROBLEM_YAML_GUIDE.md", "INPUTS_YAML_GUIDE.md", "REFERENCE_IMPLEMENTATION_GUIDE.md"]
TESTED_LANGUAGES = {"yaml", "cuda", "c", "python"}
MARKER = re.compile(r"<!-- (example|binary|generated|error): (.+?) -->")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


@dataclass
class Examples:
    files: dict[str, dict[str, str | bytes]] = field(default_factory=dict)
    generated: dict[str, str] = field(default_factory=dict)  # DIR -> inputs.hpp text
    errors: dict[str, str] = field(default_factory=dict)  # DIR -> expected line (relative to DIR)
    unmarked: list[str] = field(default_factory=list)


def _merge(base: str, snippet: str) -> str:
    data = yaml.safe_load(base) or {}
    data.update(yaml.safe_load(snippet) or {})
    return yaml.safe_dump(data, sort_keys=False)


def collect() -> Examples:
    ex = Examples()
    declared: set[str] = set()  # DIR/FILE shown as a whole file; showing one twice must agree
    for guide in GUIDES:
        text = (REPO / "docs" / guide).read_text(encoding="utf-8")
        fences = list(FENCE.finditer(text))
        marked_fences: set[int] = set()
        for m in MARKER.finditer(text):
            kind, body = m.group(1), m.group(2).strip()
            following = next((f for f in fences if f.start() > m.end()), None)
            block = None
            if following is not None and not text[m.end() : following.start()].strip():
                block = following.group(2)
            if kind == "binary":
                path, size = body.rsplit(" ", 1)
                directory, rel = path.split("/", 1)
                ex.files.setdefault(directory, {})[rel] = b"\0" * int(size)
            elif kind == "error":
                directory, expected = body.split(": ", 1)
                ex.errors[directory] = expected
            elif kind == "generated":
                assert block is not None, f"{guide}: {m.group(0)} has no code block right after it"
                marked_fences.add(following.start())  # type: ignore[union-attr]
                ex.generated[body.split("/", 1)[0]] = block
            else:
                assert block is not None, f"{guide}: {m.group(0)} has no code block right after it"
                marked_fences.add(following.start())  # type: ignore[union-attr]
                target, _, base = body.partition(" from ")
                directory, rel = target.split("/", 1)
                files = ex.files.setdefault(directory, {})
                for rel_base, content in ex.files[base.strip()].items() if base else ():
                    files.setdefault(rel_base, content)
                if base and rel.endswith(".yaml") and isinstance(files.get(rel), str):
                    files[rel] = _merge(str(files[rel]), block)
                elif target in declared and not base:
                    assert files[rel] == block, f"{guide}: {target} is shown twice with different text"
                else:
                    files[rel] = block
                declared.add(target)
        for f in fences:
            if f.group(1) in TESTED_LANGUAGES and f.start() not in marked_fences:
                ex.unmarked.append(f"{guide}: a {f.group(1)} block at offset {f.start()}")
    return ex


EXAMPLES = collect()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("guides")
    for directory, files in EXAMPLES.files.items():
        for rel, content in files.items():
            path = root / directory / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content, encoding="utf-8")
    return root


def test_every_example_block_is_marked() -> None:
    assert EXAMPLES.unmarked == []
    assert len(EXAMPLES.files) >= 10


@pytest.mark.parametrize("directory", sorted(d for d in EXAMPLES.files if d not in EXAMPLES.errors))
def test_example_loads(built: Path, directory: str) -> None:
    problem = load_problem(built / directory)
    assert problem.validated


@pytest.mark.parametrize("directory", sorted(EXAMPLES.errors))
def test_error_example_fails_as_shown(built: Path, directory: str) -> None:
    with pytest.raises(ProblemError) as info:
        load_problem(built / directory)
    assert str(info.value).endswith(f"/{directory}/{EXAMPLES.errors[directory]}")


@pytest.mark.parametrize("directory", sorted(EXAMPLES.generated))
def test_generated_inputs_hpp_is_current(built: Path, directory: str) -> None:
    assert render_inputs_hpp(load_problem(built / directory)) == EXAMPLES.generated[directory]


def test_runtime_scalar_joins_the_boundary(built: Path) -> None:
    assert load_problem(built / "saxpy-runtime").boundary_signature() == "const float* x, float* y, int LEN"
    assert load_problem(built / "saxpy").boundary_signature() == "const float* x, float* y"


def test_cases_and_opencl_examples(built: Path) -> None:
    cases = load_problem(built / "saxpy-cases")
    assert [s.name for s in cases.shapes] == ["small", "odd"] and cases.primary.name == "small"
    assert cases.shape("odd").grid.x == (1000003 + 255) // 256
    opencl = load_problem(built / "saxpy-opencl")
    assert opencl.global_size_type == "opencl" and opencl.primary.grid.x == 1 << 24


def test_python_reference_computes_saxpy(built: Path) -> None:
    problem = load_problem(built / "saxpy-py")
    spec = importlib.util.spec_from_file_location("guide_saxpy_ref", problem.reference.file)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rng = np.random.default_rng(1)
    x, y = rng.uniform(-1, 1, 1000).astype(np.float32), rng.uniform(-1, 1, 1000).astype(np.float32)
    scalars = {"LEN": 1000, "ALPHA": 2.5}
    result = getattr(module, problem.reference.function)(module.prepare_input(scalars, {"x": x, "y": y}))
    np.testing.assert_allclose(result, 2.5 * x + y, atol=1e-6)


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_c_reference_computes_saxpy(built: Path, tmp_path: Path) -> None:
    problem = load_problem(built / "saxpy-c")
    lib = tmp_path / "saxpy.so"
    subprocess.run(
        ["cc", "-std=c99", "-Wall", "-Werror", "-shared", "-fPIC", "-DLEN=1000", "-DALPHA=2.5f",
         str(problem.reference.file), "-o", str(lib)],
        check=True,
    )  # fmt: skip
    x = np.linspace(-1, 1, 1000, dtype=np.float32)
    y = np.ones(1000, dtype=np.float32)
    expected = 2.5 * x + y
    fn = getattr(ctypes.CDLL(str(lib)), problem.reference.function)
    fn(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(y.ctypes.data))
    np.testing.assert_allclose(y, expected, atol=1e-6)
