"""The JSON-lines run log (output/run.jsonl): one subscriber of the event stream."""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO

from cacao_tui.engine.events import LLMCallEvent, LLMCallProgress, TuningProgress, _Event
from cacao_tui.llm.redaction import redact_data

PROGRESS_EVERY_S = 5.0


class RunLog:
    """Appends every event as one JSON line (secrets redacted); tuning progress is thinned to
    one line per 5 s per branch, and a streaming LLM reply is left out (its call is logged
    when it ends; a wait before a retry is logged)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._file: IO[str] | None = path.open("a", encoding="utf-8")
        self._last_progress: dict[tuple[str, int], float] = {}

    def __call__(self, event: _Event) -> None:
        if self._file is None:
            return
        if isinstance(event, LLMCallProgress) and event.progress.phase == "streaming":
            return
        if isinstance(event, TuningProgress):
            key = (event.branch, event.iteration)
            if event.ts - self._last_progress.get(key, 0.0) < PROGRESS_EVERY_S:
                return
            self._last_progress[key] = event.ts
        # Secrets are redacted in every line, whatever part of the engine put them in a message.
        line = json.dumps(redact_data(event.model_dump(mode="json")), ensure_ascii=False, separators=(",", ":"))
        self._file.write(line + "\n")
        if not isinstance(event, (TuningProgress, LLMCallEvent)):
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
