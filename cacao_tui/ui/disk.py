"""Read-only loading of what the details panes show, from a run's files.

Everything here runs in a worker thread (``asyncio.to_thread``) and never raises for a
missing, half-written or unexpected file: a pane shows what it can and says what is absent.
The app never writes a file; changes go through EngineControl. What the loaders return is
terminal-safe (``safe_value``): names, states, kernels, replies and metrics come from files
that the model and the problem wrote, and an escape sequence in them must not reach the
terminal raw.
"""

from __future__ import annotations

import heapq
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from cacao_tui.engine import events as ev
from cacao_tui.store.atomic import MAX_STATE_BYTES, StateFileError, read_model
from cacao_tui.store.layout import BranchLayout, IterLayout, RunLayout, is_branch_name
from cacao_tui.store.state import BranchConfig, BranchManifest, Context, IterState
from cacao_tui.ui.formatting import safe_block, safe_event, safe_value
from cacao_tui.ui.run_view import RunView, Selection
from ktt.capped_read import iter_lines_capped, parse_json, read_bytes_capped, read_head
from ktt.checked_numbers import MAX_MS, within
from ktt.protocol import ConfigResult, ProfileReport, TuneSummary

M = TypeVar("M", bound=BaseModel)
TOP_CONFIGS = 10
MAX_SOURCE_BYTES = 512 * 1024
MAX_RESULT_BYTES = 32 * 1024 * 1024  # a tuning's results.jsonl read for the panes


def read_quietly(path: Path, model: type[M]) -> M | None:
    try:  # read_model: a regular file, not a link, capped, opened without blocking
        return read_model(path, model) if path.exists() else None
    except (StateFileError, OSError):
        return None


def best_floor_ms(layout: RunLayout, best: object) -> float | None:
    """The physical floor's time (tune/summary.json's floor) of the run's best iteration, or None."""
    branch, iteration = getattr(best, "branch", None), getattr(best, "iteration", None)
    if not is_branch_name(branch) or not isinstance(iteration, int):
        return None
    summary = read_quietly(layout.branch(branch).iteration(iteration).tune_summary, TuneSummary)
    return summary.floor.floor_ms if summary is not None and summary.floor is not None else None


def read_text_quietly(path: Path, limit: int = MAX_SOURCE_BYTES) -> str | None:
    try:  # the head of a regular file (not a FIFO, a link or /dev/zero), whatever its size
        data, cut = read_head(path, limit)
    except OSError:
        return None
    text = safe_block(data.decode("utf-8", errors="replace"))
    return text + "\n/* … cut at 512 KiB … */\n" if cut else text


def read_json_quietly(path: Path, limit: int = MAX_STATE_BYTES) -> Any:
    """A JSON file of a run (a call record, master.json) as parsed data, or None when it cannot be read."""
    try:
        return parse_json(read_bytes_capped(path, limit, follow_links=False))
    except (OSError, ValueError):
        return None


# ---- branches -----------------------------------------------------------------
@dataclass
class BranchFiles:
    name: str
    manifest: BranchManifest | None = None
    config: BranchConfig | None = None
    states: list[IterState] = field(default_factory=list)


def read_branch_files(layout: RunLayout, name: str) -> BranchFiles:
    branch = layout.branch(name)
    files = BranchFiles(name, read_quietly(branch.manifest, BranchManifest), read_quietly(branch.config, BranchConfig))
    for index in branch.iteration_indices():
        state = read_quietly(branch.iteration(index).state, IterState)
        if state is not None:
            files.states.append(state)
    return safe_value(files)


def read_run_started(layout: RunLayout) -> ev.RunStarted | None:
    """What RunStarted would have said, from context.json (for an app that subscribed late)."""
    ctx = read_quietly(layout.context, Context)
    if ctx is None:
        return None
    s = ctx.settings
    return safe_event(ev.RunStarted(
        ts=ctx.created_at, problem=ctx.problem_name, problem_dir=str(layout.problem_dir), provider=s.provider,
        model=s.model, gpus=ctx.gpu.indices, gpu_name=ctx.gpu.name, arch=ctx.gpu.arch, dry_run=s.dry_run,
        max_iter=s.max_iter, max_depth=s.max_depth, n_strategies=s.n_strategies, path_budget=s.path_budget or None,
    ))  # fmt: skip


def read_all_branches(layout: RunLayout) -> list[BranchFiles]:
    return [read_branch_files(layout, name) for name in layout.branch_names()]


def seed_from_disk(view: RunView, branches: list[BranchFiles]) -> None:
    """Fill the view from branch files read earlier (in a worker thread) by read_all_branches."""
    for files in sorted(branches, key=lambda f: f.manifest.created_at if f.manifest else 0.0):
        if files.manifest is not None:
            view.seed_branch(files.manifest, files.config, files.states)


# ---- LLM call records -----------------------------------------------------------
@dataclass
class LLMCallView:
    """One recorded LLM call, read tolerantly (the record format belongs to cacao_tui.llm)."""

    path: Path
    node: str
    index: int
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    model: str = ""
    provider: str = ""  # "replay": its tokens and cost are the recording's (illustrative)
    error: str | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    response_text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    stop_reason: str | None = None
    started_at: float = 0.0
    retries: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    reasoning: str = ""  # the model's thinking, as recorded
    reasoning_effort: str | None = None
    notes: list[str] = field(default_factory=list)  # what the LLM layer did (a shrunk context, a repair, ...)

    @property
    def key(self) -> str:
        return self.path.name


def _dig(data: dict[str, Any], *paths: str) -> Any:
    for path in paths:
        node: Any = data
        for part in path.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node not in (None, "", [], {}):
            return node
    return None


def _from_call_record(path: Path, data: dict[str, Any]) -> LLMCallView | None:
    """The LLM layer's own record model (cacao_tui.llm.recording.CallRecord), when it validates."""
    from cacao_tui.llm.recording import CallRecord

    try:
        record = CallRecord.model_validate(data)
    except ValueError:
        return None
    messages = [m.model_dump(exclude_none=True, exclude={"provider_data"}) for m in record.messages]
    if record.system:
        messages.insert(0, {"role": "system", "content": record.system})
    response = record.response
    return LLMCallView(
        path=path,
        node=record.node,
        index=record.index,
        input_tokens=record.usage.input_tokens,
        output_tokens=record.usage.output_tokens,
        cost_usd=record.usage.cost_usd,
        latency_s=record.latency_s,
        model=record.model,
        provider=record.provider,
        error=record.error,
        messages=messages,
        tools=[t.name for t in record.tools],
        response_text=response.text if response else "",
        tool_calls=[tc.model_dump(exclude_none=True) for tc in response.tool_calls] if response else [],
        stop_reason=response.stop_reason if response else None,
        started_at=record.started_at,
        retries=record.retries,
        cached_tokens=record.usage.cached_tokens,
        reasoning_tokens=record.usage.reasoning_tokens,
        reasoning=response.reasoning if response else "",
        reasoning_effort=record.reasoning_effort,
        notes=list(record.notes),
    )


def parse_llm_record(path: Path, data: dict[str, Any]) -> LLMCallView:
    known = _from_call_record(path, data)
    if known is not None:
        return known
    try:
        return _loose_record(path, data)
    except (ValueError, TypeError, AttributeError, OverflowError, RecursionError):  # fields of any type
        return LLMCallView(path=path, node=path.stem, index=0, error="an LLM call record this version cannot read")


def _loose_record(path: Path, data: dict[str, Any]) -> LLMCallView:
    """A record of another shape (an older format), read field by field."""
    stem_node, _, stem_index = path.stem.rpartition("_")
    node = _dig(data, "node", "key.node", "context.node") or stem_node or path.stem
    index = _dig(data, "index", "key.index")
    if index is None:
        index = int(stem_index) if stem_index.isdigit() else 0
    usage = _dig(data, "usage", "response.usage") or {}
    response = data.get("response") if isinstance(data.get("response"), dict) else {}
    text = _dig(data, "response.text", "response_text", "text") or ""
    if isinstance(data.get("response"), str):
        text = data["response"]
    tools = _dig(data, "tools", "request.tools") or []
    error = _dig(data, "error", "response.error")
    return LLMCallView(
        path=path,
        node=str(node),
        index=int(index),
        input_tokens=int(usage.get("input_tokens", 0) or _dig(data, "input_tokens") or 0),
        output_tokens=int(usage.get("output_tokens", 0) or _dig(data, "output_tokens") or 0),
        cost_usd=float(usage.get("cost_usd", 0.0) or _dig(data, "cost_usd") or 0.0),
        latency_s=float(_dig(data, "latency_s", "response.latency_s") or 0.0),
        model=str(_dig(data, "model", "response.model", "request.model") or ""),
        error=error if isinstance(error, str) else (json.dumps(error) if error else None),
        messages=[m for m in (_dig(data, "messages", "request.messages") or []) if isinstance(m, dict)],
        tools=[t.get("name", "?") if isinstance(t, dict) else str(t) for t in tools],
        response_text=str(text),
        tool_calls=[t for t in (_dig(data, "tool_calls", "response.tool_calls") or []) if isinstance(t, dict)],
        stop_reason=response.get("stop_reason") if isinstance(response, dict) else None,
        started_at=float(_dig(data, "started_at") or path_mtime(path)),
    )


def read_llm_calls(directory: Path) -> list[LLMCallView]:
    if not directory.is_dir():
        return []
    calls = []
    for path in sorted(directory.glob("*.json")):
        data = read_json_quietly(path)
        if isinstance(data, dict):
            calls.append(parse_llm_record(path, data))
    calls.sort(key=lambda c: (c.started_at, c.node, c.index))
    return calls


def path_mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


# ---- one iteration -------------------------------------------------------------
@dataclass
class TuningView:
    summary: TuneSummary | None = None
    top: list[ConfigResult] = field(default_factory=list)
    evaluated: int = 0
    valid: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    failures: list[ConfigResult] = field(default_factory=list)  # the last few, with their errors
    top_case: str | None = None  # with several cases: the case ``top`` ranks (the primary)


def read_tuning(it: IterLayout) -> TuningView:
    view = TuningView(summary=read_quietly(it.tune_summary, TuneSummary))
    try:
        lines = list(iter_lines_capped(it.tune_results, MAX_RESULT_BYTES))
    except OSError:
        lines = []
    ok: list[ConfigResult] = []
    for line in lines:
        try:
            result = ConfigResult.model_validate_json(line)
        except ValueError:
            continue  # a line being written
        view.evaluated += 1
        view.by_status[result.status] = view.by_status.get(result.status, 0) + 1
        if result.status == "ok" and within(result.time_ms, 0.0, MAX_MS) is not None:  # -5 or 1e400 ms: no time
            ok.append(result)
        elif result.status != "ok":
            view.failures.append(result)
    view.valid = view.by_status.get("ok", 0)
    if len({r.shape for r in ok}) > 1:  # several cases: times of different shapes do not rank together
        summary_cases = view.summary.cases if view.summary is not None else []
        view.top_case = summary_cases[0].name if summary_cases else ok[0].shape  # cases run primary first
        ok = [r for r in ok if r.shape == view.top_case]
    view.top = heapq.nsmallest(TOP_CONFIGS, ok, key=lambda r: r.time_ms or 0.0)
    view.failures = view.failures[-5:]
    if view.summary is not None and view.evaluated == 0:
        view.evaluated, view.valid = view.summary.evaluated, view.summary.valid
        view.by_status = dict(view.summary.by_status)
        if view.summary.best is not None:
            view.top = [view.summary.best]
    return view


@dataclass
class IterationDetails:
    branch: str
    index: int
    state: IterState | None = None
    kernel: str | None = None
    base_kernel: str | None = None  # what the diff compares against
    base_label: str | None = None
    tuning: TuningView = field(default_factory=TuningView)
    profile: ProfileReport | None = None
    prev_profile: ProfileReport | None = None
    prev_label: str | None = None


def _previous_with(branch: BranchLayout, index: int, path_of: str) -> tuple[int, Path] | None:
    for i in sorted((i for i in branch.iteration_indices() if i < index), reverse=True):
        path = getattr(branch.iteration(i), path_of)
        if path.exists():
            return i, path
    return None


def _parent_kernel(layout: RunLayout, manifest: BranchManifest | None) -> tuple[str, str] | None:
    if manifest is None or manifest.parent is None:
        return None
    parent = layout.branch(manifest.parent)
    order = parent.iteration_indices()
    if manifest.parent_iteration is not None:
        order = [manifest.parent_iteration] + [i for i in reversed(order) if i != manifest.parent_iteration]
    else:
        order = list(reversed(order))
    for i in order:
        text = read_text_quietly(parent.iteration(i).kernel)
        if text is not None:
            return text, f"parent {manifest.parent}/iter{i}"
    return None


def read_iteration(
    layout: RunLayout, branch_name: str, index: int, manifest: BranchManifest | None
) -> IterationDetails:
    branch = layout.branch(branch_name)
    it = branch.iteration(index)
    details = IterationDetails(branch_name, index, state=read_quietly(it.state, IterState))
    details.kernel = read_text_quietly(it.kernel)
    prev = _previous_with(branch, index, "kernel")
    if prev is not None:
        details.base_kernel, details.base_label = read_text_quietly(prev[1]), f"iter{prev[0]}"
    else:
        parent = _parent_kernel(layout, manifest)
        if parent is not None:
            details.base_kernel, details.base_label = parent
    details.tuning = read_tuning(it)
    details.profile = read_quietly(it.profile, ProfileReport)
    prev_profile = _previous_with(branch, index, "profile")
    if prev_profile is not None:
        details.prev_profile, details.prev_label = (
            read_quietly(prev_profile[1], ProfileReport),
            f"iter{prev_profile[0]}",
        )
    return details


# ---- what a selection shows ------------------------------------------------------
@dataclass
class SelectionDetails:
    selection: Selection
    branch: BranchFiles | None = None
    iteration: IterationDetails | None = None  # the selected one, or the branch's latest
    llm_calls: list[LLMCallView] = field(default_factory=list)
    analysis: str | None = None  # the master's analysis, when the run is selected


def load_selection(layout: RunLayout, selection: Selection) -> SelectionDetails:
    return safe_value(_load_selection(layout, selection))


def _load_selection(layout: RunLayout, selection: Selection) -> SelectionDetails:
    details = SelectionDetails(selection)
    if selection.branch is not None and not is_branch_name(selection.branch):
        return details  # a name from a run's log that no branch directory can have: nothing to read
    if selection.branch is None:
        details.llm_calls = read_llm_calls(layout.master_llm)
        master = read_json_quietly(layout.master)
        details.analysis = master.get("analysis") if isinstance(master, dict) else None
        return details
    details.branch = read_branch_files(layout, selection.branch)
    index = selection.iteration
    if index is None:
        indices = layout.branch(selection.branch).iteration_indices()
        index = indices[-1] if indices else None
    if index is not None:
        details.iteration = read_iteration(layout, selection.branch, index, details.branch.manifest)
        details.llm_calls = read_llm_calls(layout.branch(selection.branch).iteration(index).llm)
    return details


def read_llm_call(path: Path) -> LLMCallView | None:
    data = read_json_quietly(path)
    return safe_value(parse_llm_record(path, data)) if isinstance(data, dict) else None
