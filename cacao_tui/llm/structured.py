"""Structured output: ask for one JSON object matching a pydantic model, read it back.

Works the same on every provider (and on local servers without a JSON mode): the
schema goes into the system prompt, the reply is parsed leniently (bare JSON, a fenced
block, or the outermost braces) and validated; on failure the caller re-asks with the
error, a bounded number of times.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

T = TypeVar("T", bound=BaseModel)

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n(.*?)```", re.DOTALL)


class StructuredOutputError(ValueError):
    """The reply is not a valid instance; the message is written for the model."""


@functools.lru_cache(maxsize=64)
def schema_instructions(model: type[BaseModel]) -> str:
    """The instructions for ``model`` (built once per model: a schema is costly to generate)."""
    schema = json.dumps(model.model_json_schema(), indent=1, ensure_ascii=False)
    return (
        "Answer with exactly one JSON object that validates against this JSON schema, "
        "and nothing else (no prose, no comments, no code fences):\n"
        f"{schema}"
    )


def extract_json(text: str) -> Any:
    """The JSON value in a reply, or StructuredOutputError."""
    stripped = text.strip()
    if not stripped:
        raise StructuredOutputError("the reply was empty; it must be a JSON object")
    candidates = [stripped]
    candidates += [m.group(1).strip() for m in _FENCE.finditer(text)]
    start, end = stripped.find("{"), stripped.rfind("}")
    if 0 <= start < end:
        candidates.append(stripped[start : end + 1])
    error = ""
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except json.JSONDecodeError as exc:
            error = error or f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    raise StructuredOutputError(f"the reply is not valid JSON ({error})")


def parse_structured(text: str, model: type[T]) -> T:
    value = extract_json(text)
    if not isinstance(value, dict):
        raise StructuredOutputError(f"the reply must be a JSON object, not a {type(value).__name__}")
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        problems = []
        for err in exc.errors()[:6]:
            where = ".".join(str(p) for p in err["loc"]) or "(top level)"
            problems.append(f"{where}: {err['msg']}")
        more = f" (and {exc.error_count() - 6} more)" if exc.error_count() > 6 else ""
        raise StructuredOutputError("the JSON does not match the schema: " + "; ".join(problems) + more) from None


def reask_message(error: str, *, truncated: bool) -> str:
    if truncated:
        return (
            f"Your reply was cut off at the output token limit, so it could not be used ({error}). "
            "Answer again with a shorter JSON object that still matches the schema, and nothing else."
        )
    return f"Your reply could not be used: {error}. Answer again with only the JSON object, matching the schema."
