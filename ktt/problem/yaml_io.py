"""Reading YAML files and turning pydantic errors into one-line ``FILE: FIELD: message`` errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from ktt.problem.errors import ProblemError

M = TypeVar("M", bound=BaseModel)

_UNION_TAGS = {"scalar", "buffer", "ForbidEntry", "str", "int", "float", "list[int]", "list[str]"}


class _Loader(yaml.SafeLoader):
    """SafeLoader that notes keys given twice in one mapping (PyYAML silently keeps the last)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.duplicates: list[tuple[str, int]] = []

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[str] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                if key_node.value in seen:
                    self.duplicates.append((key_node.value, key_node.start_mark.line + 1))
                seen.add(key_node.value)
        return super().construct_mapping(node, deep=deep)


def _load(text: str) -> tuple[Any, list[tuple[str, int]]]:
    loader = _Loader(text)
    try:
        return loader.get_single_data(), loader.duplicates
    finally:
        loader.dispose()


def read_yaml_mapping(path: Path, warnings: list[str] | None = None) -> dict[str, Any]:
    """Parse a YAML file whose top level must be a mapping.

    A key given twice in one mapping is legal YAML for PyYAML (the last one wins), so older
    files that do it still load; it is reported in ``warnings`` when a list is passed.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProblemError(path, "", "file not found") from None
    except UnicodeDecodeError as exc:
        raise ProblemError(path, "", f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise ProblemError(path, "", f"cannot read: {exc.strerror}") from None
    try:
        data, duplicates = _load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "(file)"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ProblemError(
            path,
            where,
            f"YAML syntax error: {problem}",
            hint="quote values that start with * & ! { [ or contain ': ' (e.g. size: '2 * N')",
        ) from None
    if data is None:
        raise ProblemError(path, "(top level)", "the file is empty; expected a mapping of keys")
    if not isinstance(data, dict):
        raise ProblemError(path, "(top level)", f"expected a mapping of keys, got a {_kind(data)}")
    if warnings is not None:
        warnings += [
            f"{path.name}: line {line}: key {key!r} is given twice; the last one wins" for key, line in duplicates
        ]
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
    shows_input = kind in ("literal_error", "enum") or kind.startswith(("greater_than", "less_than"))
    if shows_input or kind.endswith("_type") or kind.endswith("_parsing"):
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
