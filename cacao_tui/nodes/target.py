"""The GPU the kernels are written for, as every prompt states it.

A run on a GPU measures its device table at the start (``ktt device``, output/device.json).
A dry run measures nothing, but the model still writes for a GPU: the one ``--target`` names,
else the GPU found on this machine, else the GPU problem.yaml names (``gpu.name``), else the
GPU of the problem's compute capability (ktt.gpu_catalog: sm_90 is the H200). Its datasheet
figures stand in for the measured table, and the prompt says they are a datasheet's.
"""

from __future__ import annotations

from dataclasses import dataclass

from cacao_tui.nodes.context import RunDeps
from ktt import gpu_catalog
from ktt.protocol import DeviceReport


@dataclass(frozen=True)
class Target:
    report: DeviceReport | None  # None: an architecture the table does not know
    measured: bool
    arch: str
    why: str  # how the GPU was chosen (for a datasheet)

    @property
    def sm_count(self) -> int | None:
        return self.report.sm_count if self.report is not None else None


def _named_in_problem(deps: RunDeps) -> str | None:
    for key in ("name", "model", "gpu"):
        value = deps.problem.gpu_info.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def target_of(deps: RunDeps) -> Target:
    if deps.device is not None:
        return Target(deps.device, True, deps.device.arch, "measured at the start of this run")
    choices = (
        (deps.settings.target, "the GPU --target names"),
        (deps.gpu.name, "the GPU on this machine"),
        (_named_in_problem(deps), "the GPU problem.yaml names"),
    )
    for name, why in choices:
        spec = gpu_catalog.find(name)
        if spec is not None:
            return Target(gpu_catalog.datasheet_report(spec), False, spec.arch, why)
    spec = gpu_catalog.for_arch(deps.gpu.arch)
    if spec is not None:
        return Target(gpu_catalog.datasheet_report(spec), False, spec.arch, f"the usual {deps.gpu.arch} GPU")
    return Target(None, False, deps.gpu.arch, "no GPU of this architecture in the built-in table")
