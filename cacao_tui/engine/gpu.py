"""Which GPUs this machine has, asked of nvidia-smi (the engine process never opens a CUDA context)."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass


@dataclass(frozen=True)
class DetectedGpu:
    index: int
    name: str
    compute_capability: str  # "9.0"

    @property
    def arch(self) -> str:
        return "sm_" + self.compute_capability.replace(".", "")


def detect_gpus(timeout_s: float = 20.0) -> list[DetectedGpu]:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        out = subprocess.run(
            [exe, "--query-gpu=index,name,compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    if out.returncode != 0:
        return []
    gpus = []
    for line in out.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3 and parts[0].isdigit():
            gpus.append(DetectedGpu(int(parts[0]), parts[1], parts[2]))
    return gpus


def arch_of(compute_capability: str | None) -> str:
    if not compute_capability:
        return "sm_90"
    return "sm_" + compute_capability.replace(".", "")
