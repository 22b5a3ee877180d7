"""A FAKE of nvidia-ml-py's ``pynvml`` for the tests (no driver, no GPU here).

Put this folder first on PYTHONPATH (a run or app process) or pass the module to
``cacao_tui.runs.gpu_status.GpuStatus(nvml=...)``. The GPUs come from the JSON file named by
``FAKE_NVML`` (read again on every call, so a test changes the figures while the app runs),
else two fixed H200s. A GPU's entry: name, uuid, util, mem_used, mem_total (bytes), sm (MHz),
temp (°C), power and limit (mW); a missing figure raises NVMLError_NotSupported, as NVML does.
"""

from __future__ import annotations

import json
import os
from types import SimpleNamespace
from typing import Any

NVML_CLOCK_SM = 1
NVML_TEMPERATURE_GPU = 0
GIB = 1024**3
DEFAULT = [
    {"name": "NVIDIA H200 (FAKE)", "uuid": "GPU-fake-0000", "util": 87, "mem_used": 41 * GIB, "mem_total": 141 * GIB,
     "sm": 1980, "temp": 62, "power": 312_000, "limit": 700_000},
    {"name": "NVIDIA H200 (FAKE)", "uuid": "GPU-fake-0001", "util": 3, "mem_used": 1 * GIB, "mem_total": 141 * GIB,
     "sm": 345, "temp": 31, "power": 74_000, "limit": 700_000},
]  # fmt: skip
calls: list[str] = []


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):  # NVML's names, as pynvml spells them
    pass


class NVMLError_LibraryNotFound(NVMLError):
    pass


def _gpus() -> list[dict[str, Any]]:
    path = os.environ.get("FAKE_NVML")
    if path:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if data == "no library":
            raise NVMLError_LibraryNotFound("NVML Shared Library Not Found")
        return list(data)
    return DEFAULT


def _figure(handle: int, key: str) -> Any:
    gpus = _gpus()
    if handle >= len(gpus) or key not in gpus[handle]:
        raise NVMLError_NotSupported("Not Supported")
    return gpus[handle][key]


def nvmlInit() -> None:
    calls.append("init")
    _gpus()


def nvmlShutdown() -> None:
    calls.append("shutdown")


def nvmlDeviceGetCount() -> int:
    return len(_gpus())


def nvmlDeviceGetHandleByIndex(index: int) -> int:
    return index


def nvmlDeviceGetName(handle: int) -> str:
    return str(_figure(handle, "name"))


def nvmlDeviceGetUUID(handle: int) -> str:
    return str(_figure(handle, "uuid"))


def nvmlDeviceGetUtilizationRates(handle: int) -> SimpleNamespace:
    return SimpleNamespace(gpu=_figure(handle, "util"), memory=0)


def nvmlDeviceGetMemoryInfo(handle: int) -> SimpleNamespace:
    return SimpleNamespace(used=_figure(handle, "mem_used"), total=_figure(handle, "mem_total"), free=0)


def nvmlDeviceGetClockInfo(handle: int, clock: int) -> int:
    return int(_figure(handle, "sm"))


def nvmlDeviceGetTemperature(handle: int, sensor: int) -> int:
    return int(_figure(handle, "temp"))


def nvmlDeviceGetPowerUsage(handle: int) -> int:
    return int(_figure(handle, "power"))


def nvmlDeviceGetEnforcedPowerLimit(handle: int) -> int:
    return int(_figure(handle, "limit"))
