"""A FAKE tuner for tests and the engine-overhead benchmark. It never touches a GPU.

It answers like ktt does, from markers in the kernel source, so a scripted session can
steer it: ``// FAKE_TIME_MS: 1.25`` sets the best time (otherwise a stable number derived
from the source), ``// FAKE_COMPILE_ERROR`` makes the compile check fail at that line,
``// FAKE_NO_VALID`` makes tuning find nothing valid. Use ``KttTuner`` for real work.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
from collections.abc import Callable
from pathlib import Path

from cacao_tui.ktt_client import TuneRequest, TunerError, ValidateRequest
from ktt.protocol import (
    CheckedConfig,
    CheckReport,
    ConfigResult,
    DeviceReport,
    Diagnostic,
    ProfileReport,
    Progress,
    TuneSummary,
    ValidateReport,
)

_TIME = re.compile(r"//\s*FAKE_TIME_MS:\s*([0-9.]+)")


def _fake_time(source: str) -> float:
    m = _TIME.search(source)
    if m:
        return float(m.group(1))
    digest = int(hashlib.sha256(source.encode()).hexdigest()[:8], 16)
    return 0.5 + (digest % 1000) / 1000.0


class FakeTuner:
    """Scripted stand-in for ``KttTuner`` (named fake on purpose)."""

    def __init__(self, reference_ms: float = 10.0, delay_s: float = 0.0) -> None:
        self.reference_ms = reference_ms
        self.delay_s = delay_s
        self.calls: list[str] = []

    async def check(
        self, problem_dir: Path, kernel: Path, spec: Path, *, sample: int, arch: str, options: object = None
    ) -> CheckReport:
        self.calls.append("check")
        source = kernel.read_text(encoding="utf-8") if kernel.exists() else ""
        ok = bool(source) and spec.exists() and "FAKE_COMPILE_ERROR" not in source
        diags = []
        if "FAKE_COMPILE_ERROR" in source:
            line = source[: source.index("FAKE_COMPILE_ERROR")].count("\n") + 1
            diags.append(Diagnostic(file="kernels.cu", line=line, message="planted error (fake tuner)"))
        if not source or not spec.exists():
            diags.append(Diagnostic(file="kernels.cu" if not source else "tuning.yaml", message="file missing"))
        return CheckReport(
            ok=ok,
            kernel_file=str(kernel),
            spec_file=str(spec),
            arch=arch,
            space_size=4,
            sampled=1,
            configs=[CheckedConfig(config={"P": 1}, ok=ok, diagnostics=diags)],
        )

    async def tune(self, request: TuneRequest, on_progress: Callable[[Progress], None]) -> TuneSummary:
        self.calls.append("tune")
        source = request.kernel.read_text(encoding="utf-8")
        request.out_dir.mkdir(parents=True, exist_ok=True)
        start = time.time()
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        no_valid = "FAKE_NO_VALID" in source
        t = _fake_time(source)
        on_progress(
            Progress(
                evaluated=4,
                valid=0 if no_valid else 4,
                space_size=4,
                best_ms=None if no_valid else t,
                elapsed_s=time.time() - start,
                budget_s=request.duration_s,
            )
        )
        results = []
        for i in range(4):
            status = "validation_failed" if no_valid else "ok"
            results.append(
                ConfigResult(
                    index=i,
                    config={"P": i},
                    status=status,  # type: ignore[arg-type]
                    time_ms=None if no_valid else t * (1 + i / 10),
                    repeats=7,
                )
            )
        (request.out_dir / "results.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in results))
        best = None if no_valid else results[0]
        summary = TuneSummary(
            ok=best is not None,
            problem=request.problem_dir.name,
            kernel_file=str(request.kernel),
            spec_file=str(request.spec),
            device="fake",
            arch="sm_90",
            space_size=4,
            evaluated=4,
            valid=0 if no_valid else 4,
            by_status={"validation_failed": 4} if no_valid else {"ok": 4},
            strategy="exhaustive",
            seed=request.seed,
            best=best,
            confirmed_on_fresh_input=best is not None,
            reference_ms=self.reference_ms,
            reference_source="fake",
            speedup=None if best is None else self.reference_ms / t,
            wall_s=time.time() - start,
            results_file=str(request.out_dir / "results.jsonl"),
        )
        (request.out_dir / "summary.json").write_text(summary.model_dump_json(indent=2))
        return summary

    async def profile(
        self, problem_dir: Path, kernel: Path, spec: Path, summary: Path, out_dir: Path, *, device: int
    ) -> ProfileReport:
        self.calls.append("profile")
        data = json.loads(summary.read_text(encoding="utf-8"))
        report = ProfileReport(
            ok=False,
            config=(data.get("best") or {}).get("config", {}),
            error="the fake tuner does not profile",
            error_kind="failed",
        )
        return report

    async def validate(self, request: ValidateRequest) -> ValidateReport:
        self.calls.append("validate")
        raise TunerError("the fake tuner does not validate on a GPU")

    async def describe_device(self, *, device: int) -> DeviceReport:
        self.calls.append("device")
        raise TunerError("the fake tuner has no device to describe")
