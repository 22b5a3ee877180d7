"""The older inline form: ``scalars:`` / ``vectors:`` and flat ``block_x`` keys in problem.yaml.

Early CACAO problems described the I/O boundary inside problem.yaml. We convert that
form into the inputs.yaml model so such directories load unchanged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ktt.problem.errors import ProblemError

LEGACY_KEYS = ("scalars", "vectors", "block_x", "block_y", "block_z")

_DIRECTION = {"in": "read", "input": "read", "out": "write", "output": "write", "inout": "readwrite"}


def has_legacy_form(data: dict[str, Any]) -> bool:
    return any(k in data for k in ("scalars", "vectors"))


def legacy_block(data: dict[str, Any]) -> dict[str, Any] | None:
    block = {axis: data[f"block_{axis}"] for axis in "xyz" if f"block_{axis}" in data}
    return block or None


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

    vectors = data.get("vectors") or []
    if isinstance(vectors, dict):
        vectors = [{"name": k, **(v if isinstance(v, dict) else {"size": v})} for k, v in vectors.items()]
    if not isinstance(vectors, list):
        raise ProblemError(path, "vectors", "expected a list of buffers")
    for i, item in enumerate(vectors):
        if not isinstance(item, dict):
            raise ProblemError(path, f"vectors[{i}]", "expected a mapping with name, size and dtype")
        entry = {k: v for k, v in item.items() if k not in ("type", "direction")}
        if "type" in item and "dtype" not in item:
            entry["dtype"] = item["type"]
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
