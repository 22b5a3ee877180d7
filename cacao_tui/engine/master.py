"""The master: analyze -> strategize -> dispatch, each phase saved in master.json.

On --resume a finished phase is not repeated: the analysis and the strategies are read
back, and dispatch only creates the branches that do not exist yet.
"""

from __future__ import annotations

import time
from typing import Protocol

from cacao_tui.engine.events import EventBus, MasterPhase
from cacao_tui.llm import ReplyUnusable
from cacao_tui.nodes.analyze import analyze
from cacao_tui.nodes.context import RunDeps
from cacao_tui.nodes.strategize import strategize
from cacao_tui.store.atomic import read_model_or_none, write_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.original_files import OriginalStrategy, write_analysis, write_strategies
from cacao_tui.store.phases import WaitsForPhase
from cacao_tui.store.state import BranchManifest, MasterState, Strategy


class MasterHost(Protocol):
    """What the master needs from the engine that runs it (the engine imports this module, not
    the other way round)."""

    deps: RunDeps
    bus: EventBus
    layout: RunLayout

    def create_branch(self, name: str, strategy: Strategy, *, parent: BranchManifest | None) -> str | None: ...


def original_strategy(s: Strategy) -> OriginalStrategy:
    """A strategy in the original's strategies.json: our one-line title is its hypothesis."""
    return OriginalStrategy(name=s.name, description=s.description, hypothesis=s.title)


class Master:
    def __init__(self, engine: MasterHost) -> None:
        self.engine = engine
        self.path = engine.layout.master

    def _save(self, ms: MasterState, phase: str | None = None, message: str | None = None) -> None:
        if phase is not None:
            ms.phase = phase  # type: ignore[assignment]
        ms.updated_at = time.time()
        write_model(self.path, ms)
        if phase is not None:
            self.engine.bus.emit(MasterPhase(phase=phase, message=message))

    async def prepare(self) -> list[str]:
        """Run the master's phases that are not done yet; return the root branch names."""
        deps = self.engine.deps
        if deps.device is None:
            deps.device = await self.engine.device_table()  # in every prompt: before the first one
        ms = read_model_or_none(self.path, MasterState) or MasterState()
        if deps.phase == "gpu" and (ms.analysis is None or not ms.strategies):
            raise WaitsForPhase("llm")  # analyze and strategize are the model's (--phase)
        if ms.analysis is None:
            self._save(ms, "analyzing")
            try:
                ms.analysis = await analyze(deps)
            except ReplyUnusable as exc:  # a refusal or an empty reply, twice: strategize without it
                ms.analysis = f"(no analysis: {exc.reason})"
                self._fallback(ms, f"analyze: {exc}; strategizing without an analysis")
            self._save(ms)
            write_analysis(self.engine.layout.output, ms.analysis)  # the original's analysis.md
        deps.analysis = ms.analysis
        if not ms.strategies:
            self._save(ms, "strategizing")
            found = await strategize(deps, ms.analysis, deps.settings.n_strategies)
            ms.strategies = found.strategies
            if found.fallback:
                self._fallback(ms, f"strategize: {found.fallback}")
            if not ms.strategies:
                ms.error = "the model proposed no strategies"
                self._save(ms, "failed", ms.error)
                raise RuntimeError(ms.error)
            self._save(ms)
            write_strategies(self.engine.layout.output, [original_strategy(s) for s in ms.strategies])
        names = []
        for i, strategy in enumerate(ms.strategies, start=1):
            name = self.engine.create_branch(f"b{i}-{strategy.name}", strategy, parent=None)
            if name is not None:  # None: the user deleted it
                names.append(name)
        if ms.phase != "dispatched":
            self._save(ms, "dispatched", f"{len(names)} branches")
        return names

    def _fallback(self, ms: MasterState, note: str) -> None:
        ms.fallbacks.append(note)
        self.engine.bus.log(f"master: {note}", level="warning")

    def finish(self, ok: bool, message: str | None = None) -> None:
        ms = read_model_or_none(self.path, MasterState) or MasterState()
        ms.error = None if ok else message
        self._save(ms, "finished" if ok else "failed", message)
