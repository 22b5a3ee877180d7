"""A FAKE engine for the UI tests: it implements EngineControl, records every call the app
makes, answers like the real engine would (status events), and plays a scripted event
sequence. ``write_run_files`` lays out a small but complete output/ tree (manifests,
iteration states, kernels, tuner results, NCU profiles, LLM records) as workers would.

Nothing here talks to an LLM, a GPU or the real engine. Run it directly to watch the
script in the app:  python tests/ui/scripted_engine.py /tmp/somewhere [--speed 1.0]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

from cacao_tui.engine import events as ev
from cacao_tui.engine.events import EventBus
from cacao_tui.llm.recording import CallRecord
from cacao_tui.llm.types import ChatResponse, Message, Usage
from cacao_tui.store.atomic import write_json_atomic, write_model, write_text_atomic
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import (
    BestResult,
    BranchConfig,
    BranchManifest,
    BranchSummary,
    Decision,
    FinalResults,
    IterState,
    ProfileOutcome,
    Strategy,
    TuneOutcome,
)
from ktt.protocol import ConfigResult, KernelProfile, Metric, ProfileReport, Progress, TuneSummary

T0 = 1_700_000_000.0  # every scripted timestamp is T0 + seconds, so screens are reproducible
REFERENCE_MS = 3.9

KERNEL_V1 = """#include "inputs.hpp"

extern "C" __global__ void mmul(const float* A, const float* B, float* C) {
    int row = blockIdx.y * BLOCK_Y + threadIdx.y;
    int col = blockIdx.x * BLOCK_X + threadIdx.x;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k)
        acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = acc;
}
"""

KERNEL_V2 = """#include "inputs.hpp"

extern "C" __global__ void mmul(const float* A, const float* B, float* C) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int t = 0; t < K; t += TILE) {
        As[threadIdx.y][threadIdx.x] = A[row * K + t + threadIdx.x];
        Bs[threadIdx.y][threadIdx.x] = B[(t + threadIdx.y) * N + col];
        __syncthreads();
        for (int k = 0; k < TILE; ++k)
            acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    C[row * N + col] = acc;
}
"""

KERNEL_V3 = KERNEL_V2.replace("float acc = 0.0f;", "float acc[2] = {0.0f, 0.0f};  // two outputs per thread")


def _strategy(name: str, title: str) -> Strategy:
    return Strategy(name=name, title=title, description=f"{title}: fewer global loads per flop.")


BRANCHES = {
    "tiled": (_strategy("tiled", "Shared-memory tiling"), None, 0),
    "vectorized": (_strategy("vectorized", "float4 loads"), None, 0),
    "tiled-db": (_strategy("tiled-db", "Double-buffered tiles"), "tiled", 1),
}


def _metrics(dram: float, sm: float, occupancy: float) -> list[Metric]:
    return [
        Metric(name="gpu__time_duration.sum", label="duration", section="speed_of_light", value=dram / 40, unit="ms"),
        Metric(
            name="dram__throughput.avg.pct_of_peak",
            label="DRAM throughput",
            section="speed_of_light",
            value=dram,
            unit="%",
        ),
        Metric(
            name="sm__throughput.avg.pct_of_peak", label="SM throughput", section="speed_of_light", value=sm, unit="%"
        ),
        Metric(
            name="sm__warps_active.avg.pct_of_peak",
            label="achieved occupancy",
            section="occupancy",
            value=occupancy,
            unit="%",
        ),
        Metric(name="launch__registers_per_thread", label="registers", section="launch", value=40, unit=""),
    ]


def _llm_record(node: str, index: int, prompt: str, answer: str, tool: bool = False) -> dict[str, object]:
    calls = [{"id": "t1", "name": "write_kernel", "arguments": {"path": "kernels.cu", "lines": 17}}] if tool else []
    return {
        "key": {"node": node, "index": index},
        "request": {
            "messages": [
                {"role": "system", "content": "You write fast CUDA kernels."},
                {"role": "user", "content": prompt},
            ],
            "tools": [{"name": "write_kernel"}, {"name": "check_compilation"}] if tool else [],
        },
        "response": {
            "text": answer,
            "tool_calls": calls,
            "stop_reason": "tool_use" if tool else "end",
            "usage": {"input_tokens": 1200 + index, "output_tokens": 340, "cost_usd": 0.0123},
            "model": "scripted-model",
            "latency_s": 2.5,
        },
    }


def write_run_files(layout: RunLayout) -> None:
    """The files a run of three branches would have left (tiled: 2 iterations done, 3rd running)."""
    out = layout.output
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(layout.master, {"phase": "dispatched", "analysis": "Compute-bound; reuse tiles."})
    # The master's call in the LLM layer's own record format; the branches' in an older, looser shape.
    write_model(
        layout.master_llm / "analyze_000.json",
        CallRecord(
            node="analyze",
            index=0,
            provider="replay",
            model="scripted-model",
            started_at=T0,
            latency_s=2.5,
            system="You analyze CUDA reference kernels.",
            messages=[Message(role="user", content="Analyze mmul_ref.")],
            response=ChatResponse(text="It is compute-bound.", usage=Usage(input_tokens=1200, output_tokens=340)),
            usage=Usage(input_tokens=1200, output_tokens=340, cost_usd=0.0123),
        ),
    )
    kernels = {1: KERNEL_V1, 2: KERNEL_V2, 3: KERNEL_V3}
    times = {1: 1.8, 2: 1.2}
    for name, (strategy, parent, depth) in BRANCHES.items():
        b = layout.branch(name)
        best = None
        if name == "tiled":
            best = BestResult(
                branch=name,
                iteration=2,
                time_ms=1.2,
                speedup=REFERENCE_MS / 1.2,
                config={"TILE": 16},
                kernel_path=str(b.iteration(2).kernel),
            )
        status = {"tiled": "running", "vectorized": "failed", "tiled-db": "running"}[name]
        write_model(
            b.manifest,
            BranchManifest(
                name=name,
                title=strategy.title,
                strategy=strategy,
                parent=parent,
                parent_iteration=2 if parent else None,
                depth=depth,
                status=status,
                iterations_done=2 if name == "tiled" else 0,
                best=best,
                created_at=T0,
                updated_at=T0,
            ),
        )
        write_model(b.config, BranchConfig(max_iter=5))
    tiled = layout.branch("tiled")
    for i in (1, 2, 3):
        it = tiled.iteration(i)
        write_text_atomic(it.kernel, kernels[i])
        results = []
        for j, tile in enumerate((8, 16, 32, 64)):
            status = "ok" if tile != 64 else "launch_failed"
            t = times.get(i, 1.0) * (1 + abs(tile - 16) / 32) if status == "ok" else None
            results.append(
                ConfigResult(
                    index=j,
                    config={"TILE": tile},
                    status=status,
                    time_ms=t,
                    repeats=5,
                    error=None if t else "too many threads per block",
                )
            )
        if i == 3:
            results = results[:2]
        write_text_atomic(it.tune_results, "".join(r.model_dump_json() + "\n" for r in results))
        run = None
        if i in times:
            best_r = min((r for r in results if r.time_ms), key=lambda r: r.time_ms or 0)
            write_model(
                it.tune_summary,
                TuneSummary(
                    ok=True,
                    problem="mmul",
                    kernel_file=str(it.kernel),
                    spec_file=str(it.spec),
                    space_size=4,
                    evaluated=4,
                    valid=3,
                    by_status={"ok": 3, "launch_failed": 1},
                    strategy="exhaustive",
                    seed=1,
                    best=best_r,
                    reference_ms=REFERENCE_MS,
                    speedup=REFERENCE_MS / times[i],
                    wall_s=12.0,
                    results_file=str(it.tune_results),
                ),
            )
            write_model(
                it.profile,
                ProfileReport(
                    ok=True,
                    config={"TILE": 16},
                    kernels=[
                        KernelProfile(
                            kernel="mmul",
                            launch_index=0,
                            roofline="compute-bound" if i == 2 else "memory-bound",
                            duration_ms=times[i],
                            metrics=_metrics(80.0 - 20 * i, 40.0 + 20 * i, 50.0 + 5 * i),
                        )
                    ],
                ),
            )
            run = TuneOutcome(
                ran=True,
                best_ms=times[i],
                speedup=REFERENCE_MS / times[i],
                evaluated=4,
                valid=3,
                by_status={"ok": 3, "launch_failed": 1},
                best_config={"TILE": 16},
                space_size=4,
            )
        write_model(
            it.state,
            IterState(
                branch="tiled",
                index=i,
                status="decided" if i in times else "running",
                started_at=T0,
                updated_at=T0,
                plan=f"Plan {i}",
                kernel_path=str(it.kernel),
                run=run,
                profile=ProfileOutcome(ran=True, path=str(it.profile)) if run else None,
                decision=Decision(action="continue", reason="still improving") if i in times else None,
            ),
        )
        write_json_atomic(it.llm / "plan_0.json", _llm_record("plan", 0, f"Plan iteration {i}.", f"Plan {i}: tile."))
        write_json_atomic(it.llm / "author_0.json", _llm_record("author", 0, "Write the kernel.", "", tool=True))
    v1 = layout.branch("vectorized").iteration(1)
    write_model(
        v1.state,
        IterState(
            branch="vectorized",
            index=1,
            status="failed",
            started_at=T0,
            updated_at=T0,
            error="compile check failed 3 times",
        ),
    )
    d1 = layout.branch("tiled-db").iteration(1)
    write_text_atomic(d1.kernel, KERNEL_V3.replace("TILE]", "TILE + 1]"))
    write_model(d1.state, IterState(branch="tiled-db", index=1, status="implementing", started_at=T0, updated_at=T0))


def write_final_results(layout: RunLayout) -> None:
    write_model(
        layout.final_results,
        FinalResults(
            problem_name="mmul",
            finished_at=T0 + 600,
            reference_ms=REFERENCE_MS,
            reference_source="measured",
            best=BestResult(
                branch="tiled",
                iteration=2,
                time_ms=1.2,
                speedup=REFERENCE_MS / 1.2,
                config={"TILE": 16},
                kernel_path=str(layout.branch("tiled").iteration(2).kernel),
            ),
            branches=[
                BranchSummary(
                    name="tiled",
                    title="Shared-memory tiling",
                    status="done",
                    iterations=3,
                    best_ms=1.2,
                    speedup=REFERENCE_MS / 1.2,
                    best_iteration=2,
                    stop_reason="max_iter",
                ),
                BranchSummary(
                    name="vectorized",
                    title="float4 loads",
                    status="failed",
                    iterations=1,
                    stop_reason="compile check failed",
                ),
                BranchSummary(
                    name="tiled-db",
                    title="Double-buffered tiles",
                    parent="tiled",
                    depth=1,
                    status="stopped",
                    iterations=1,
                    stop_reason="user stop",
                ),
            ],
            tokens={"input": 20_000, "output": 5_000},
            cost_usd=0.42,
        ),
    )


def run_started(layout: RunLayout) -> ev.RunStarted:
    return ev.RunStarted(
        ts=T0,
        problem="mmul",
        problem_dir=str(layout.problem_dir),
        provider="replay",
        model="scripted-model",
        gpus=[0],
        gpu_name="H200",
        max_iter=5,
        max_depth=2,
        n_strategies=2,
    )


def script(layout: RunLayout) -> list[ev._Event]:
    """The events of the run that write_run_files left on disk, in order."""
    t = iter(range(1, 10_000))

    def at() -> float:
        return T0 + next(t)

    tiled_kernel = str(layout.branch("tiled").iteration(3).kernel)
    events: list[ev._Event] = [
        ev.MasterPhase(ts=at(), phase="analyzing"),
        ev.LLMCallEvent(
            ts=at(),
            call=CallRecord(
                node="analyze",
                index=0,
                provider="scripted",
                model="scripted",
                latency_s=2.5,
                usage=Usage(input_tokens=1200, output_tokens=340, cost_usd=0.0123),
            ),
            run=Usage(input_tokens=1200, output_tokens=340, cost_usd=0.0123),
        ),
        ev.MasterPhase(ts=at(), phase="strategizing"),
        ev.MasterPhase(ts=at(), phase="dispatched", message="2 strategies"),
    ]
    for name in ("tiled", "vectorized"):
        s = BRANCHES[name][0]
        events.append(ev.BranchAdded(ts=at(), branch=name, title=s.title, description=s.description, max_iter=5))
        events.append(ev.BranchStatusChanged(ts=at(), branch=name, status="running", iteration=1, max_iter=5))
    for i, ms in ((1, 1.8), (2, 1.2)):
        for status in ("planning", "implementing", "running"):
            events.append(ev.IterationStatusChanged(ts=at(), branch="tiled", iteration=i, status=status))
            events.append(ev.LogLine(ts=at(), message=f"iteration {i}: {status}", branch="tiled", iteration=i))
        events.append(
            ev.TuningProgress(
                ts=at(),
                branch="tiled",
                iteration=i,
                progress=Progress(
                    evaluated=2, valid=2, space_size=4, best_ms=ms, best_config={"TILE": 16}, elapsed_s=6, budget_s=20
                ),
            )
        )
        events.append(
            ev.TuningFinished(
                ts=at(),
                branch="tiled",
                iteration=i,
                outcome=TuneOutcome(
                    ran=True,
                    best_ms=ms,
                    speedup=REFERENCE_MS / ms,
                    evaluated=4,
                    valid=3,
                    by_status={"ok": 3, "launch_failed": 1},
                    best_config={"TILE": 16},
                ),
            )
        )
        events.append(
            ev.NewBest(ts=at(), branch="tiled", iteration=i, time_ms=ms, speedup=REFERENCE_MS / ms, run_best=True)
        )
        profile = ProfileOutcome(ran=True, roofline="compute-bound")
        events.append(ev.ProfileMetrics(ts=at(), branch="tiled", iteration=i, outcome=profile))
        events.append(ev.IterationStatusChanged(ts=at(), branch="tiled", iteration=i, status="decided"))
        events.append(ev.DecisionMade(ts=at(), branch="tiled", iteration=i, action="continue", reason="improving"))
        events.append(
            ev.BranchStatusChanged(
                ts=at(), branch="tiled", status="running", iteration=i + 1, iterations_done=i, max_iter=5
            )
        )
    events += [
        ev.IterationStatusChanged(ts=at(), branch="vectorized", iteration=1, status="implementing"),
        ev.LogLine(
            ts=at(),
            level="warning",
            message="compile check failed: no member x in float4",
            branch="vectorized",
            iteration=1,
        ),
        ev.LogLine(
            ts=at(),
            level="error",
            message="authoring gave up after 3 compile failures",
            branch="vectorized",
            iteration=1,
        ),
        ev.IterationStatusChanged(ts=at(), branch="vectorized", iteration=1, status="failed"),
        ev.BranchStatusChanged(
            ts=at(), branch="vectorized", status="failed", max_iter=5, reason="compile check failed 3 times"
        ),
        ev.DecisionMade(
            ts=at(), branch="tiled", iteration=2, action="branch", reason="try double buffering", children=["tiled-db"]
        ),
        ev.BranchAdded(
            ts=at(),
            branch="tiled-db",
            title="Double-buffered tiles",
            description="overlap loads",
            parent="tiled",
            depth=1,
            max_iter=5,
        ),
        ev.BranchStatusChanged(ts=at(), branch="tiled-db", status="running", iteration=1, max_iter=5),
        ev.IterationStatusChanged(ts=at(), branch="tiled-db", iteration=1, status="implementing"),
        ev.IterationStatusChanged(ts=at(), branch="tiled", iteration=3, status="running"),
        ev.KernelWritten(ts=at(), branch="tiled", iteration=3, kernel_path=tiled_kernel),
        ev.TuningProgress(
            ts=at(),
            branch="tiled",
            iteration=3,
            progress=Progress(
                evaluated=2,
                valid=2,
                space_size=4,
                best_ms=1.0,
                best_config={"TILE": 16},
                by_status={"ok": 2},
                elapsed_s=8,
                budget_s=20,
            ),
        ),
        ev.LLMCallEvent(
            ts=at(),
            call=CallRecord(
                branch="tiled",
                iteration=3,
                node="author",
                index=0,
                provider="scripted",
                model="scripted",
                latency_s=9.1,
                usage=Usage(input_tokens=5000, output_tokens=900, cost_usd=0.05),
            ),
            run=Usage(input_tokens=20_000, output_tokens=5_000, cost_usd=0.42),
        ),
        ev.LogLine(ts=at(), message="tuning: 2/4 configurations, best 1.00 ms", branch="tiled", iteration=3),
    ]
    return events


class FakeScriptedEngine:
    """FAKE EngineControl for tests: records calls, emits what a real engine would in answer."""

    def __init__(self, layout: RunLayout, bus: EventBus) -> None:
        self.layout = layout
        self.bus = bus
        self.calls: list[tuple[object, ...]] = []
        self.running = True
        self.stopped = False
        self.status: dict[str, str] = {}
        self.max_iter: dict[str, int] = {}
        self.done: dict[str, int] = {}
        self.stop_delay_s = 0.0
        bus.subscribe(self._track)

    def _track(self, e: object) -> None:
        if isinstance(e, ev.BranchAdded):
            self.status[e.branch], self.max_iter[e.branch], self.done[e.branch] = e.status, e.max_iter, 0
        elif isinstance(e, ev.BranchStatusChanged):
            self.status[e.branch], self.max_iter[e.branch], self.done[e.branch] = (
                e.status,
                e.max_iter,
                e.iterations_done,
            )
        elif isinstance(e, ev.RunFinished):
            self.running = False

    def _set(self, name: str, status: str, reason: str | None = None) -> None:
        self.bus.emit(
            ev.BranchStatusChanged(
                ts=T0 + 900,
                branch=name,
                status=status,
                max_iter=self.max_iter[name],
                iterations_done=self.done[name],
                reason=reason,
            )
        )

    def _known(self, name: str) -> None:
        if name not in self.status:
            raise KeyError(f"no branch {name}")

    # ---- EngineControl ---------------------------------------------------------------
    def pause_branch(self, name: str) -> None:
        self.calls.append(("pause_branch", name))
        self._known(name)
        if self.status[name] == "running":
            self._set(name, "paused")

    def resume_branch(self, name: str) -> None:
        self.calls.append(("resume_branch", name))
        self._known(name)
        if self.status[name] == "paused":
            self._set(name, "running")

    def toggle_pause(self, name: str) -> bool:
        self.calls.append(("toggle_pause", name))
        self._known(name)
        if self.status[name] == "paused":
            self._set(name, "running")
            return False
        if self.status[name] in ("done", "stopped", "killed", "failed"):
            raise ValueError(f"{name} is {self.status[name]}")
        self._set(name, "paused")
        return True

    def pause_all(self) -> None:
        self.calls.append(("pause_all",))
        for name, status in list(self.status.items()):
            if status in ("running", "pending"):
                self._set(name, "paused")

    def resume_all(self) -> None:
        self.calls.append(("resume_all",))
        for name, status in list(self.status.items()):
            if status == "paused":
                self._set(name, "running")

    def kill_branch(self, name: str) -> None:
        self.calls.append(("kill_branch", name))
        self._known(name)
        self._set(name, "killed", "killed by the user")

    def change_max_iter(self, name: str, delta: int) -> int:
        self.calls.append(("change_max_iter", name, delta))
        self._known(name)
        self.max_iter[name] = max(1, self.done[name], self.max_iter[name] + delta)
        return self.max_iter[name]

    def retry_branch(self, name: str) -> None:
        self.calls.append(("retry_branch", name))
        self._known(name)
        if self.status[name] not in ("failed", "stopped"):
            raise ValueError(f"{name} is {self.status[name]}; only failed or stopped branches retry")
        self._set(name, "running", "retry")

    # ---- steering: the real engine writes the branch's inbox; this fake only answers --------
    def send_message(self, name: str, text: str) -> str:
        self.calls.append(("send_message", name, text))
        self._known(name)
        self.bus.emit(ev.LogLine(ts=T0 + 900, message=f"message from the user: {text}", branch=name))
        return f"{name}: message queued; it reaches its next prompts"

    def revert_branch(self, name: str, iteration: int) -> str:
        self.calls.append(("revert_branch", name, iteration))
        self._known(name)
        if iteration < 1 or iteration > self.done[name]:
            from cacao_tui.engine.control import SteeringError

            raise SteeringError(f"{name}: cannot revert: iteration {iteration} has no decided kernel")
        return f"{name}: revert to iteration {iteration} queued"

    def change_decision(self, name: str, action: str) -> str:
        self.calls.append(("change_decision", name, action))
        self._known(name)
        return f"{name}: decision '{action}' queued"

    def delete_branch(self, name: str) -> str:
        self.calls.append(("delete_branch", name))
        self._known(name)
        self.status.pop(name, None)
        self.bus.emit(ev.BranchRemoved(ts=T0 + 900, branch=name, trash=str(self.layout.output / "trash" / name)))
        return f"{name}: delete queued"

    def is_running(self) -> bool:
        return self.running

    async def stop(self) -> None:
        self.calls.append(("stop",))
        await asyncio.sleep(self.stop_delay_s)
        for name, status in list(self.status.items()):
            if status in ("running", "paused", "pending"):
                self._set(name, "stopped", "stopped by the user")
        self.running = False
        self.stopped = True
        self.bus.emit(
            ev.RunFinished(
                ts=T0 + 901, status="interrupted", best_ms=1.2, speedup=REFERENCE_MS / 1.2, best_branch="tiled"
            )
        )

    # ---- the script ----------------------------------------------------------------------
    def play(self, events: list[ev._Event] | None = None) -> None:
        for e in script(self.layout) if events is None else events:
            self.bus.emit(e)

    async def play_slowly(self, delay_s: float, events: list[ev._Event] | None = None) -> None:
        for e in script(self.layout) if events is None else events:
            self.bus.emit(e)
            await asyncio.sleep(delay_s)

    def finish(self) -> None:
        self.bus.emit(
            ev.RunFinished(ts=T0 + 950, status="ok", best_ms=1.2, speedup=REFERENCE_MS / 1.2, best_branch="tiled")
        )


def make_run(root: Path) -> tuple[RunLayout, EventBus, FakeScriptedEngine]:
    layout = RunLayout(root / "mmul")
    write_run_files(layout)
    bus = EventBus()
    return layout, bus, FakeScriptedEngine(layout, bus)


async def _demo(root: Path, speed: float, keep_running: bool) -> str | None:
    from cacao_tui.ui.app import CacaoApp

    layout, bus, engine = make_run(root)
    began = time.time()
    app = CacaoApp(engine=engine, bus=bus, run_info=run_started(layout), clock=lambda: T0 + time.time() - began)

    async def feed() -> None:
        await asyncio.sleep(0.5)
        await engine.play_slowly(0.05 / max(speed, 0.01))
        n = 0
        while keep_running:  # a steady trickle so the screen keeps moving
            n += 1
            bus.emit(ev.LogLine(message=f"tuning heartbeat {n}", branch="tiled", iteration=3))
            await asyncio.sleep(0.2)

    task = asyncio.create_task(feed())
    result = await app.run_async()
    task.cancel()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description="Run the app against the FAKE scripted engine.")
    parser.add_argument("root", type=Path)
    parser.add_argument("--speed", type=float, default=1.0)
    parser.add_argument("--result-file", type=Path)
    parser.add_argument("--finish", action="store_true", help="stop the trickle after the script")
    args = parser.parse_args()
    result = asyncio.run(_demo(args.root, args.speed, not args.finish))
    if args.result_file:
        args.result_file.write_text(json.dumps({"result": result}))
    print(f"app result: {result}", file=sys.stderr)


if __name__ == "__main__":
    main()
