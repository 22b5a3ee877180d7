"""Tool-call arguments as models send them: usually a JSON object, sometimes not.

They are read by the one parser of untrusted JSON (``ktt.capped_read.parse_json``, strict): a
5,000-digit number, ``1e400``, ``NaN`` or arrays 4,000 deep are a tool error the model reads,
never a traceback; arguments an SDK already parsed (Gemini's) are held to the same bounds.
"""

from __future__ import annotations

import json
from typing import Any

from ktt.capped_read import JSONBoundsError, check_json_value, parse_json

_SNIPPET = 200


def parse_tool_arguments(raw: Any) -> tuple[dict[str, Any], str | None]:
    """Arguments as a dict, plus an error for the model when they are not a JSON object.

    A malformed call is never fatal: the error goes back to the model as the tool's result.
    """
    if raw is None or raw == "":
        return {}, None
    if isinstance(raw, dict):
        try:
            return check_json_value(raw), None
        except JSONBoundsError as exc:
            return {}, f"the arguments are out of bounds: {exc}"
    if isinstance(raw, str):
        try:
            value = parse_json(raw, strict=True)
        except json.JSONDecodeError as exc:
            return {}, f"the arguments are not valid JSON ({exc.msg} at char {exc.pos}): {_snippet(raw)}"
        except ValueError as exc:  # a bound (JSONBoundsError), or text that is not UTF-8
            return {}, f"the arguments are out of bounds: {exc}: {_snippet(raw)}"
        if isinstance(value, dict):
            return value, None
        return {}, f"the arguments must be a JSON object, got {type(value).__name__}: {_snippet(raw)}"
    return {}, f"the arguments must be a JSON object, got {type(raw).__name__}"


def _snippet(text: str) -> str:
    return text if len(text) <= _SNIPPET else text[:_SNIPPET] + "..."
