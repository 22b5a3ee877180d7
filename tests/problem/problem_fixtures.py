"""Helpers for problem tests: a small valid problem to break, YAML edits, directory snapshots."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]

TINY_PROBLEM = """\
# A tiny valid problem; each test breaks one thing in a copy.
name: tiny
grid: {x: "(COUNT + 127) / 128"}
reference: {type: cuda, file: ref_kernel.cu, function: tiny_ref, block: {x: 128}}
validation: {tolerance: 1e-5}
rules:
  forbid:
    - {pattern: '\\bcublas', reason: no libraries}
"""

TINY_INPUTS = """\
args:
  - {kind: scalar, name: COUNT, value: 1024}
  - {kind: buffer, name: X, dtype: float, size: COUNT, access: read}
  - {kind: buffer, name: Y, dtype: float, size: COUNT, access: write, validate: true}
"""

TINY_REF = """\
extern "C" __global__ void tiny_ref(const float* X, float* Y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < COUNT) Y[i] = 2.0f * X[i];
}
"""


def write_tiny(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "problem.yaml").write_text(TINY_PROBLEM)
    (directory / "inputs.yaml").write_text(TINY_INPUTS)
    (directory / "ref_kernel.cu").write_text(TINY_REF)
    return directory


def edit_yaml(path: Path, change: Callable[[dict], object]) -> None:
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under root -> its bytes (None for a directory): equal snapshots mean untouched."""
    out: dict[str, bytes | None] = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        out[rel] = None if p.is_dir() and not p.is_symlink() else p.read_bytes() if p.is_file() else b"<link>"
    return out
