"""Structured output: ask for one JSON object matching a pydantic model, read it back.

The schema always goes into the system prompt, so the path works on every provider and
local server; where the model supports it the adapter also uses the provider's own
structured output (``native_schema`` is what it sends). Replies are read tolerantly,
because real models wrap JSON in many ways: reasoning blocks (``<think>...</think>``,
possibly with braces of their own), code fences (closed or not), prose before or after,
trailing commas, explicit nulls for optional fields. Each candidate object is validated
against the model and the first valid one wins; what had to be repaired is reported so
the call's record says so. An unusable reply gets one repair turn quoting the error.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from cacao_tui.llm.errors import error_location
from ktt.capped_read import JSONBoundsError, json_decoder, json_depth_error, parse_json

T = TypeVar("T", bound=BaseModel)

_FENCE = re.compile(r"```[ \t]*(?:json|JSON|json5)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)
_REASONING_BLOCK = re.compile(r"<(think|thinking|reasoning|thought)>.*?(?:</\1>|\Z)", re.DOTALL | re.IGNORECASE)
_DANGLING_CLOSE = re.compile(r"^.*</(?:think|thinking|reasoning|thought)>", re.DOTALL | re.IGNORECASE)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
MAX_START_POSITIONS = 200  # where a JSON value may begin: bounded, replies can be large


class StructuredOutputError(ValueError):
    """The reply is not a valid instance; the message is written for the model."""


@dataclass
class Parsed(Generic[T]):
    """A validated reply and the repairs it needed (empty: it was clean JSON)."""

    value: T
    repairs: list[str] = field(default_factory=list)


@functools.lru_cache(maxsize=64)
def schema_instructions(model: type[BaseModel]) -> str:
    """The instructions for ``model`` with its schema, for a model that gets the schema in the
    prompt only: the schema ``native_schema`` gives, the one a response format would carry."""
    return schema_text(native_schema(model))


def schema_text(schema: dict[str, Any]) -> str:
    return (
        "Answer with exactly one JSON object that validates against this JSON schema, "
        "and nothing else (no prose, no comments, no code fences):\n" + json.dumps(schema, indent=1, ensure_ascii=False)
    )


def format_instructions(name: str, schema: dict[str, Any] | None = None) -> str:
    """The instructions when the schema travels as the request's response format (stated once); the
    rule for optional fields only where ``schema`` has one (a field that may be null)."""
    optional = schema is None or '"null"' in json.dumps(schema)
    return (
        f"Answer with one JSON object, {name}, as the response format's schema describes it, and nothing "
        "else (no prose, no code fences)" + ("; null for an optional field that does not apply." if optional else ".")
    )


def strip_reasoning(text: str) -> tuple[str, bool]:
    """``text`` without reasoning blocks (``<think>`` and kin, closed or cut off), and
    whether there were any. A server that drops the opening tag leaves ``...</think>``:
    everything up to it goes too."""
    stripped = _REASONING_BLOCK.sub("", text)
    stripped = _DANGLING_CLOSE.sub("", stripped)
    return stripped, stripped != text


def _candidates(text: str) -> list[tuple[str, list[str]]]:
    """Texts that may hold the JSON value, each with the repairs that produced it."""
    out: list[tuple[str, list[str]]] = []
    body, had_reasoning = strip_reasoning(text)
    base = ["a reasoning block removed"] if had_reasoning else []
    body = body.strip()
    out.append((body, base))
    for match in _FENCE.finditer(body):
        out.append((match.group(1).strip(), [*base, "the code fence removed"]))
    return out


def _values(candidates: list[tuple[str, list[str]]]) -> tuple[list[tuple[Any, list[str]]], str | None]:
    """Every JSON value the candidates hold: first each candidate whole (as it is, then with
    trailing commas removed), then each complete value inside one, in order of where it
    starts; and the first bound a candidate broke (a 5,000-digit number, nesting too deep)."""
    decoder = json_decoder(strict=True)  # numbers within bounds: 10^5000 or NaN is no value of a reply
    variants: list[tuple[str, list[str]]] = []
    for text, repairs in candidates:
        variants.append((text, repairs))
        fixed = _TRAILING_COMMA.sub(r"\1", text)
        if fixed != text:
            variants.append((fixed, [*repairs, "trailing commas removed"]))
    found: list[tuple[Any, list[str]]] = []
    broken: str | None = None
    for text, fixes in variants:
        try:
            found.append((parse_json(text, strict=True), fixes))
        except JSONBoundsError as exc:
            broken = broken or str(exc)
        except ValueError:
            continue
    for text, fixes in variants:
        starts = [m.start() for m in re.finditer(r"[{\[]", text)][:MAX_START_POSITIONS]
        for pos in starts:
            try:
                value, end = decoder.raw_decode(text, pos)
            except JSONBoundsError as exc:
                broken = broken or str(exc)
                continue
            except (ValueError, RecursionError):
                continue
            deep = json_depth_error(value)
            if deep is not None:
                broken = broken or deep
                continue
            if pos == 0 and not text[end:].strip():
                continue  # the whole text: already tried
            found.append((value, [*fixes, "text around the JSON ignored"]))
    return found, broken


def extract_json(text: str) -> Any:
    """The first JSON object in a reply (tolerantly, as ``parse_structured`` reads it),
    or StructuredOutputError."""
    if not text.strip():
        raise StructuredOutputError("the reply was empty; it must be a JSON object")
    found, broken = _values(_candidates(text))
    for value, _ in found:
        if isinstance(value, dict):
            return value
    if broken is not None:
        raise StructuredOutputError(f"the reply's JSON is out of bounds: {broken}")
    raise StructuredOutputError("the reply holds no JSON object")


def _drop_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


def _validation_text(exc: ValidationError) -> str:
    problems = []
    for err in exc.errors()[:6]:
        where = error_location(err["loc"], "(top level)")
        problems.append(f"{where}: {err['msg']}")
    more = f" (and {exc.error_count() - 6} more)" if exc.error_count() > 6 else ""
    return "the JSON does not match the schema: " + "; ".join(problems) + more


def parse_structured(text: str, model: type[T]) -> T:
    return parse_reply(text, model).value


def parse_reply(text: str, model: type[T]) -> Parsed[T]:
    """The first object in ``text`` that validates as ``model``, with its repairs; else
    StructuredOutputError saying what was wrong with the first object found."""
    if not text.strip():
        raise StructuredOutputError("the reply was empty; it must be a JSON object")
    first_error: str | None = None
    saw_value = False
    found, broken = _values(_candidates(text))
    for value, fixes in found:
        saw_value = True
        if not isinstance(value, dict):
            first_error = first_error or f"the reply must be a JSON object, not a {type(value).__name__}"
            continue
        try:
            return Parsed(model.model_validate(value), fixes)
        except ValidationError as exc:
            cleaned = _drop_nulls(value)
            if cleaned != value:
                try:
                    return Parsed(model.model_validate(cleaned), [*fixes, "null fields dropped"])
                except ValidationError:
                    pass
            first_error = first_error or _validation_text(exc)
    if first_error is not None:
        raise StructuredOutputError(first_error)
    if not saw_value:
        if broken is not None:
            raise StructuredOutputError(f"the reply's JSON is out of bounds: {broken}")
        body = strip_reasoning(text)[0].strip()
        if not body:
            raise StructuredOutputError("the reply held only reasoning, no JSON object after it")
        raise StructuredOutputError("the reply is not valid JSON (no complete JSON object found)")
    raise StructuredOutputError("the reply holds no JSON object")


def reask_message(error: str, *, truncated: bool) -> str:
    if truncated:
        return (
            f"Your reply was cut off at the output token limit, so it could not be used ({error}). "
            "Answer again with a shorter JSON object that still matches the schema, and nothing else."
        )
    return f"Your reply could not be used: {error}. Answer again with only the JSON object, matching the schema."


@functools.lru_cache(maxsize=64)
def native_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The schema a provider's structured output enforces: every object closed, every
    property required (optional ones nullable), no ``default``, ``title`` or ``description``
    keywords (the prompt that asks for the object says what each field means: once).
    That is the form OpenAI's strict mode accepts; the others take it as well. The nulls
    a model then writes for optional fields are dropped when the reply is read."""
    return _strict(copy.deepcopy(model.model_json_schema()))


def _nullable(prop: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in prop or "enum" in prop or "const" in prop:
        return {"anyOf": [prop, {"type": "null"}]}
    if "anyOf" in prop:
        if not any(p.get("type") == "null" for p in prop["anyOf"]):
            prop["anyOf"].append({"type": "null"})
        return prop
    kind = prop.get("type")
    if isinstance(kind, str) and kind != "null":
        prop["type"] = [kind, "null"]
    elif isinstance(kind, list) and "null" not in kind:
        prop["type"] = [*kind, "null"]
    return prop


def _strict(node: Any) -> Any:
    if isinstance(node, list):
        return [_strict(v) for v in node]
    if not isinstance(node, dict):
        return node
    node.pop("default", None)
    node.pop("title", None)
    if isinstance(node.get("description"), str):
        node.pop("description")
    for key, value in list(node.items()):
        if key == "properties" and isinstance(value, dict):
            node[key] = {name: _strict(prop) for name, prop in value.items()}
        elif isinstance(value, dict | list):
            node[key] = _strict(value)
    if node.get("type") == "object" and isinstance(node.get("properties"), dict):
        required = set(node.get("required", []))
        node["properties"] = {
            name: (prop if name in required else _nullable(prop)) for name, prop in node["properties"].items()
        }
        node["required"] = list(node["properties"])
        node["additionalProperties"] = False
    return node
