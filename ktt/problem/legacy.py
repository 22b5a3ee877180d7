"""The older inline form: ``scalars:`` / ``vectors:`` and flat ``block_x`` keys in problem.yaml.

Early CACAO problems described the I/O boundary inside problem.yaml. We convert that
form into the inputs.yaml model so such directories load unchanged. Its dtypes are the first
tuner's (char, short, int, long, float, double and int8 ... float64, any case); its sizes and
grid are Python expressions, so the loader reads them in the python dialect (``//`` is floor
division there).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ktt.problem.errors import ProblemError
from ktt.problem.files import INLINE_DTYPE_ALIASES

_FLAT_BLOCK = ("block_x", "block_y", "block_z")
# Keys of the older form that are read here (or, for kernel:, that meant something only to the
# original's first tuner), so they are not reported as unknown.
LEGACY_KEYS = ("scalars", "vectors", "kernel", *_FLAT_BLOCK, *(f"reference.{k}" for k in _FLAT_BLOCK))
# The original's first tuner: with no block keys at all, blocks of 8 x 8 x 1.
LEGACY_BLOCK_DEFAULT = {"x": 8, "y": 8, "z": 1}

_DIRECTION = {"in": "read", "input": "read", "out": "write", "output": "write", "inout": "readwrite"}

# The original's first tuner filled a random vector from [-2, 2] (ints: -2..2) when no bounds were given.
_LEGACY_RANDOM_RANGE = (-2, 2)


def _dtype(name: str, path: Path, field: str) -> str:
    """The inline form's dtype spellings (char, int8 ... int64, float32, ...), case-insensitive."""
    found = INLINE_DTYPE_ALIASES.get(name.strip().lower())
    if found is None:
        raise ProblemError(
            path,
            field,
            f"unknown dtype {name[:40]!r} (the older inline form takes {', '.join(INLINE_DTYPE_ALIASES)}, any case)",
        )
    return found


def has_legacy_form(data: dict[str, Any]) -> bool:
    return any(k in data for k in ("scalars", "vectors"))


def legacy_block(data: dict[str, Any]) -> dict[str, Any] | None:
    """The flat block keys, from ``reference:`` (where the original's guide put them) or the top level.

    Axes not named are 1; None when no flat key is present.
    """
    ref = data.get("reference") if isinstance(data.get("reference"), dict) else {}
    block: dict[str, Any] = {}
    for axis in "xyz":
        key = f"block_{axis}"
        if key in ref:
            block[axis] = ref[key]
        elif key in data:
            block[axis] = data[key]
    if not block:
        return None
    return block


def convert_inline_inputs(data: dict[str, Any], path: Path, warnings: list[str] | None = None) -> dict[str, Any]:
    """Build an inputs.yaml-shaped mapping from inline ``scalars`` and ``vectors``.

    When no vector says ``validate``, every output vector (direction out or inout) is
    validated: the strictest reading of a file that predates the key.
    """
    args: list[dict[str, Any]] = []
    scalars = data.get("scalars") or {}
    if isinstance(scalars, dict):
        for name, value in scalars.items():
            if isinstance(value, dict):
                args.append({"kind": "scalar", "name": name, **value})
            else:
                args.append({"kind": "scalar", "name": name, "value": value})
    elif isinstance(scalars, list):
        for i, item in enumerate(scalars):
            if not isinstance(item, dict):
                raise ProblemError(path, f"scalars[{i}]", "expected a mapping with name and value")
            args.append({"kind": "scalar", **item})
    else:
        raise ProblemError(path, "scalars", "expected a mapping of name: value or a list")

    for i, a in enumerate(args):
        if isinstance(a.get("dtype"), str):
            a["dtype"] = _dtype(a["dtype"], path, f"scalars[{i}] ({a.get('name')}).dtype")

    vectors = data.get("vectors") or []
    if isinstance(vectors, dict):
        vectors = [{"name": k, **(v if isinstance(v, dict) else {"size": v})} for k, v in vectors.items()]
    if not isinstance(vectors, list):
        raise ProblemError(path, "vectors", "expected a list of buffers")
    for i, item in enumerate(vectors):
        if not isinstance(item, dict):
            raise ProblemError(path, f"vectors[{i}]", "expected a mapping with name, size and dtype")
        entry = {k: v for k, v in item.items() if k not in ("type", "direction", "init_min", "init_max")}
        if "type" in item and "dtype" not in item:
            entry["dtype"] = item["type"]
        if isinstance(entry.get("dtype"), str):
            entry["dtype"] = _dtype(entry["dtype"], path, f"vectors[{i}] ({item.get('name')}).dtype")
        # Its init: random, anything else (or nothing) zero-filled; bounds were init_min/init_max.
        init = item.get("init", "zeros")
        entry["init"] = init if init in ("random", "file", "custom") else "zeros"
        if entry["init"] == "random":
            entry.setdefault("min", item.get("init_min", _LEGACY_RANDOM_RANGE[0]))
            entry.setdefault("max", item.get("init_max", _LEGACY_RANDOM_RANGE[1]))
        direction = item.get("direction")
        if direction is not None and "access" not in item:
            if direction not in _DIRECTION:
                raise ProblemError(path, f"vectors[{i}].direction", f"unknown direction {direction!r}")
            entry["access"] = _DIRECTION[direction]
        args.append({"kind": "buffer", **entry})
    buffers = [a for a in args if a["kind"] == "buffer"]
    if buffers and not any("validate" in b for b in buffers):
        outputs = [b for b in buffers if b.get("access") in ("write", "readwrite")]
        for b in outputs:
            b["validate"] = True
        if outputs and warnings is not None:
            names = ", ".join(str(b.get("name")) for b in outputs)
            warnings.append(f"problem.yaml: vectors: no vector sets validate; validating the outputs ({names})")
    return {"headers": data.get("headers") or [], "args": args}
