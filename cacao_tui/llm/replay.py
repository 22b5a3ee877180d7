"""``--provider replay``: serve a recorded run's responses, keyed by
(branch, iteration, node, index). Imports no SDK and spends nothing: the tokens and cost it
reports are the recording's (illustrative figures in the shipped demo sessions).

The source is a run's output directory (or an archived ``archive/output_N``), whose
``llm/`` records are read, or a session file (see ``session_file``). Tool calls in the
responses are executed for real by the engine, so a replay rebuilds the run's files.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from cacao_tui.llm.errors import LLMError, ReplayMismatch
from cacao_tui.llm.pricing import Price
from cacao_tui.llm.provider import AdapterSetup, ChatRequest
from cacao_tui.llm.recording import read_records
from cacao_tui.llm.registry import BY_NAME, price_for
from cacao_tui.llm.session_file import SessionEntry, entry_from_record, read_session
from cacao_tui.llm.types import CallKey, ChatResponse

if TYPE_CHECKING:
    from cacao_tui.llm.selection import ProviderChoice


def load_replay_source(source: Path) -> dict[CallKey, SessionEntry]:
    return _load(Path(source))[0]


def _load(source: Path) -> tuple[dict[CallKey, SessionEntry], Price | None]:
    """The entries, and the price their recorded usage is costed at: a recorded run's own
    model's, or the one a session file's header names (``"priced_as": "PROVIDER:MODEL"``)."""
    if source.is_dir():
        records = read_records(source)
        if not records:
            raise LLMError(f"replay source {source} holds no LLM call records (llm/*.json)")
        return {r.key: entry_from_record(r) for r in records}, price_for(records[0].provider, records[0].model)
    if source.is_file() or source.exists():  # a FIFO or a device: read_session says what it is
        header, entries = read_session(source)
        if not entries:
            raise LLMError(f"replay session file {source} holds no calls")
        priced_as = header.get("priced_as")
        provider, _, model = priced_as.partition(":") if isinstance(priced_as, str) else ("", "", "")
        return entries, price_for(provider, model) if provider in BY_NAME and model else None
    raise LLMError(
        f"replay source not found: {source} (pass --from a run's output directory, an archive/output_N "
        "directory, or a session .jsonl file)"
    )


def create(choice: ProviderChoice, setup: AdapterSetup) -> ReplayProvider:
    if setup.replay_from is None:
        raise LLMError("--provider replay needs a recording: pass --from PATH (a run's output/ or a session .jsonl)")
    return ReplayProvider(setup.replay_from, model=None if choice.model == "replay" else choice.model)


class ReplayProvider:
    """Answers each call with the recorded response for its key; a missing key is a
    ``ReplayMismatch`` naming the key and the source."""

    name = "replay"

    def __init__(self, source: Path, *, model: str | None = None) -> None:
        self.source = Path(source)
        # The recorded usage is reported as any provider's is (each response's ``usage``), costed
        # at this price by the tracked wrapper; a replay's figures are marked illustrative wherever
        # they are shown (cacao_tui.llm.usage.is_illustrative).
        self._entries, self.price = _load(self.source)
        self._served: set[CallKey] = set()
        first = next(iter(self._entries.values()))
        recorded_model = first.response.model if first.response is not None else ""
        self.model = model or recorded_model or "replay"

    def __len__(self) -> int:
        return len(self._entries)

    def covers(self, branch: str | None, iteration: int | None) -> bool:
        """Whether the recording holds any call of this branch's iteration (a replay that asks for
        one it does not hold has outrun its recording there)."""
        return any(k.branch == branch and k.iteration == iteration for k in self._entries)

    def replay_progress(self) -> tuple[int, int]:
        """(recorded calls replayed so far, recorded calls)."""
        return len(self._served), len(self._entries)

    async def complete(self, request: ChatRequest) -> ChatResponse:
        entry = self._entries.get(request.key)
        if entry is None:
            raise ReplayMismatch(
                f"replay: no recorded call for {request.key} in {self.source}{self._hint(request.key)}",
                key=request.key,
            )
        self._served.add(request.key)
        if entry.response is None:
            raise LLMError(f"replay: the recorded call for {request.key} failed: {entry.error}")
        return entry.response.model_copy(deep=True)

    def _hint(self, key: CallKey) -> str:
        same_node = sorted(
            k.index for k in self._entries if (k.branch, k.iteration, k.node) == (key.branch, key.iteration, key.node)
        )
        if same_node:
            return f" (recorded calls of this node: {', '.join(map(str, same_node))})"
        nodes = sorted({k.node for k in self._entries if (k.branch, k.iteration) == (key.branch, key.iteration)})
        if nodes:
            return f" (recorded nodes here: {', '.join(nodes)})"
        return " (nothing recorded for this branch and iteration)"

    async def aclose(self) -> None:
        return None
