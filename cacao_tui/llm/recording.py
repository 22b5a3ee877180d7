"""Every call saved as JSON beside the iteration that made it.

Layout under the run's output directory (``record_root``)::

    branches/<branch>/iter<N>/llm/<node>_<index:03d>.json   a branch's iteration
    branches/<branch>/llm/<node>_<index:03d>.json           a branch call outside an iteration
    llm/<node>_<index:03d>.json                             the master (analyze, strategize)
    iter<N>/llm/<node>_<index:03d>.json                     (no branch but an iteration: unused today)

Each file is one ``CallRecord``, written atomically; the UI reads them as they appear.
Every string in it is redacted first (``redaction``), so no key reaches the disk, and its
size is bounded: the messages are those sent (older turns capped, see ``bounds``) and
the response is capped on arrival.
"""

from __future__ import annotations

import re
import stat
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from cacao_tui.llm.errors import LLMError
from cacao_tui.llm.redaction import redact_data
from cacao_tui.llm.types import CallKey, ChatResponse, Message, ToolSpec, Usage
from cacao_tui.store.atomic import MAX_STATE_BYTES, write_json_atomic
from ktt.capped_read import read_bytes_capped

RECORD_SCHEMA_VERSION = 1
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
_RECORD_FILE = re.compile(r"^(?P<node>.+)_(?P<index>\d{3,})\.json\Z")


class AttemptRecord(BaseModel):
    """One failed attempt that was retried (or was the last one)."""

    started_at: float
    latency_s: float
    error: str
    kind: str = "http"
    status: int | None = None
    retry_after_s: float | None = None
    delay_s: float | None = None  # the wait before the next attempt; None when none followed


class CallRecord(BaseModel):
    """A call as recorded: the request, the response or final error, tokens, cost, attempts."""

    model_config = ConfigDict(extra="ignore")
    schema_version: int = RECORD_SCHEMA_VERSION
    branch: str | None = None
    iteration: int | None = None
    node: str
    index: int
    purpose: str = "chat"  # chat | structured | reask (a repair or tool reminder) | retry (after a refusal)
    provider: str
    model: str
    started_at: float = Field(default_factory=time.time)
    latency_s: float = 0.0  # from the first attempt's start on the wire to the end, retries and waits included
    queued_s: float = 0.0  # the wait for a concurrency slot before the first attempt (not in latency_s)
    answer_s: float | None = None  # the answering attempt alone (its tokens per second)
    system: str | None = None
    messages: list[Message] = Field(default_factory=list)
    tools: list[ToolSpec] = Field(default_factory=list)
    max_tokens: int | None = None
    temperature: float | None = None  # None: the server's default
    reasoning_effort: str | None = None  # low | medium | high asked for; None: the model's default
    cache_key: str | None = None  # the prompt-cache key sent (OpenAI prompt_cache_key)
    response: ChatResponse | None = None
    usage: Usage = Field(default_factory=Usage)
    error: str | None = None
    retries: int = 0
    attempts: list[AttemptRecord] = Field(default_factory=list)
    # What the LLM layer did to make the call work: a reply cut to the size cap, a context
    # shrunk to fit, JSON repaired, reasoning used as content, a parameter the server refused.
    notes: list[str] = Field(default_factory=list)
    path: Path | None = Field(default=None, exclude=True)  # where it was written; not saved

    @model_validator(mode="before")
    @classmethod
    def _old_note(cls, data: Any) -> Any:
        """Records written before ``notes`` had one ``note``."""
        if isinstance(data, dict) and isinstance(data.get("note"), str) and "notes" not in data:
            data = {**data, "notes": [data["note"]]}
        return data

    @property
    def key(self) -> CallKey:
        return CallKey(self.branch, self.iteration, self.node, self.index)


def safe_node_name(node: str) -> str:
    return _UNSAFE.sub("_", node) or "call"


def recording_path(record_root: Path, key: CallKey) -> Path:
    base = Path(record_root)
    if key.branch is not None:
        base = base / "branches" / key.branch
    if key.iteration is not None:
        base = base / f"iter{key.iteration}"
    return base / "llm" / f"{safe_node_name(key.node)}_{key.index:03d}.json"


def write_record(record_root: Path, record: CallRecord) -> Path:
    """The call's record beside its iteration, atomically but without an fsync: no state of the
    run depends on a record (a resume asks again what a lost record answered), so a power cut
    may cost the last records, never the run; a record it left empty reads as absent."""
    path = recording_path(record_root, record.key)
    write_json_atomic(path, redact_data(record.model_dump(mode="json")), durable=False)
    record.path = path
    return path


def record_files(output_dir: Path) -> list[Path]:
    """Every call record under a run's output directory (any depth, in ``llm/`` folders), not those
    of an earlier run that ``--no-clean`` kept in ``output/earlier_N/`` (store/earlier_run.py)."""
    root = Path(output_dir)
    found = (p for p in root.rglob("*.json") if p.parent.name == "llm" and _RECORD_FILE.match(p.name))
    return sorted(p for p in found if not p.relative_to(root).parts[0].startswith("earlier_"))


def read_record(path: Path) -> CallRecord:
    try:
        record = CallRecord.model_validate_json(read_bytes_capped(path, MAX_STATE_BYTES, follow_links=False))
    except (OSError, ValueError, ValidationError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise LLMError(f"cannot read LLM call record {path}: {first}") from None
    record.path = path
    return record


def read_records(output_dir: Path) -> list[CallRecord]:
    """Every call record of a run, in call order; an empty record file (a power cut before the
    record reached the disk, write_record) counts as absent."""
    files = (p for p in record_files(output_dir) if not _empty(p))
    return sorted((read_record(p) for p in files), key=lambda r: r.key.sort_key())


def _empty(path: Path) -> bool:
    try:
        st = path.lstat()
    except OSError:
        return False  # read_record says what it is
    return stat.S_ISREG(st.st_mode) and st.st_size == 0
