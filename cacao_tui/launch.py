"""The composition root: from a ``RunRequest`` to a running engine, with the Textual app or headless.

The CLI validates the flags, loads the problem and hands over a typed request; this
module picks the provider and GPUs (or a cluster), prepares output/ (archiving an earlier
run), builds the LLM client, the tuner and the engine, wires the engine's subscribers and
runs it until it finishes, the user stops it (Ctrl-C: clean stop, twice: abort), or the
app detaches and the run goes on headless. It is the one module that knows every layer.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from cacao_tui.cluster.placement import PlacedTuner, Placement, branch_of
from cacao_tui.cluster.spec import ClusterError, parse_cluster
from cacao_tui.engine.engine import Engine
from cacao_tui.engine.events import EventBus, JobPlaced, LLMCallEvent, LLMCallProgress, RunFinished
from cacao_tui.engine.gpu import arch_of, detect_gpus, gpu_problem
from cacao_tui.engine.original_files import OriginalFiles
from cacao_tui.engine.scheduler import GpuScheduler
from cacao_tui.headless import HeadlessRenderer
from cacao_tui.launch_phases import (
    engine_phase,
    gpu_phase_choice,
    gpu_phase_llm,
    gpu_submitter,
    gpu_without_device,
    needs_no_gpu,
    with_run_settings,
)
from cacao_tui.llm import LLMError, create_llm, llm_environment, llm_timeout_s, load_llm_settings, select_provider
from cacao_tui.llm.recording import CallRecord
from cacao_tui.llm.selection import ProviderChoice
from cacao_tui.llm.tracked import RetryNotice, TrackedLLM
from cacao_tui.nodes.context import NoDevices, RunDeps
from cacao_tui.resume_provider import check_resume_provider
from cacao_tui.run_request import RunRequest
from cacao_tui.settings import DEFAULTS
from cacao_tui.store.archive import ArchiveError, prepare_output
from cacao_tui.store.atomic import (
    DiskFull,
    StateFileError,
    disk_full,
    on_disk_full,
    read_model_or_none,
    remove_crash_leftovers,
)
from cacao_tui.store.finished_run import nothing_to_resume
from cacao_tui.store.layout import RunLayout, UnsafeLayout, check_contained
from cacao_tui.store.original_run import is_original_output, refusal
from cacao_tui.store.phases import phase_command, read_phase_state
from cacao_tui.store.run_lock import RunLocked, acquire_run_lock, held_here
from cacao_tui.store.run_state import check_run_state
from cacao_tui.store.state import Context, GpuInfo, RunSettings
from cacao_tui.tuners import UnknownTuner, tuner_factory
from cacao_tui.ui.formatting import safe_event
from ktt import gpu_catalog
from ktt.problem import Problem, ProblemError
from ktt.problem.inputs_hpp import write_inputs_hpp
from ktt.reference_times import ReferenceTimeError, read_reference_times
from ktt.sandbox import landlock_abi
from ktt.sandbox import status as sandbox_status
from ktt.terminal_text import safe_text

EXIT_OK = 0
EXIT_NO_RESULT = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class LaunchError(Exception):
    """A problem with the request (flags, machine, provider): one line, exit 2."""

    exit_code = 2


class NothingToResume(LaunchError):
    """``--resume`` on a run that has finished: one line, exit 1 (the original's exit status)."""

    exit_code = 1


def exit_code(event: RunFinished | None) -> int:
    if event is None:
        return EXIT_INTERRUPTED
    if event.status in ("ok", "waiting"):  # waiting: a split run's phase ended as it should (--phase)
        return EXIT_OK
    if event.status == "interrupted":
        return EXIT_INTERRUPTED
    if event.status == "budget":
        return EXIT_OK if event.best_ms is not None else EXIT_NO_RESULT
    return EXIT_NO_RESULT


def _gpu_info(request: RunRequest, problem: Problem) -> GpuInfo:
    wanted: list[int] = list(request.gpus) if request.gpus else list(problem.gpu_indices)
    detected = detect_gpus()
    if request.dry_run and request.target:
        spec = gpu_catalog.find(request.target)
        if spec is not None:
            return GpuInfo(name=spec.name, arch=spec.arch, indices=wanted, detected=False)
    if request.dry_run:
        first = next((g for g in detected if g.index == wanted[0]), None)
        if first is not None:
            return GpuInfo(name=first.name, arch=first.arch, indices=wanted, detected=True)
        return GpuInfo(name=None, arch=arch_of(problem.compute_capability), indices=wanted, detected=False)
    trouble = gpu_problem(wanted, detected)
    if trouble is not None:
        hint = {"none": "; use --dry-run to check a problem, a provider and a session without a GPU",
                "missing": "; set --gpus or gpu.index"}.get(trouble.kind, "")  # fmt: skip
        raise LaunchError(trouble.line + hint)
    first = next(g for g in detected if g.index == wanted[0])
    return GpuInfo(name=first.name, arch=first.arch, indices=wanted, detected=True)


def _claim_directory(layout: RunLayout, *, walk_output: bool, delegate: str | None = None) -> None:
    """One run per problem directory (its lock, before anything is archived), writing only inside it.

    The layout is checked before the lock is taken, so a run refused for an output/ link leaves
    no output.lock; ``main`` abandons the lock of a run refused after this."""
    try:
        check_contained(layout, walk_output=walk_output)
        lock = acquire_run_lock(layout.problem_dir, delegate=delegate)
    except (RunLocked, UnsafeLayout) as exc:
        raise LaunchError(str(exc)) from None
    if lock.took_over is not None:
        print(f"cacao: took over the lock of a run that ended without releasing it ({lock.took_over.describe()})",
              file=sys.stderr)  # fmt: skip


def _placed(layout: RunLayout, bus: Callable[[], EventBus]) -> Callable[[Placement], None]:
    """A job's placement as a JobPlaced event of its branch (docs/CLUSTER.md)."""

    def emit(p: Placement) -> None:
        branch, iteration = branch_of(p.kernel, layout.output)
        bus().emit(
            JobPlaced(
                message=p.describe(), branch=branch, iteration=iteration, job=p.job, host=p.host,
                node_id=p.node_id, gpu=p.gpu, attempt=p.attempt,
            )
        )  # fmt: skip

    return emit


def _provider_asked(request: RunRequest) -> tuple[str | None, str | None]:
    """(provider, model): ``--resume`` without ``--provider`` goes on with the run's own (its
    context.json), so a replay run resumes as a replay instead of asking for an API key."""
    if not request.resume or request.provider is not None:
        return request.provider, request.model
    try:
        context = read_model_or_none(RunLayout(request.directory).context, Context)
    except StateFileError:
        context = None
    if context is None:
        return request.provider, request.model
    return context.settings.provider, request.model or context.settings.model


def _dry_run_asked(request: RunRequest) -> bool:
    """``--resume`` without ``--dry-run`` / ``--no-dry-run`` goes on as the run began (its
    context.json): a dry run resumes dry, on a machine without a GPU too."""
    if request.dry_run is not None:
        return request.dry_run
    if not request.resume:
        return False
    try:
        context = read_model_or_none(RunLayout(request.directory).context, Context)
    except StateFileError:
        context = None
    return context is not None and context.settings.dry_run


def _refuse_original_run(request: RunRequest, layout: RunLayout) -> None:
    """--resume (or --no-clean) on a run the original CACAO wrote: one line, before anything is written."""
    if (request.resume or request.no_clean) and is_original_output(layout.output):
        what = "continue" if request.resume else "add a run to"
        raise LaunchError(refusal(layout.output, layout.problem_dir, what))


def _refuse_restarting_a_split_run(request: RunRequest, layout: RunLayout) -> None:
    """A phase without --resume on a split run that waits for its next phase would archive it and
    start over (a trial's operator did so by mistake): one line naming the command that continues
    it, before anything is written. A run without --phase still starts anew, as always."""
    if request.phase is None or request.resume:
        return
    state = read_phase_state(layout)
    waits = state.next_phase if state is not None else None
    if waits is not None:
        raise LaunchError(
            f"{layout.output}: a split run waits for its {'GPU' if waits == 'gpu' else 'model'} phase; "
            f"continue it with: {phase_command(layout.problem_dir, waits)} (a new run: move output/ away first)"
        )


def build_engine(request: RunRequest) -> tuple[Engine, EventBus]:
    request = with_run_settings(request)  # a resumed phase: the run's own settings by default
    request = dataclasses.replace(request, dry_run=_dry_run_asked(request))
    problem = request.problem
    _refuse_original_run(request, RunLayout(problem.directory))
    _refuse_restarting_a_split_run(request, RunLayout(problem.directory))
    llm_env = llm_environment(problem.directory)  # keys and choices of .env files; os.environ untouched
    for note in llm_env.notes:
        print(f"cacao: warning: {safe_text(note)}", file=sys.stderr)
    # The GPU phase (--phase gpu) makes no LLM call: no provider is chosen, no key is needed.
    gpu_phase = request.phase == "gpu"
    if not gpu_phase:
        check_resume_provider(request, llm_env.values)  # a context.json never switches you to a paid provider
    choice = gpu_phase_choice(request) if gpu_phase else select_provider(*_provider_asked(request), env=llm_env.values)
    for warning in choice.warnings:
        print(f"cacao: warning: {safe_text(warning)}", file=sys.stderr)
    step_choices = {}  # models of single steps (--model-plan, --model-decide): chosen before anything is written
    for node, wanted in (("plan", request.model_plan), ("decide", request.model_decide)):
        if wanted is not None and not gpu_phase:
            step_choices[node] = select_provider(wanted[0] or choice.provider, wanted[1], env=llm_env.values)
    llm_settings = load_llm_settings().with_cli(reasoning=request.reasoning, max_tokens=request.max_tokens)
    cluster = parse_cluster(request.cluster)
    make_tuner = tuner_factory()  # ktt, unless CACAO_TUNER names another (cacao_tui/tuners.py)
    layout = RunLayout(problem.directory)
    on_placed = _placed(layout, lambda: bus)
    backend = None
    if cluster.is_ray:  # joined before anything is written: an unreachable cluster is one line, exit 2
        from cacao_tui.cluster.ray_backend import open_ray_backend

        backend = open_ray_backend(
            cluster, problem.directory, arch=arch_of(problem.compute_capability), dry_run=request.dry_run,
            on_placed=on_placed, on_log=lambda message: bus.log(message, level="warning"),
        )  # fmt: skip
        gpu = backend.gpu
    elif needs_no_gpu(request):  # the model's phase: compile checks only (launch_phases.py)
        gpu = gpu_without_device(request)
    else:
        gpu = _gpu_info(request, problem)
    _claim_directory(layout, walk_output=request.resume or request.no_clean, delegate=request.lock_token)
    if request.resume and not layout.context.exists() and not layout.master.exists():
        raise LaunchError(f"{layout.output}: nothing to resume (no earlier run here); start without --resume")
    if request.resume:
        try:  # every state file it will read, read and checked once before the first write
            check_run_state(layout)
        except StateFileError as exc:
            raise LaunchError(str(exc)) from None
        if (finished := nothing_to_resume(layout)) is not None:
            raise NothingToResume(finished)
    try:  # an unusable reference_time.json stops the run here, not each tuning later
        read_reference_times(layout.reference_time, problem.primary.name)
    except ReferenceTimeError as exc:
        raise LaunchError(str(exc)) from None
    settings = RunSettings(
        max_iter=request.max_iter if request.max_iter is not None else DEFAULTS.max_iter,
        max_depth=request.max_depth if request.max_depth is not None else DEFAULTS.max_depth,
        path_budget=request.path_budget,
        n_strategies=request.n_strategies or DEFAULTS.n_strategies,
        timeout_s=request.timeout_s,
        dry_run=request.dry_run,
        provider=choice.provider,
        model=choice.model,
        single_shot=request.single_shot or DEFAULTS.single_shot,
        budget_usd=request.budget_usd,
        budget_tokens=request.budget_tokens if request.budget_tokens is not None else llm_settings.budget_tokens,
        budget_iters=request.budget_iters,
        samples=request.samples or 1,
        target=request.target,
    )
    for node, step_choice in step_choices.items():
        settings = settings.model_copy(update={f"model_{node}": f"{step_choice.provider}:{step_choice.model}"})
    bus = EventBus()
    # The original's run.log (the lines --no-ui prints), token_usage.json and run_meta.json.
    lines = HeadlessRenderer()
    bus.subscribe(OriginalFiles(layout, lambda event: lines.render(safe_event(event))))

    def on_call(record: CallRecord) -> None:
        bus.emit(LLMCallEvent.of(record, llm.usage.run.as_usage()))

    def on_retry(n: RetryNotice) -> None:  # the wait is shown (the log, the app's LLM tab)
        where = f"{n.key.node}#{n.key.index}"
        note = f" ({n.note})" if n.note else ""
        message = f"LLM {where}: {n.error}; retry {n.attempt} in {n.delay_s:.1f} s{note}"
        bus.log(message, level="warning", branch=n.key.branch, iteration=n.key.iteration)

    replay_from = request.replay_from
    if choice.provider == "replay" and replay_from is None:
        replay_from = problem.directory / "session.jsonl"

    def make_llm(step_choice: ProviderChoice) -> TrackedLLM:
        """One model's TrackedLLM with the run's limits, records, retries and progress."""
        return create_llm(
            step_choice,
            record_root=layout.output,
            budget_usd=settings.budget_usd,
            budget_tokens=settings.budget_tokens,
            replay_from=Path(replay_from) if replay_from and step_choice.provider == "replay" else None,
            on_call=on_call,
            on_retry=on_retry,
            on_progress=lambda p: bus.emit(LLMCallProgress(progress=p)),
            timeout_s=llm_timeout_s(request.llm_timeout_s, llm_env.values),
            max_concurrent=request.llm_concurrency,
            settings=llm_settings,
            cache_scope=problem.name,
            env=llm_env.values,
        )

    llm = gpu_phase_llm(choice, layout.output) if gpu_phase else make_llm(choice)
    step_llms = {}
    for node, step_choice in step_choices.items():
        step_llms[node] = make_llm(step_choice)
        step_llms[node].usage = llm.usage  # one run: one set of totals, one budget
    # Archive only now: a replay source inside output/ has been read into memory above.
    if request.resume:
        remove_crash_leftovers(layout.output)  # temp files of the writers the earlier run's kill stopped
    else:
        try:
            prepared = prepare_output(problem.directory, resume=False, no_clean=request.no_clean)
        except ArchiveError as exc:
            raise LaunchError(str(exc)) from None
        if request.no_clean and prepared.archived_to is not None:
            print(f"cacao: --no-clean: the earlier run in output/ is kept in {prepared.archived_to}", file=sys.stderr)
    if not landlock_abi():  # docs/SECURITY.md: what degrades without Landlock
        print(f"cacao: warning: {sandbox_status()}", file=sys.stderr)
    try:  # kernels and C references may include it; rewritten only when inputs.yaml changed
        write_inputs_hpp(problem)
    except OSError as exc:
        print(f"cacao: warning: could not write {problem.directory / 'inputs.hpp'}: {exc.strerror}", file=sys.stderr)
    if backend is not None:  # --cluster ray: Ray tasks place each GPU job (cacao_tui/cluster)
        devices: object = NoDevices() if settings.dry_run else backend.devices
        tuner: object = backend.tuner
    else:
        devices = NoDevices() if settings.dry_run or needs_no_gpu(request) else GpuScheduler(gpu.indices)
        tuner = PlacedTuner(make_tuner(on_log=lambda message: bus.log(message, level="warning")), on_placed)
    deps = RunDeps(
        problem=problem,
        layout=layout,
        llm=llm,
        tuner=tuner,  # type: ignore[arg-type]  # KttTuner (waiting-for-GPU lines) or a cluster's
        settings=settings,
        defaults=DEFAULTS,
        gpu=gpu,
        devices=devices,  # type: ignore[arg-type]
        step_llms=step_llms,
        phase=engine_phase(request),  # type: ignore[arg-type]
    )
    submit = gpu_submitter(request, lambda: bus) if request.gpu_submit is not None else None
    return Engine(deps, bus, concurrency=DEFAULTS.concurrency, resumed=request.resume, gpu_submit=submit), bus


async def run_headless(engine: Engine, bus: EventBus, renderer: HeadlessRenderer, *, replay: bool = False) -> int:
    loop = asyncio.get_running_loop()
    bus.subscribe(renderer, replay=replay)
    task = asyncio.ensure_future(engine.run()) if engine.finished is None else None
    _stop_on_disk_full(loop, task)
    return await _drive(loop, engine, task, renderer)


def _stop_on_disk_full(loop: asyncio.AbstractEventLoop, task: asyncio.Future | None, *also: object) -> None:
    """The first write that finds the disk full stops the run at once (no later write is attempted)."""

    def stop() -> None:
        if task is not None and not task.done():
            task.cancel()
        for fn in also:
            with contextlib.suppress(Exception):
                fn()  # type: ignore[operator]

    on_disk_full(lambda _exc: loop.call_soon_threadsafe(stop))
    previous = loop.get_exception_handler()

    def quiet(loop: asyncio.AbstractEventLoop, context: dict) -> None:
        if isinstance(context.get("exception"), DiskFull):
            return  # a branch task that ended on the full disk: reported once, in main's one line
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(quiet)


async def _drive(
    loop: asyncio.AbstractEventLoop, engine: Engine, task: asyncio.Future | None, renderer: HeadlessRenderer
) -> int:
    interrupts = 0
    stopping: set[asyncio.Future] = set()

    def on_signal() -> None:
        nonlocal interrupts
        interrupts += 1
        if interrupts == 1:
            renderer.print_line("stopping cleanly… (press Ctrl-C again to abort at once)")
            stopping.add(asyncio.ensure_future(engine.stop()))
        elif task is not None:
            task.cancel()

    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, on_signal)
    try:
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await task
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)
    return exit_code(engine.finished)


def _release_lock(directory: Path) -> None:
    """The run has ended: the directory is free for another run while the app still shows this
    one (a view of a finished run holds no lock, as the home screen's does not)."""
    lock = held_here(directory)
    if lock is not None:
        lock.release()


async def run_with_ui(engine: Engine, bus: EventBus, request: RunRequest) -> int:
    from cacao_tui.ui.app import CacaoApp  # textual is imported only when the app is used

    task = asyncio.ensure_future(engine.run())
    task.add_done_callback(lambda _: _release_lock(request.directory))  # the app may stay open on the finished run
    app = CacaoApp(engine=engine, bus=bus, stop_on_sigterm=True)  # S in another app: a clean stop
    _stop_on_disk_full(asyncio.get_running_loop(), task, app.exit)
    result = await app.run_async()
    if result == "detach" and not task.done():
        renderer = HeadlessRenderer(json_lines=False, verbose=request.verbose)
        renderer.print_line("detached from the app; the run goes on here (Ctrl-C stops it cleanly)")
        bus.subscribe(renderer)
        return await _drive(asyncio.get_running_loop(), engine, task, renderer)
    if not task.done():
        await engine.stop()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    if engine.finished is not None:
        HeadlessRenderer()(engine.finished)
    return exit_code(engine.finished)


def main(request: RunRequest) -> int:
    """Run ``request`` to its end; the exit status (0 ok, 1 no result or a failure, 2 a bad request, 130)."""
    try:
        engine, bus = build_engine(request)
    except (ProblemError, LaunchError, LLMError, ClusterError, UnknownTuner) as exc:
        lock = held_here(request.problem.directory)
        if lock is not None:
            lock.abandon()  # refused before the run began: a lock file it made goes too
        line = f"cacao: {exc}" if not isinstance(exc, ProblemError) else str(exc)
        print(safe_text(line, keep_newlines=True), file=sys.stderr)  # names and link targets are escaped where quoted
        return getattr(exc, "exit_code", EXIT_USAGE)
    try:
        if request.front_end != "app":
            renderer = HeadlessRenderer(json_lines=request.front_end == "json", verbose=request.verbose)
            code = asyncio.run(run_headless(engine, bus, renderer))
        else:
            code = asyncio.run(run_with_ui(engine, bus, request))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except StateFileError as exc:  # a state file changed under the run (checked when it began): one line
        print(f"cacao: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except DiskFull:
        code = EXIT_NO_RESULT  # reported below
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        print(f"cacao: disk full: {exc.strerror} ({exc.filename}); free some space, then continue with --resume",
              file=sys.stderr)  # fmt: skip
        return EXIT_NO_RESULT
    full = disk_full()
    if full is not None:
        print(f"cacao: disk full: could not write {full.path} ({full.strerror}); the run stopped and its state "
              "on disk is intact: free some space, then continue with --resume", file=sys.stderr)  # fmt: skip
        return EXIT_NO_RESULT
    return code
