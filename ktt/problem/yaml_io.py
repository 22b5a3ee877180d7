"""Reading YAML files and turning pydantic errors into one-line ``FILE: FIELD: message`` errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from ktt.problem.errors import ProblemError

M = TypeVar("M", bound=BaseModel)

_UNION_TAGS = {"scalar", "buffer", "ForbidEntry", "str", "int", "float", "list[int]", "list[str]"}


def read_yaml_mapping(path: Path) -> dict[str, Any]:
    """Parse a YAML file whose top level must be a mapping."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProblemError(path, "", "file not found") from None
    except UnicodeDecodeError as exc:
        raise ProblemError(path, "", f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise ProblemError(path, "", f"cannot read: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "(file)"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ProblemError(path, where, f"YAML syntax error: {problem}") from None
    if data is None:
        raise ProblemError(path, "(top level)", "the file is empty; expected a mapping of keys")
    if not isinstance(data, dict):
        raise ProblemError(path, "(top level)", f"expected a mapping of keys, got a {_kind(data)}")
    return data


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return type(value).__name__


def field_path(loc: tuple[Any, ...], data: Any = None) -> str:
    """('args', 2, 'buffer', 'dtype') -> 'args[2] (B).dtype' (the arg's name when known)."""
    out = ""
    node = data
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            node = node[part] if isinstance(node, list) and part < len(node) else None
            if isinstance(node, dict) and isinstance(node.get("name"), str):
                out += f" ({node['name']})"
            continue
        if part in _UNION_TAGS or str(part).startswith(("function-", "literal[")):
            continue
        out += f".{part}" if out else str(part)
        node = node.get(part) if isinstance(node, dict) else None
    return out or "(top level)"


def _message(err: dict[str, Any]) -> str:
    msg = str(err.get("msg", "invalid value"))
    kind = err.get("type", "")
    if msg.startswith("Value error, "):
        return msg[len("Value error, ") :]
    if kind == "missing":
        return "missing (required)"
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "union_tag_not_found":
        return "missing 'kind' (must be scalar or buffer)"
    got = err.get("input")
    if kind in ("literal_error", "enum") or kind.endswith("_type") or kind.endswith("_parsing"):
        return f"{msg[0].lower()}{msg[1:]} (got {got!r})"
    return f"{msg[0].lower()}{msg[1:]}"


def validate_model(model: type[M], data: dict[str, Any], path: Path) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        # For unions pydantic reports every branch; the first error is the most specific one.
        first = errors[0]
        raise ProblemError(path, field_path(tuple(first["loc"]), data), _message(dict(first))) from None
