"""What ``launch.py`` does differently for a split run: ``--phase llm|gpu`` and ``--gpu-submit``.

The model's phase (and a ``--gpu-submit`` run, which is the model's phase that starts the GPU
phases itself) needs no GPU: kernels are compile-checked for the device the GPU phase measured
(output/device.json), else for ``gpu.compute_capability``. The GPU phase needs no model: it
runs with the run's own provider and model named (context.json) but a provider that makes no
call, so no key and no network are needed on the GPU node.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Callable
from pathlib import Path

from cacao_tui.cluster.submit import expand, gpu_phase_argv, run_submission
from cacao_tui.engine.engine import GpuSubmit
from cacao_tui.engine.events import EventBus
from cacao_tui.engine.gpu import arch_of, detect_gpus
from cacao_tui.llm import ProviderChoice, TrackedLLM
from cacao_tui.llm.no_model import NoModel
from cacao_tui.run_request import RunRequest
from cacao_tui.store.atomic import StateFileError, read_model_or_none
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.run_lock import held_here
from cacao_tui.store.state import Context, GpuInfo
from ktt.protocol import DeviceReport


def needs_no_gpu(request: RunRequest) -> bool:
    """The model's phase, or a run that submits its GPU phases elsewhere."""
    return request.phase == "llm" or request.gpu_submit is not None


def engine_phase(request: RunRequest) -> str | None:
    """The engine's phase: --phase, or the model's for a --gpu-submit run."""
    return request.phase or ("llm" if request.gpu_submit is not None else None)


def _context(layout: RunLayout) -> Context | None:
    try:
        return read_model_or_none(layout.context, Context)
    except StateFileError:
        return None


def gpu_without_device(request: RunRequest) -> GpuInfo:
    """The GPU the model's phase compile-checks for: the one the GPU phase measured, else one on
    this machine, else the problem's compute capability."""
    problem = request.problem
    wanted: list[int] = list(request.gpus) if request.gpus else list(problem.gpu_indices)
    try:
        measured = read_model_or_none(RunLayout(problem.directory).device, DeviceReport)
    except StateFileError:
        measured = None
    if measured is not None:
        return GpuInfo(name=measured.name, arch=measured.arch, indices=wanted, detected=False)
    first = next((g for g in detect_gpus() if g.index == wanted[0]), None)
    if first is not None:
        return GpuInfo(name=first.name, arch=first.arch, indices=wanted, detected=True)
    return GpuInfo(name=None, arch=arch_of(problem.compute_capability), indices=wanted, detected=False)


def gpu_phase_choice(request: RunRequest) -> ProviderChoice:
    """The run's own provider and model (never called in the GPU phase)."""
    context = _context(RunLayout(request.directory))
    provider = context.settings.provider if context is not None else (request.provider or "none")
    model = request.model or (context.settings.model if context is not None else "none")
    return ProviderChoice(provider=provider, model=model, source="the run's own (the GPU phase makes no LLM call)")


def gpu_phase_llm(choice: ProviderChoice, output: Path) -> TrackedLLM:
    return TrackedLLM(NoModel(choice.provider, choice.model), record_root=output)


def with_run_settings(request: RunRequest) -> RunRequest:
    """A resumed phase takes the run's own settings (context.json) where its flags give none, so
    alternating ``--resume --phase X`` without repeating them goes on as the run began."""
    if request.phase is None or not request.resume:
        return request
    context = _context(RunLayout(request.directory))
    if context is None:
        return request
    s = context.settings
    return dataclasses.replace(
        request,
        max_iter=request.max_iter if request.max_iter is not None else s.max_iter,
        max_depth=request.max_depth if request.max_depth is not None else s.max_depth,
        path_budget=request.path_budget if request.path_budget is not None else s.path_budget,
        n_strategies=request.n_strategies if request.n_strategies is not None else s.n_strategies,
        timeout_s=request.timeout_s if request.timeout_s is not None else s.timeout_s,
    )


def gpu_submitter(request: RunRequest, bus: Callable[[], EventBus]) -> GpuSubmit:
    """--gpu-submit: run the template for the GPU phase and wait; None, or the line that ends the run."""
    template = request.gpu_submit
    assert template is not None

    async def submit() -> str | None:
        token = secrets.token_hex(16)
        lock = held_here(request.directory)
        argv = gpu_phase_argv(
            request.directory, token=token, timeout_s=request.timeout_s, gpus=request.gpus, verbose=request.verbose
        )
        command = expand(template, argv)
        bus().log(f"gpu-submit: {command}")
        if lock is not None:
            lock.delegate(token)  # the GPU phase runs under this run's lock
        try:
            code = await run_submission(command, cwd=Path.cwd(), on_line=lambda line: bus().log(f"gpu-submit: {line}"))
        except OSError as exc:
            return f"gpu-submit: the command could not be started ({exc.strerror})"
        finally:
            if lock is not None:
                lock.delegate(None)
        if code != 0:
            return f"gpu-submit: the command exited with status {code} (its output is in the run log)"
        return None

    return submit
