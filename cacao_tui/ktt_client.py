"""The client side of ktt: what the nodes call to compile-check, tune and profile.

Every ktt command runs in its own process (``python -m ktt ...``), so a crashing or
hanging kernel, compiler or profiler can never take the engine down, and the kernel
cannot reach the timer that judges it. Results come back as ktt's protocol models.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pydantic import ValidationError

from cacao_tui.subprocesses import ProcessResult, run_streaming
from ktt.capped_read import MIB, read_bytes_capped
from ktt.procs import child_env
from ktt.protocol import (
    EXIT_ENVIRONMENT,
    CheckReport,
    DeviceReport,
    ErrorLine,
    ProfileReport,
    Progress,
    TuneSummary,
    ValidateReport,
)

CHECK_TIMEOUT_S = 300.0
MAX_SUMMARY_BYTES = 4 * MIB  # a tuner's summary.json, read back when its last line was lost
DEVICE_TIMEOUT_S = 120.0


class _GpuWait:
    """Follows ktt's lines about the machine-wide GPU lock (ktt.gpu_lock): tells the engine's
    log, and pauses the watchdog while another process holds the GPU."""

    WAIT = "waiting for GPU"
    FREE = "is free after"

    def __init__(self, on_log: Callable[[str], None] | None) -> None:
        self.on_log = on_log
        self.waiting = False

    def message(self, text: str) -> None:
        if text.startswith(self.WAIT):
            self.waiting = True
        elif text.startswith("GPU ") and self.FREE in text:
            self.waiting = False
        else:
            return
        if self.on_log is not None:
            self.on_log(text[:300])

    def stdout_line(self, line: str) -> None:
        """ktt tune reports it as a protocol log line."""
        if "GPU" not in line or '"log"' not in line:
            return
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            return
        if data.get("type") == "log":
            self.message(str(data.get("message", "")))

    def stderr_line(self, line: str) -> None:
        """ktt profile (and anything ktt runs without a protocol stream) on stderr."""
        if line.startswith("ktt: "):
            self.message(line[len("ktt: ") :])

    def paused(self) -> bool:
        return self.waiting


PROFILE_TIMEOUT_S = 600.0


class TunerError(Exception):
    """ktt could not do what was asked; the message is one readable line (or a few)."""

    def __init__(self, message: str, *, exit_code: int | None = None, environment: bool = False) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.environment = environment


@dataclass(frozen=True)
class TuneRequest:
    problem_dir: Path
    kernel: Path
    spec: Path
    out_dir: Path
    device: int
    duration_s: float | None  # every case's budget; None: each case's own from problem.yaml
    watchdog_s: float
    reference_time: Path
    seed: int = 0
    compile_workers: int | None = None  # None: ktt's default (all cores but one)
    problem_budget: bool = False  # ignore the spec's duration_s (the budget is the user's, not the model's)


@dataclass(frozen=True)
class CheckOptions:
    """What a compile check may be asked besides its sample: named configurations (checked as
    well, at most ktt.check_sample.MAX_REQUESTED) and the value of ``SM_COUNT`` (ktt.target)."""

    configs: tuple[dict, ...] = ()
    sm_count: int | None = None

    def argv(self) -> list[str]:
        out = ["--configs", json.dumps(list(self.configs))] if self.configs else []
        return out + (["--sm-count", str(self.sm_count)] if self.sm_count else [])


class Tuner(Protocol):
    """What the run and profile nodes need; ``KttTuner`` is the real one."""

    async def check(
        self,
        problem_dir: Path,
        kernel: Path,
        spec: Path,
        *,
        sample: int,
        arch: str,
        options: CheckOptions | None = None,
    ) -> CheckReport: ...

    async def tune(self, request: TuneRequest, on_progress: Callable[[Progress], None]) -> TuneSummary: ...

    async def profile(
        self, problem_dir: Path, kernel: Path, spec: Path, summary: Path, out_dir: Path, *, device: int
    ) -> ProfileReport: ...

    async def validate(self, request: ValidateRequest) -> ValidateReport: ...

    async def describe_device(self, *, device: int) -> DeviceReport: ...


@dataclass(frozen=True)
class ValidateRequest:
    """One configuration, validation only (``ktt validate``); ``config`` None: the space's first."""

    problem_dir: Path
    kernel: Path
    spec: Path
    out_dir: Path
    device: int
    config: dict[str, int | float | str] | None = None
    timeout_s: float = 120.0  # the whole run (compile, references, both input sets)
    run_timeout_s: float = 10.0  # one evaluation without progress


def _python_env() -> dict[str, str]:
    """The allow-listed environment (no API keys: docs/SECURITY.md) for ``python -m ktt``."""
    env = child_env()
    env.setdefault("PYTHONUNBUFFERED", "1")
    # ktt must import from the same tree as the engine, also when run from a checkout.
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _last_json(lines: list[str], kind: str) -> dict | None:
    for line in reversed(lines):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            continue
        if data.get("type") == kind:
            return data
    return None


def _failure(result: ProcessResult, what: str) -> TunerError:
    err = _last_json(result.stdout_lines, "error")
    if err is not None:
        line = ErrorLine.model_validate(err)
        return TunerError(line.message, exit_code=line.exit_code, environment=line.exit_code == EXIT_ENVIRONMENT)
    if result.timed_out:
        return TunerError(f"{what} did not finish within its watchdog ({result.seconds:.0f} s) and was killed")
    tail = result.stderr.strip().splitlines()[-5:]
    detail = " | ".join(tail) if tail else "no output"
    return TunerError(
        f"{what} failed (exit {result.returncode}): {detail}",
        exit_code=result.returncode,
        environment=result.returncode == EXIT_ENVIRONMENT,
    )


class KttTuner:
    """Runs ``python -m ktt`` subprocesses."""

    def __init__(self, python: str | None = None, on_log: Callable[[str], None] | None = None) -> None:
        self.python = python or sys.executable
        self.on_log = on_log  # hears ktt's "waiting for GPU N (held by ...)" / "GPU N is free" lines

    def _argv(self, command: str, problem_dir: Path, kernel: Path, spec: Path, *extra: str) -> list[str]:
        return [self.python, "-m", "ktt", command, "--problem", str(problem_dir), "--kernel", str(kernel),
                "--spec", str(spec), *extra, "--json"]  # fmt: skip

    async def check(
        self,
        problem_dir: Path,
        kernel: Path,
        spec: Path,
        *,
        sample: int,
        arch: str,
        options: CheckOptions | None = None,
    ) -> CheckReport:
        extra = options.argv() if options is not None else []
        argv = self._argv("check", problem_dir, kernel, spec, "--sample", str(sample), "--arch", arch, *extra)
        result = await run_streaming(argv, env=_python_env(), timeout_s=CHECK_TIMEOUT_S)
        data = _last_json(result.stdout_lines, "check")
        if data is None:
            raise _failure(result, "ktt check")
        return CheckReport.model_validate(data)

    async def tune(self, request: TuneRequest, on_progress: Callable[[Progress], None]) -> TuneSummary:
        argv = self._argv(
            "tune", request.problem_dir, request.kernel, request.spec,
            "--output", str(request.out_dir),
            *(["--duration", f"{request.duration_s:g}"] if request.duration_s is not None else []),
            *(["--problem-budget"] if request.problem_budget else []),
            "--device", str(request.device),
            "--reference-time", str(request.reference_time),
            "--seed", str(request.seed),
            *(["--compile-workers", str(request.compile_workers)] if request.compile_workers else []),
        )  # fmt: skip

        gpu = _GpuWait(self.on_log)

        def on_line(line: str) -> None:
            if '"progress"' not in line:
                gpu.stdout_line(line)
                return
            try:
                data = json.loads(line)
                if data.get("type") == "progress":
                    on_progress(Progress.model_validate(data))
            except (json.JSONDecodeError, ValidationError):
                pass

        result = await run_streaming(
            argv, env=_python_env(), timeout_s=request.watchdog_s, on_stdout_line=on_line,
            on_stderr_line=gpu.stderr_line, paused=gpu.paused,
        )  # fmt: skip
        data = _last_json(result.stdout_lines, "result")
        if data is None:
            summary_file = request.out_dir / "summary.json"
            if summary_file.exists() and not result.timed_out:
                return TuneSummary.model_validate_json(read_bytes_capped(summary_file, MAX_SUMMARY_BYTES))
            raise _failure(result, "ktt tune")
        return TuneSummary.model_validate(data)

    async def profile(
        self, problem_dir: Path, kernel: Path, spec: Path, summary: Path, out_dir: Path, *, device: int
    ) -> ProfileReport:
        argv = self._argv(
            "profile", problem_dir, kernel, spec,
            "--from-summary", str(summary), "--output", str(out_dir), "--device", str(device),
        )  # fmt: skip
        gpu = _GpuWait(self.on_log)
        result = await run_streaming(
            argv, env=_python_env(), timeout_s=PROFILE_TIMEOUT_S, on_stderr_line=gpu.stderr_line, paused=gpu.paused
        )
        data = _last_json(result.stdout_lines, "profile")
        if data is not None:
            return ProfileReport.model_validate(data)
        failure = _failure(result, "ktt profile")
        kind = "no_gpu" if failure.environment else "failed"
        return ProfileReport(ok=False, error=str(failure), error_kind=kind)  # type: ignore[arg-type]

    async def validate(self, request: ValidateRequest) -> ValidateReport:
        argv = self._argv(
            "validate", request.problem_dir, request.kernel, request.spec,
            "--output", str(request.out_dir), "--device", str(request.device),
            "--timeout", f"{request.run_timeout_s:g}",
            *(["--config", json.dumps(request.config)] if request.config is not None else []),
        )  # fmt: skip
        gpu = _GpuWait(self.on_log)
        result = await run_streaming(
            argv, env=_python_env(), timeout_s=request.timeout_s, on_stderr_line=gpu.stderr_line, paused=gpu.paused
        )
        data = _last_json(result.stdout_lines, "validate")
        if data is None:
            raise _failure(result, "ktt validate")
        report = ValidateReport.model_validate(data)
        if not report.ok and result.returncode == EXIT_ENVIRONMENT:
            raise TunerError(report.message or "ktt validate: no GPU", exit_code=EXIT_ENVIRONMENT, environment=True)
        return report

    async def describe_device(self, *, device: int) -> DeviceReport:
        argv = [self.python, "-m", "ktt", "device", "--device", str(device), "--json"]
        gpu = _GpuWait(self.on_log)
        result = await run_streaming(
            argv, env=_python_env(), timeout_s=DEVICE_TIMEOUT_S, on_stderr_line=gpu.stderr_line, paused=gpu.paused
        )
        data = _last_json(result.stdout_lines, "device")
        if data is None:
            raise _failure(result, "ktt device")
        return DeviceReport.model_validate(data)
