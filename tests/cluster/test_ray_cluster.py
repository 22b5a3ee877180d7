"""GPU jobs on a Ray cluster (3 nodes x 2 logical GPUs on loopback) with FAKE tuners:
placement on every GPU, results streamed back while the job runs, a node killed mid-job,
a whole engine run, and a run resumed on a different cluster."""

from __future__ import annotations

import asyncio
import csv
import shutil
import time
from pathlib import Path

import pytest

from cacao_tui.cluster.placement import Placement, branch_of
from cacao_tui.cluster.ray_backend import RaySlots, RayTuner
from cacao_tui.engine.events import EventBus, JobPlaced, parse_event
from cacao_tui.ktt_client import TuneRequest
from cacao_tui.store.atomic import read_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import FinalResults, IterState
from cacao_tui.suite.collect import COLUMNS
from ktt.protocol import TuneSummary
from tests.cluster.fakes import QuickFakeTuner, SlowFakeTuner
from tests.cluster.suite_helpers import SHIPPED, cacao, problem_files, shipped_copies
from tests.engine.conftest import make_engine
from tests.engine.scenario import SPEC, Scenario, kernel_source
from tests.fake_tuner import FakeTuner

pytest.importorskip("ray", reason="Ray is the optional [cluster] extra")

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def problem(tmp_path: Path) -> Path:
    target = tmp_path / "mmul"
    shutil.copytree(ROOT / "problems" / "mmul", target, ignore=shutil.ignore_patterns("output", "archive"))
    (target / ".env").write_text("OPENAI_API_KEY=never-leaves-the-head\n")
    return target


def _job(problem: Path, branch: str, iteration: int, ms: float) -> TuneRequest:
    it = problem / "output" / "branches" / branch / f"iter{iteration}"
    it.mkdir(parents=True)
    (it / "kernels.cu").write_text(kernel_source(ms))
    (it / "tuning.yaml").write_text(SPEC)
    reference = problem / "output" / "reference_time.json"
    return TuneRequest(problem_dir=problem, kernel=it / "kernels.cu", spec=it / "tuning.yaml", out_dir=it / "tune",
                       device=0, duration_s=5, watchdog_s=60, reference_time=reference)  # fmt: skip


async def test_six_jobs_land_on_six_gpus_of_three_nodes(ray_cluster: object, problem: Path) -> None:
    placed: list[Placement] = []
    tuner = RayTuner(problem, on_placed=placed.append, tuner_factory=QuickFakeTuner)
    requests = [_job(problem, f"b{i}", 1, 1.0 + i) for i in range(6)]
    summaries = await asyncio.gather(*(tuner.tune(r, lambda p: None) for r in requests))
    pairs = {(p.node_id, p.gpu) for p in placed}
    assert len(placed) == 6 and len(pairs) == 6  # one job per logical GPU
    assert len({p.node_id for p in placed}) == 3
    for request, summary in zip(requests, summaries, strict=True):
        assert summary.best is not None and summary.best.time_ms == pytest.approx(
            float(request.kernel.read_text().split()[2])
        )
        # Files come back to the head; paths in them are the head's, never the node's temp dir.
        on_disk = TuneSummary.model_validate_json((request.out_dir / "summary.json").read_text())
        assert on_disk.results_file == str(request.out_dir / "results.jsonl") == summary.results_file
        assert summary.kernel_file == str(request.kernel)
        assert len((request.out_dir / "results.jsonl").read_text().splitlines()) == 4
        assert branch_of(request.kernel, problem / "output")[0] == request.kernel.parent.parent.name


async def test_results_lines_stream_back_while_the_job_runs(ray_cluster: object, problem: Path) -> None:
    request = _job(problem, "b1", 1, 1.0)
    progress: list[int] = []
    seen_mid_job: list[int] = []
    results = request.out_dir / "results.jsonl"

    def on_progress(p: object) -> None:
        progress.append(p.evaluated)  # type: ignore[attr-defined]
        if results.exists():
            seen_mid_job.append(len(results.read_text().splitlines()))

    summary = await RayTuner(problem, tuner_factory=SlowFakeTuner).tune(request, on_progress)
    assert summary.ok and progress == list(range(1, SlowFakeTuner.configs + 1))
    # Lines were on the head's disk before the job ended (streamed, not copied at the end).
    assert seen_mid_job and 0 < min(seen_mid_job) < SlowFakeTuner.configs
    assert len(results.read_text().splitlines()) == SlowFakeTuner.configs


async def test_secrets_and_run_state_stay_on_the_head(ray_cluster: object, problem: Path) -> None:
    from cacao_tui.cluster.bundle import problem_bundle

    (problem / "output" / "big.bin").parent.mkdir(parents=True, exist_ok=True)
    (problem / "output" / "big.bin").write_bytes(b"x" * 1000)
    (problem / "link.yaml").symlink_to("/etc/passwd")
    sent = problem_bundle(problem).files
    assert "problem.yaml" in sent and "inputs.yaml" in sent
    assert not [k for k in sent if k.startswith((".env", "output/")) or k == "link.yaml"]


async def test_a_node_killed_mid_job_is_retried_elsewhere_keeping_measured_lines(
    ray_cluster: object, problem: Path
) -> None:
    cluster = ray_cluster
    request = _job(problem, "b1", 1, 1.0)
    placed: list[Placement] = []
    logs: list[str] = []
    tuner = RayTuner(problem, on_placed=placed.append, on_log=logs.append, tuner_factory=SlowFakeTuner,
                     silence_timeout_s=30)  # fmt: skip
    results = request.out_dir / "results.jsonl"
    killed: list[object] = []

    def on_progress(p: object) -> None:
        if not killed and p.evaluated >= 2 and results.exists():  # type: ignore[attr-defined]
            victim = next(n for n in cluster.gpu_nodes if n.node_id == placed[-1].node_id)  # type: ignore[attr-defined]
            killed.append(victim)
            cluster.remove_node(victim, allow_graceful=False)  # type: ignore[attr-defined]

    start = time.monotonic()
    summary = await asyncio.wait_for(tuner.tune(request, on_progress), 120)
    assert killed, "the job never reported progress before the kill"
    assert summary.ok and time.monotonic() - start < 120
    assert [p.attempt for p in placed] == [1, 2]
    assert placed[1].node_id != placed[0].node_id  # the dead node takes no more work
    assert any("running it again elsewhere (attempt 2 of 3)" in line for line in logs)
    lines = results.read_text().splitlines()
    # The first attempt's measured configurations were kept; the second attempt's follow them.
    assert SlowFakeTuner.configs + 2 <= len(lines) < 2 * SlowFakeTuner.configs
    cluster.gpu_nodes.remove(killed[0])  # type: ignore[attr-defined]
    cluster.gpu_nodes.append(cluster.add_node(num_cpus=1, num_gpus=2, object_store_memory=80 * 2**20))  # type: ignore[attr-defined]


async def test_an_engine_run_on_the_cluster_and_resumed_on_another(ray_cluster: object, problem: Path) -> None:
    import ray

    from cacao_tui.engine.events import TuningFinished

    bus = EventBus()
    events: list[object] = []
    bus.subscribe(events.append)

    def placed(p: Placement) -> None:
        branch, iteration = branch_of(p.kernel, problem / "output")
        bus.emit(JobPlaced(message=p.describe(), branch=branch, iteration=iteration, job=p.job, host=p.host,
                           node_id=p.node_id, gpu=p.gpu, attempt=p.attempt))  # fmt: skip

    scenario = Scenario(strategies=["alpha", "beta"])
    logs: list[str] = []  # the cluster's own lines (a lost attempt says why), shown when an assertion fails
    tuner = RayTuner(problem, on_placed=placed, on_log=logs.append, tuner_factory=FakeTuner)
    engine = make_engine(problem, scenario.provider(), bus=bus, max_iter=3, tuner=tuner)
    engine.deps.devices = RaySlots(int(ray.cluster_resources()["GPU"]))
    stopping: list[object] = []

    def stop_after_first_tuning(event: object) -> None:  # a clean stop (Ctrl-C) once a tuning came back
        if isinstance(event, TuningFinished) and not stopping:
            stopping.append(asyncio.ensure_future(engine.stop()))

    bus.subscribe(stop_after_first_tuning)
    first = await engine.run()
    assert first.status == "interrupted"
    placements = [e for e in events if isinstance(e, JobPlaced)]
    assert all(e.node_id not in ("", "local") and e.gpu for e in placements)
    # The device table is measured once, as a GPU job on the cluster, before any branch's job.
    assert placements and placements[0].job == "device" and [e.job for e in placements].count("device") == 1
    jobs = [e for e in placements if e.job != "device"]
    assert jobs and all(e.job in ("tune", "profile") for e in jobs)
    where = [(e.branch, e.iteration, e.job, e.attempt) for e in jobs], logs
    # Each job names its branch and iteration. The stop is asked for at the first TuningFinished, when
    # no branch is past its first tuning; every branch then ends before its next step (a tuning whose
    # cancel was lost in a race runs to its end, and its branch stops there).
    assert all(e.branch in ("b1-alpha", "b2-beta") and e.iteration == 1 and e.job == "tune" for e in jobs), where
    assert all(RunLayout(problem).branch(e.branch).iteration(1).tune_dir.is_dir() for e in jobs), where  # type: ignore[arg-type]
    assert parse_event(jobs[0].model_dump_json()) == jobs[0]  # the run log reads it back
    finished = [e for e in events if isinstance(e, TuningFinished) and e.outcome.ran]
    assert finished, where
    for e in finished:  # each finished tuning's measured lines came back to the head
        lines = (RunLayout(problem).branch(e.branch).iteration(1).tune_dir / "results.jsonl").read_text().splitlines()
        attempts = sum(1 for j in jobs if j.branch == e.branch)
        # a lost attempt's measured lines are kept ahead of the next attempt's
        assert len(lines) == 4 if attempts == 1 else len(lines) >= 4, (len(lines), where)
    # The same run resumed on "another cluster": this machine, with the fake tuner.
    resumed = make_engine(problem, Scenario(strategies=["alpha", "beta"]).provider(), max_iter=3, resumed=True,
                          tuner=FakeTuner())  # fmt: skip
    assert (await resumed.run()).status == "ok"
    final = read_model(RunLayout(problem).final_results, FinalResults)
    assert final.best is not None and final.best.iteration == 3  # the fake times fall with each iteration


def test_a_dry_run_suite_of_every_shipped_problem_on_the_cluster_collects_a_table(
    ray_cluster: object, tmp_path: Path
) -> None:
    """The issue's "suite of the shipped problems to a collected table with --cluster" on CPU: every
    shipped problem (a copy) replays its recorded session; its kernels are compile-checked as Ray tasks."""
    assert {"mmul", "softmax", "stencil", "transpose", "multipass_sum"} <= set(SHIPPED)
    problems = shipped_copies(tmp_path)
    before = {p.name: problem_files(ROOT / "problems" / p.name) for p in problems}
    out = tmp_path / "results"
    address = f"ray:{ray_cluster.address}"  # type: ignore[attr-defined]
    done = cacao("suite", *map(str, problems), "--cluster", address, "--dry-run", "--provider", "replay",
                 "--output", str(out), cwd=tmp_path, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "6 at a time (cluster slot 0" in done.stdout  # the cluster's six GPUs bound the runs in flight
    starts = [line for line in done.stdout.splitlines() if ": started on " in line and "(cluster slot" in line]
    assert len(starts) == len(SHIPPED)
    for p in problems:
        started = parse_event((p / "output" / "run.jsonl").read_text().splitlines()[0])
        assert started.gpu_name == "Ray cluster: 6 GPU(s) on 4 node(s)"  # type: ignore[attr-defined]
        # Every recorded iteration wrote a kernel that compiled, in the author's check and the dry run's.
        states = [read_model(s, IterState) for s in sorted((p / "output" / "branches").glob("*/iter*/state.json"))]
        assert len(states) >= 3, p.name
        for st in states:
            assert st.author is not None and st.author.ok, (p.name, st.branch, st.index)
            assert st.run is not None and st.run.message.startswith("dry run: not run on a GPU"), st.run
            compiled, sampled = st.run.message.split("; ")[1].split()[0].split("/")
            assert compiled == sampled and int(sampled) > 0 and "check failed" not in st.run.message, st.run
        # The run wrote only what .gitignore keeps out of the checkout; the problem's own files are as shipped.
        assert problem_files(p) == before[p.name]
        shipped_entries = {rel.split("/")[0] for rel in before[p.name]}
        assert {e.name for e in p.iterdir()} - shipped_entries <= {"output", "output.lock", "inputs.hpp"}
    with (out / "summary.csv").open(newline="") as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames or ()) == COLUMNS
        rows = list(reader)
    assert [r["problem"] for r in rows] == SHIPPED  # one row per problem, in the order given
    branches = {"mmul": 5, "softmax": 2, "stencil": 2, "transpose": 2, "multipass_sum": 2}
    for r in rows:
        assert r["status"] == "ok (dry run)", r
        assert r["best speedup"] == "" and r["best ms"] == ""  # a dry run times nothing
        # A replay spends nothing: its tokens and cost are the recording's illustrative figures, marked so.
        assert 0 < float(r["run time s"]) < 600 and int(r["tokens"]) > 0 and r["cost usd"].endswith("(illustrative)")
        assert int(r["branches"]) == branches.get(r["problem"], int(r["branches"])) >= 1
    table = (out / "summary.md").read_text().splitlines()
    assert table[0] == "| " + " | ".join(COLUMNS) + " |" and len(table) == 2 + len(SHIPPED)
    assert all(f"| {name} | ok (dry run) |" in "\n".join(table) for name in SHIPPED)
    # collect alone reads the same runs into the same table
    again = cacao("collect", *map(str, problems), "--output", str(tmp_path / "again"), cwd=tmp_path, timeout=120)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "again.csv").read_text() == (out / "summary.csv").read_text()
    assert (tmp_path / "again.md").read_text() == (out / "summary.md").read_text()


async def test_a_job_that_falls_silent_is_given_up_and_run_again(ray_cluster: object, problem: Path) -> None:
    import os
    import signal

    request = _job(problem, "b1", 1, 1.0)
    placed: list[Placement] = []
    logs: list[str] = []

    def freeze_first(p: Placement) -> None:  # the first attempt's worker stops dead (no heartbeat, no exit)
        placed.append(p)
        if p.attempt == 1 and p.pid:
            os.kill(p.pid, signal.SIGSTOP)

    tuner = RayTuner(problem, on_placed=freeze_first, on_log=logs.append, tuner_factory=QuickFakeTuner,
                     silence_timeout_s=4)  # fmt: skip
    summary = await asyncio.wait_for(tuner.tune(request, lambda p: None), 90)
    assert summary.ok and [p.attempt for p in placed] == [1, 2]
    assert any("fell silent for 4 s" in line and "attempt 2 of 3" in line for line in logs)


async def test_validate_and_the_device_table_run_as_gpu_jobs_on_the_cluster(ray_cluster: object, problem: Path) -> None:
    from cacao_tui.ktt_client import ValidateRequest
    from tests.engine.fakes import FAKE_DEVICE, FakeGpuTuner

    placed: list[Placement] = []
    tuner = RayTuner(problem, on_placed=placed.append, tuner_factory=FakeGpuTuner)
    job = _job(problem, "b1", 1, 1.0)
    (job.kernel).write_text(kernel_source(1.0, "// FAKE_WRONG_AT: 3\n"))
    request = ValidateRequest(problem_dir=problem, kernel=job.kernel, spec=job.spec, out_dir=job.kernel.parent / "v",
                              device=0, config={"P": 2}, timeout_s=60)  # fmt: skip
    report = await tuner.validate(request)
    assert not report.ok and report.config == {"P": 2}
    v = report.shapes[0].validation
    assert v is not None and v.first_bad_index == 3 and v.samples[0].index == 3
    device = await tuner.describe_device(device=0)
    assert device.name == FAKE_DEVICE.name and device.sm_count == 132
    assert {p.job for p in placed} == {"validate", "device"} and all(p.gpu for p in placed)
