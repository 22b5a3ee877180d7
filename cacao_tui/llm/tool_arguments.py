"""Tool-call arguments as models send them: usually a JSON object, sometimes not."""

from __future__ import annotations

import json
from typing import Any

_SNIPPET = 200


def parse_tool_arguments(raw: Any) -> tuple[dict[str, Any], str | None]:
    """Arguments as a dict, plus an error for the model when they are not a JSON object.

    A malformed call is never fatal: the error goes back to the model as the tool's result.
    """
    if raw is None or raw == "":
        return {}, None
    if isinstance(raw, dict):
        return raw, None
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            return {}, f"the arguments are not valid JSON ({exc.msg} at char {exc.pos}): {_snippet(raw)}"
        if isinstance(value, dict):
            return value, None
        return {}, f"the arguments must be a JSON object, got {type(value).__name__}: {_snippet(raw)}"
    return {}, f"the arguments must be a JSON object, got {type(raw).__name__}"


def _snippet(text: str) -> str:
    return text if len(text) <= _SNIPPET else text[:_SNIPPET] + "..."
