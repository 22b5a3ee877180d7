"""The session file: a recorded (or hand-written) run's responses, one JSON object per line.

It is what ``--provider replay --from FILE`` reads and what a problem ships as its demo
(``problems/<name>/session.jsonl``). Each line holds a call's key and its response::

    {"node": "analyze", "response": {"text": "..."}}
    {"branch": "tiled", "iteration": 0, "node": "author", "index": 2,
     "response": {"tool_calls": [{"id": "c1", "name": "write_file", "arguments": {"path": "k.cu"}}]}}

Keys: ``branch`` (omit or null for the master), ``iteration`` (omit or null outside an
iteration), ``node``, ``index`` (omit to number the lines of one (branch, iteration,
node) 0, 1, 2 ... in file order). ``response`` is a ChatResponse: ``text``,
``tool_calls`` (``id`` may be omitted), ``stop_reason`` (default ``tool_use`` when there
are tool calls, else ``end``), optional ``usage``, ``model``. A line with ``error``
instead of ``response`` replays a call that failed. Blank lines and lines starting with
``#`` or ``//`` are skipped; an optional header line ``{"format": "cacao-llm-session",
"version": 1, ...}`` may carry notes (problem, provider, model).

``python -m cacao_tui.llm.session_file OUTPUT_DIR SESSION.jsonl`` writes the session file
of a recorded run.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from cacao_tui.llm.errors import LLMError, error_location
from cacao_tui.llm.recording import CallRecord, read_records
from cacao_tui.llm.types import CallKey, ChatResponse
from cacao_tui.store.atomic import write_text_atomic
from ktt.capped_read import MIB, describe_read_error, parse_json, read_text_capped

SESSION_FORMAT = "cacao-llm-session"
MAX_SESSION_BYTES = 256 * MIB  # a problem directory's session.jsonl: read as a regular file up to this
SESSION_VERSION = 1


class SessionEntry(BaseModel):
    """One line of a session file: a call's key and what it returned."""

    model_config = ConfigDict(extra="forbid")
    branch: str | None = None
    iteration: int | None = None
    node: str
    index: int | None = None
    response: ChatResponse | None = None
    error: str | None = None
    comment: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _fill_response_defaults(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not isinstance(data.get("response"), dict):
            return data
        response = dict(data["response"])
        calls = [dict(c) if isinstance(c, dict) else c for c in response.get("tool_calls") or []]
        for n, call in enumerate(calls):
            if isinstance(call, dict) and not call.get("id"):
                call["id"] = f"call_{data.get('node', 'x')}_{data.get('index', 'n')}_{n}"
        response["tool_calls"] = calls
        response.setdefault("stop_reason", "tool_use" if calls else "end")
        return {**data, "response": response}

    @model_validator(mode="after")
    def _response_or_error(self) -> SessionEntry:
        if self.response is None and self.error is None:
            raise ValueError("a session line needs 'response' or 'error'")
        return self


def read_session_file(path: Path) -> dict[CallKey, SessionEntry]:
    """Entries keyed by (branch, iteration, node, index); errors name the file and line."""
    return read_session(path)[1]


def read_session(path: Path) -> tuple[dict[str, Any], dict[CallKey, SessionEntry]]:
    """The header line's fields (empty without one) and the entries, as ``read_session_file``."""
    path = Path(path)
    header: dict[str, Any] = {}
    try:
        lines = read_text_capped(path, MAX_SESSION_BYTES).splitlines()  # a FIFO or /dev/zero: one line
    except (OSError, UnicodeDecodeError) as exc:
        raise LLMError(f"cannot read session file {path}: {describe_read_error(exc)}") from None
    entries: dict[CallKey, SessionEntry] = {}
    next_index: dict[tuple[str | None, int | None, str], int] = {}
    for lineno, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith(("#", "//")):
            continue
        try:
            data = parse_json(text)  # nesting too deep is a ValueError, one line like any bad line
        except ValueError as exc:
            raise LLMError(f"{path}:{lineno}: not a JSON object ({getattr(exc, 'msg', exc)})") from None
        if isinstance(data, dict) and "format" in data:
            if data.get("format") != SESSION_FORMAT:
                raise LLMError(f"{path}:{lineno}: unknown format {data.get('format')!r} (expected {SESSION_FORMAT!r})")
            header = header or data
            continue
        try:
            entry = SessionEntry.model_validate(data)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = error_location(err["loc"], "(line)")
            raise LLMError(f"{path}:{lineno}: {where}: {err['msg']}") from None
        group = (entry.branch, entry.iteration, entry.node)
        index = entry.index if entry.index is not None else next_index.get(group, 0)
        next_index[group] = max(next_index.get(group, 0), index + 1)
        key = CallKey(entry.branch, entry.iteration, entry.node, index)
        if key in entries:
            raise LLMError(f"{path}:{lineno}: a second line for {key}")
        entries[key] = entry.model_copy(update={"index": index})
    return header, entries


def entry_from_record(record: CallRecord) -> SessionEntry:
    return SessionEntry(
        branch=record.branch,
        iteration=record.iteration,
        node=record.node,
        index=record.index,
        response=record.response,
        error=None if record.response is not None else (record.error or "failed"),
    )


def session_text(entries: Iterable[SessionEntry], *, header: dict[str, Any] | None = None) -> str:
    head = {"format": SESSION_FORMAT, "version": SESSION_VERSION, **(header or {})}
    lines = [json.dumps(head, ensure_ascii=False)]
    for entry in entries:
        lines.append(entry.model_dump_json(exclude_none=True))
    return "\n".join(lines) + "\n"


def write_session_file(path: Path, entries: Iterable[SessionEntry], *, header: dict[str, Any] | None = None) -> None:
    write_text_atomic(Path(path), session_text(entries, header=header))


def export_session(output_dir: Path, path: Path) -> int:
    """Write the session file of the run recorded under ``output_dir``; returns the line count."""
    records = read_records(output_dir)
    if not records:
        raise LLMError(f"no LLM call records under {output_dir}")
    header = {"provider": records[0].provider, "model": records[0].model, "source": str(output_dir)}
    write_session_file(path, (entry_from_record(r) for r in records), header=header)
    return len(records)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m cacao_tui.llm.session_file OUTPUT_DIR SESSION.jsonl", file=sys.stderr)
        return 2
    try:
        count = export_session(Path(args[0]), Path(args[1]))
    except LLMError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {count} calls to {args[1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
