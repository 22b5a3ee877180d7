"""FAKE GPU pieces behind the real ``Tuner`` seam, for CPU tests (no GPU is used or needed).

``FakeGpuTuner`` is the stock FAKE tuner (times from FAKE_TIME_MS markers) plus what a GPU
gives the agent: a FAKE device description (an H200's figures, written here, not measured),
a FAKE profile (Nsight Compute output recorded on an H200, tests/ktt/data/ncu, parsed and
diagnosed by the real ktt code), and a FAKE validator: a kernel carrying
``// FAKE_WRONG_AT: N`` is wrong from element N on (expected 1.0, got 0.0), any other valid.
"""

from __future__ import annotations

from pathlib import Path

from cacao_tui.ktt_client import ValidateRequest
from ktt.device_table import peak_rates
from ktt.diagnosis import diagnose
from ktt.ncu import parse_raw_csv
from ktt.protocol import (
    ConfigResult,
    DeviceReport,
    Mismatch,
    ProfileReport,
    ValidateReport,
    ValidationReport,
)
from ktt.results import write_json_atomic
from tests.fake_tuner import FakeTuner

NCU_DATA = Path(__file__).resolve().parents[1] / "ktt" / "data" / "ncu"
FAKE_DEVICE = DeviceReport(
    name="FAKE H200 (a test's description, not measured)",
    arch="sm_90",
    sm_count=132,
    clock_mhz=1980.0,
    memory_clock_mhz=3201.0,
    memory_bus_bits=6144,
    total_memory_bytes=150_000_000_000,
    l2_bytes=60 * 1024 * 1024,
    smem_per_block=48 * 1024,
    smem_per_block_optin=227 * 1024,
    smem_per_sm=228 * 1024,
    regs_per_block=65536,
    regs_per_sm=65536,
    max_threads_per_block=1024,
    max_threads_per_sm=2048,
    max_blocks_per_sm=32,
    copy_bandwidth_gbs=4012.0,
    theoretical_bandwidth_gbs=4916.7,
    peaks=peak_rates("sm_90", 132, 1980.0),
)


def wrong_at(source: str) -> int | None:
    marker = "FAKE_WRONG_AT:"
    if marker not in source:
        return None
    return int(source.split(marker, 1)[1].split()[0])


class FakeGpuTuner(FakeTuner):
    """FAKE: the stock fake tuner with a device, a profile and a validator (see the module)."""

    def __init__(self, reference_ms: float = 10.0, delay_s: float = 0.0) -> None:
        super().__init__(reference_ms, delay_s)
        self.validated: list[dict] = []

    async def describe_device(self, *, device: int) -> DeviceReport:
        self.calls.append("device")
        return FAKE_DEVICE.model_copy(update={"ordinal": device})

    async def validate(self, request: ValidateRequest) -> ValidateReport:
        self.calls.append("validate")
        self.validated.append({"kernel": str(request.kernel), "config": request.config})
        config = dict(request.config or {"P": 1})
        first = wrong_at(request.kernel.read_text(encoding="utf-8"))
        if first is None:
            result = ConfigResult(index=0, config=config, status="ok", confirmed=True)
            return ValidateReport(ok=True, config=config, shapes=[result], seconds=0.5)
        checked = 4096
        report = ValidationReport(
            buffer="C", max_abs_error=1.0, first_bad_index=first, bad_count=checked - first, checked=checked,
            reason=f"C: {checked - first} of {checked} element(s) differ from the reference beyond the tolerance",
            samples=[Mismatch(index=first + i, expected=1.0, got=0.0) for i in range(8)], input_set=0,
        )  # fmt: skip
        result = ConfigResult(index=0, config=config, status="validation_failed", error=report.reason,
                              validation=report)  # fmt: skip
        return ValidateReport(ok=False, config=config, shapes=[result], seconds=0.5)

    async def profile(
        self, problem_dir: Path, kernel: Path, spec: Path, summary: Path, out_dir: Path, *, device: int
    ) -> ProfileReport:
        self.calls.append("profile")
        kernels = parse_raw_csv((NCU_DATA / "raw_mmul_h200.csv").read_text(encoding="utf-8"))
        for k in kernels:
            k.diagnosis = diagnose(k)
        report = ProfileReport(ok=True, config={"P": 0}, kernels=kernels, ncu_version="FAKE (recorded on an H200)")
        write_json_atomic(out_dir / "profile.json", report)
        return report
