"""What the machine offers: CUDA headers for NVRTC, the NVRTC version, the GPU's architecture.

Nothing here creates a CUDA context; the arch query only initialises the driver, so
``ktt check`` runs the same on a machine with no GPU (it falls back to the problem's
``gpu.compute_capability``, then sm_90).

The compile target follows from the GPU's arch (``compile_target``): a cubin is timed on the
device it was built for, so on an architecture that has an arch-specific variant (9.0 and
newer: sm_90a, sm_100a, ...) ktt builds for that variant, which is what wgmma, setmaxnreg and
the other arch-specific instructions need; ``arch:`` in tuning.yaml, else ``gpu.arch`` in
problem.yaml, chooses another target, which must be able to run on the GPU.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

DEFAULT_ARCH = "sm_90"
_ARCH = re.compile(r"^(?:sm_|compute_)?(\d+)([af]?)\Z")
FIRST_ARCH_SPECIFIC = 90  # sm_90a is the first arch-specific target


def normalize_arch(value: str) -> str:
    """'sm_90', '90', '9.0', 'compute_90a' -> 'sm_90' / 'sm_90a' ('a': arch-specific, 'f': family)."""
    text = value.strip().lower()
    m = re.fullmatch(r"(\d+)\.(\d)([af]?)", text)
    if m:
        return f"sm_{m.group(1)}{m.group(2)}{m.group(3)}"
    m = _ARCH.match(text)
    if not m or len(m.group(1)) < 2:
        raise ValueError(f"{value!r} is not a GPU architecture like sm_90 or sm_90a")
    return f"sm_{m.group(1)}{m.group(2)}"


def _split(arch: str) -> tuple[int, int, str]:
    """'sm_90a' -> (9, 0, 'a')."""
    m = _ARCH.match(arch)
    assert m is not None, arch
    digits = m.group(1)
    return int(digits[:-1]), int(digits[-1]), m.group(2)


def arch_specific(arch: str) -> str:
    """The arch-specific variant of a GPU's arch where one exists: sm_90 -> sm_90a; sm_86 stays."""
    major, minor, suffix = _split(arch)
    if suffix or major * 10 + minor < FIRST_ARCH_SPECIFIC:
        return arch
    return f"{arch}a"


def runs_on(target: str, device: str) -> str | None:
    """Why a cubin for ``target`` cannot run on a GPU of arch ``device``, or None when it can.

    A cubin runs on its own major version at the same or a higher minor; an arch-specific
    one ('a') only on exactly its arch; a family one ('f') on its major at the same or a
    higher minor."""
    tmaj, tmin, tsuf = _split(target)
    dmaj, dmin, _ = _split(device)
    if tsuf == "a" and (tmaj, tmin) != (dmaj, dmin):
        return f"{target} is arch-specific: its cubin runs only on sm_{tmaj}{tmin} GPUs, this one is {device}"
    if tmaj != dmaj or tmin > dmin:
        return f"a cubin for {target} does not run on a {device} GPU (same major version, minor <= {dmin} needed)"
    return None


def compile_target(device_arch: str, spec_arch: str | None, problem_arch: str | None) -> tuple[str, str]:
    """(the arch to compile for, where it came from): tuning.yaml's arch:, problem.yaml's
    gpu.arch, else the arch-specific variant of the GPU's arch."""
    if spec_arch:
        return spec_arch, "tuning.yaml arch"
    if problem_arch:
        return problem_arch, "problem.yaml gpu.arch"
    target = arch_specific(normalize_arch(device_arch))
    return target, "the GPU's arch-specific variant" if target != device_arch else "the GPU's arch"


@functools.cache
def cuda_include_dirs() -> tuple[str, ...]:
    """Directories holding the CUDA runtime headers and CCCL (cuda/std/...), best first."""
    found: list[str] = []

    def add(path: str | os.PathLike[str] | None) -> None:
        if path and os.path.isdir(path) and str(path) not in found:
            found.append(str(path))

    with contextlib.suppress(Exception):
        import cuda.pathfinder as pathfinder

        for lib in ("cccl", "cudart"):
            with contextlib.suppress(Exception):
                add(pathfinder.find_nvidia_header_directory(lib))
    roots = [os.environ.get(k) for k in ("CUDA_HOME", "CUDA_PATH")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append(str(Path(nvcc).resolve().parent.parent))
    roots += ["/usr/local/cuda", *sorted(glob.glob("/usr/local/cuda-*"), reverse=True)]
    for root in roots:
        if root:
            add(os.path.join(root, "include", "cccl"))
            add(os.path.join(root, "include"))
            add(os.path.join(root, "targets", "x86_64-linux", "include"))
    return tuple(found)


@functools.cache
def nvrtc_version() -> str:
    try:
        from cuda.bindings import nvrtc

        _, major, minor = nvrtc.nvrtcVersion()
        return f"{major}.{minor}"
    except Exception:  # pragma: no cover - NVRTC missing entirely
        return "unknown"


@dataclass(frozen=True)
class DeviceInfo:
    ordinal: int
    name: str
    arch: str
    uuid: str | None = None  # "GPU-xxxxxxxx-...", as nvidia-smi prints it; names the GPU lock (ktt.gpu_lock)


def _uuid_text(raw: bytes) -> str | None:
    if len(raw) != 16:
        return None
    h = raw.hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def query_device(ordinal: int = 0) -> DeviceInfo | None:
    """The GPU's name and arch, or None when there is no driver or no such device."""
    try:
        from cuda.bindings import driver

        (err,) = driver.cuInit(0)
        if int(err) != 0:
            return None
        err, count = driver.cuDeviceGetCount()
        if int(err) != 0 or ordinal >= count:
            return None
        err, dev = driver.cuDeviceGet(ordinal)
        attr = driver.CUdevice_attribute
        _, major = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
        _, minor = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
        _, raw = driver.cuDeviceGetName(256, dev)
        name = bytes(raw).split(b"\0", 1)[0].decode(errors="replace")
        uuid = None
        with contextlib.suppress(Exception):
            err, raw_uuid = driver.cuDeviceGetUuid(dev)
            if int(err) == 0:
                uuid = _uuid_text(bytes(raw_uuid.bytes))
        return DeviceInfo(ordinal, name, f"sm_{major}{minor}", uuid)
    except Exception:
        return None


def gpu_count() -> int:
    try:
        from cuda.bindings import driver

        (err,) = driver.cuInit(0)
        if int(err) != 0:
            return 0
        err, count = driver.cuDeviceGetCount()
        return int(count) if int(err) == 0 else 0
    except Exception:
        return 0


def resolve_arch(explicit: str | None, compute_capability: str | None, ordinal: int = 0) -> tuple[str, str]:
    """(arch, where it came from): --arch, else the device, else the problem, else sm_90."""
    if explicit:
        return normalize_arch(explicit), "--arch"
    info = query_device(ordinal)
    if info is not None:
        return info.arch, f"device {ordinal} ({info.name})"
    if compute_capability:
        return normalize_arch(compute_capability), "problem gpu.compute_capability"
    return DEFAULT_ARCH, "default"
