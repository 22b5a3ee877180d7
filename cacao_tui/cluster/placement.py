"""Where a job ran: the host, the Ray node and the GPU, reported once per attempt.

Both schedulers report it (``PlacedTuner`` for this machine's GPUs, ``RayTuner`` for a
cluster), the launcher turns it into a ``JobPlaced`` event, and the app and ``--no-ui``
show it in the branch's log.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cacao_tui.ktt_client import CheckOptions, Tuner, TuneRequest, ValidateRequest
from ktt.protocol import CheckReport, DeviceReport, ProfileReport, Progress, TuneSummary, ValidateReport

_ITER = re.compile(r"iter(\d+)$")


@dataclass(frozen=True)
class Placement:
    job: str  # "tune" | "profile" | "check"
    kernel: Path  # the head's kernel file: which branch and iteration the job is for
    host: str
    node_id: str  # Ray's node id; "local" on one machine
    gpu: str  # the GPU id on that node ("" for a compile check)
    attempt: int = 1
    pid: int | None = None  # the Ray worker's process on the node

    def describe(self) -> str:
        node = "" if self.node_id in ("", "local") else f" (node {self.node_id[:8]})"
        gpu = f" GPU {self.gpu}" if self.gpu else " (CPU)"
        again = f", attempt {self.attempt}" if self.attempt > 1 else ""
        return f"{self.job} on {self.host}{node}{gpu}{again}"


OnPlaced = Callable[[Placement], None]


def branch_of(kernel: Path, output: Path) -> tuple[str | None, int | None]:
    """``output/branches/<name>/iter<N>/kernels.cu`` -> (name, N); anything else -> (None, None)."""
    try:
        parts = kernel.resolve().relative_to(output.resolve()).parts
    except ValueError:
        return None, None
    if len(parts) >= 4 and parts[0] == "branches":
        m = _ITER.match(parts[2])
        if m:
            return parts[1], int(m.group(1))
    return None, None


class PlacedTuner:
    """This machine's tuner, reporting each GPU job's placement like a cluster does."""

    def __init__(self, inner: Tuner, on_placed: OnPlaced, host: str | None = None) -> None:
        self.inner = inner
        self.on_placed = on_placed
        self.host = host or socket.gethostname()

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
        return await self.inner.check(problem_dir, kernel, spec, sample=sample, arch=arch, options=options)

    async def tune(self, request: TuneRequest, on_progress: Callable[[Progress], None]) -> TuneSummary:
        self.on_placed(Placement("tune", request.kernel, self.host, "local", str(request.device)))
        return await self.inner.tune(request, on_progress)

    async def profile(
        self, problem_dir: Path, kernel: Path, spec: Path, summary: Path, out_dir: Path, *, device: int
    ) -> ProfileReport:
        self.on_placed(Placement("profile", kernel, self.host, "local", str(device)))
        return await self.inner.profile(problem_dir, kernel, spec, summary, out_dir, device=device)

    async def validate(self, request: ValidateRequest) -> ValidateReport:
        self.on_placed(Placement("validate", request.kernel, self.host, "local", str(request.device)))
        return await self.inner.validate(request)

    async def describe_device(self, *, device: int) -> DeviceReport:
        return await self.inner.describe_device(device=device)
