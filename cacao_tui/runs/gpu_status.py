"""Live figures of this machine's GPUs from NVML (nvidia-ml-py): utilisation, memory, SM clock,
temperature, power, and which job holds each GPU's lock (ktt/gpu_lock.py), for the app's GPU
panel and status bar.

NVML is opened once and read on each refresh (a few microseconds a figure). Without the
library, a driver or a GPU the reader says why once and returns no samples: the panel hides
itself. A figure a GPU does not report (NOT_SUPPORTED) is None, and shown as a dash.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from ktt.gpu_lock import GpuHolder, holder_now

NVML_MODULE = "pynvml"  # the import name of nvidia-ml-py (BSD)


@dataclass(frozen=True)
class GpuSample:
    index: int
    name: str
    util_pct: int | None = None
    mem_used: int | None = None  # bytes
    mem_total: int | None = None
    sm_mhz: int | None = None
    temp_c: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    holder: str | None = None  # "ktt tune of problem mmul (pid 1234)", or None when free


def _holder_text(holder: GpuHolder | None) -> str | None:
    if holder is None:
        return None
    who = "".join(c if c.isprintable() else "?" for c in holder.what[:80])
    return f"{who} (pid {holder.pid})" if holder.pid else who


class GpuStatus:
    """NVML read through ``nvml`` (default: the ``pynvml`` module of nvidia-ml-py; tests pass a FAKE)."""

    def __init__(
        self,
        nvml: ModuleType | None = None,
        holder: Callable[[int, str | None], GpuHolder | None] = holder_now,
    ) -> None:
        self._nvml = nvml
        self._holder = holder
        self._open = False
        self.unavailable: str | None = None  # why there are no figures (no library, no driver, no GPU)
        self._handles: list[tuple[int, Any, str, str | None]] = []  # index, handle, name, uuid

    def _start(self) -> bool:
        if self._open:
            return True
        if self.unavailable is not None:
            return False
        try:
            nvml = self._nvml or importlib.import_module(NVML_MODULE)
        except ImportError:
            self.unavailable = "nvidia-ml-py is not installed"
            return False
        try:
            nvml.nvmlInit()
            count = nvml.nvmlDeviceGetCount()
            handles = []
            for i in range(count):
                h = nvml.nvmlDeviceGetHandleByIndex(i)
                name = nvml.nvmlDeviceGetName(h)
                uuid = self._try(nvml.nvmlDeviceGetUUID, h)
                handles.append((i, h, name.decode() if isinstance(name, bytes) else str(name),
                                uuid.decode() if isinstance(uuid, bytes) else uuid))  # fmt: skip
        except Exception as exc:  # NVMLError_LibraryNotFound, _DriverNotLoaded, ...: no GPU figures here
            self.unavailable = f"NVML: {exc}"
            return False
        if not handles:
            self.unavailable = "NVML lists no GPU"
            return False
        self._nvml, self._handles, self._open = nvml, handles, True
        return True

    @staticmethod
    def _try(fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception:  # NVMLError_NotSupported and friends: this figure is not reported
            return None

    def sample(self) -> list[GpuSample]:
        """One sample per GPU; [] when NVML cannot be used (``unavailable`` says why)."""
        if not self._start():
            return []
        nvml, t = self._nvml, self._try
        out = []
        for index, h, name, uuid in self._handles:
            util = t(nvml.nvmlDeviceGetUtilizationRates, h)
            mem = t(nvml.nvmlDeviceGetMemoryInfo, h)
            power = t(nvml.nvmlDeviceGetPowerUsage, h)
            limit = t(nvml.nvmlDeviceGetEnforcedPowerLimit, h)
            out.append(GpuSample(
                index=index, name=name,
                util_pct=getattr(util, "gpu", None),
                mem_used=getattr(mem, "used", None), mem_total=getattr(mem, "total", None),
                sm_mhz=t(nvml.nvmlDeviceGetClockInfo, h, nvml.NVML_CLOCK_SM),
                temp_c=t(nvml.nvmlDeviceGetTemperature, h, nvml.NVML_TEMPERATURE_GPU),
                power_w=power / 1000 if isinstance(power, int | float) else None,
                power_limit_w=limit / 1000 if isinstance(limit, int | float) else None,
                holder=_holder_text(self._holder(index, uuid)),
            ))  # fmt: skip
        return out

    def close(self) -> None:
        if self._open:
            self._open = False
            self._try(self._nvml.nvmlShutdown)
