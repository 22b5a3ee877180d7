"""What a compiled kernel executes: its instruction mix, counted without a GPU.

A kernel's registers and shared memory say how many warps fit; its instructions say what
each warp does. A micro-optimisation (``sqrt.approx`` instead of IEEE ``sqrtf``, a float4
load instead of four, an unrolled inner loop) shows up here as counts, before any timing.

Two routes, the first that works:

1. **SASS** (the machine code) from the cubin NVRTC built, through ``nvdisasm`` (or
   ``cuobjdump -sass``): found on ``PATH``, under ``CUDA_HOME`` / ``CUDA_PATH`` /
   ``/usr/local/cuda``, or in the ``nvidia-cuda-nvdisasm`` pip wheel (``pip install
   nvidia-cuda-nvdisasm``). Counts are of static instructions: FFMA, MUFU (the
   special-function unit: RSQ, SQRT, EX2, ...), LDG/STG, LDS/STS, BAR, tensor-core ops...
2. **PTX** (NVRTC's virtual ISA, from a second NVRTC compile of the same request) where no
   disassembler is installed: the same categories, counted before ptxas's optimisation and
   register allocation (a close proxy: unrolling happens in NVVM, before PTX).

With neither (no disassembler, and the PTX compile failed), the mix is absent and the check
says why. Each kernel also gets the mix of its main loop: of the loops found from backward
branches, the one whose own body (its nested loops' instructions left out) holds the most
arithmetic — in a tiled kernel the unrolled compute loop, not the tile-load loop.

The disassembler runs as a subprocess on a temporary copy of the cubin, in its own process
group with an allow-listed environment, with a time limit and a cap on what it prints
(``disassemble``). ``nvidia-cuda-nvdisasm`` is one of cacao's dependencies, so the SASS route
is the normal one; PTX is for an install without it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from ktt.procs import kill_group, spawn

DISASSEMBLE_TIMEOUT_S = 20.0
MAX_LISTING_BYTES = 16 * 1024 * 1024  # a disassembly above this is cut (the counts then cover its head)
MAX_ERROR_BYTES = 64 * 1024  # the tail kept of what the tool says on stderr (its last line is the message)

# The categories shown, in this order. Each SASS opcode (its base, before the first '.') or PTX
# instruction maps to one of them; what maps to none is counted only in the total.
ORDER = (
    "FFMA", "FMUL", "FADD", "FP64", "FP16x2", "MUFU", "INT", "LDG", "STG", "LDS", "STS", "LDL/STL",
    "cp.async", "TMA", "BAR", "mbarrier", "SHFL", "ATOM", "tensor",
)  # fmt: skip
MATH = {"FFMA", "FMUL", "FADD", "FP64", "FP16x2", "MUFU", "tensor"}

SASS_CATEGORY = {
    "FFMA": "FFMA", "FFMA2": "FFMA", "FMUL": "FMUL", "FMUL2": "FMUL", "FADD": "FADD", "FADD2": "FADD",
    "DFMA": "FP64", "DMUL": "FP64", "DADD": "FP64",
    "HFMA2": "FP16x2", "HMUL2": "FP16x2", "HADD2": "FP16x2",
    "MUFU": "MUFU",
    "IMAD": "INT", "IADD3": "INT", "IADD": "INT", "LEA": "INT", "LOP3": "INT", "SHF": "INT", "IMNMX": "INT",
    "IABS": "INT", "ISETP": "INT", "IMUL": "INT", "VIADD": "INT", "VIMNMX": "INT",
    "LDG": "LDG", "STG": "STG", "LDS": "LDS", "LDSM": "LDS", "STS": "STS", "STSM": "STS",
    "LDL": "LDL/STL", "STL": "LDL/STL",
    "LDGSTS": "cp.async", "LDGDEPBAR": "cp.async",
    "UTMALDG": "TMA", "UTMASTG": "TMA", "UBLKCP": "TMA", "UTMAPF": "TMA", "UBLKRED": "TMA",
    "BAR": "BAR", "SYNCS": "mbarrier",
    "SHFL": "SHFL", "ATOM": "ATOM", "ATOMG": "ATOM", "ATOMS": "ATOM", "RED": "ATOM", "REDG": "ATOM",
    "HMMA": "tensor", "IMMA": "tensor", "DMMA": "tensor", "BMMA": "tensor", "HGMMA": "tensor",
    "IGMMA": "tensor", "QGMMA": "tensor", "BGMMA": "tensor", "UTCHMMA": "tensor", "UTCQMMA": "tensor",
    "UTCIMMA": "tensor", "UTCMMA": "tensor", "OMMA": "tensor", "QMMA": "tensor",
}  # fmt: skip


@dataclass
class Mix:
    """Counts of one stretch of code (a kernel, or its main loop)."""

    total: int = 0
    counts: Counter[str] = field(default_factory=Counter)
    # "category:variant", e.g. "MUFU:MUFU.RSQ", "LDS:LDS.128", "other:sqrt.rn.f32 (IEEE: ...)"
    detail: Counter[str] = field(default_factory=Counter)

    def add(self, category: str | None, detail: str | None) -> None:
        self.total += 1
        if category is not None:
            self.counts[category] += 1
        if detail is not None:
            self.detail[f"{category or 'other'}:{detail}"] += 1

    def math(self) -> int:
        return sum(n for c, n in self.counts.items() if c in MATH)


@dataclass
class KernelListing:
    """One kernel's instructions in order: (category, detail, opcode) plus its labels and branches."""

    name: str
    ops: list[tuple[str | None, str | None]] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)  # label -> index of the next instruction
    branches: list[tuple[int, str]] = field(default_factory=list)  # (index, target label)


@dataclass
class LoopMix:
    first: int  # instruction indices of the loop's head and its backward branch
    last: int
    own: Mix  # its body without the instructions of loops nested in it
    nested: int  # instructions in nested loops


@dataclass
class KernelMixResult:
    name: str
    mix: Mix
    loop: LoopMix | None


# -- finding a disassembler ------------------------------------------------------------------


def _wheel_tool(name: str) -> str | None:
    """The tool from an ``nvidia-cuda-nvdisasm`` / ``nvidia-cuda-cuobjdump`` wheel, if installed."""
    with contextlib.suppress(Exception):
        spec = importlib.util.find_spec("nvidia")
        for root in spec.submodule_search_locations or [] if spec else []:
            for sub in ("cu13/bin", "cu12/bin", f"cuda_{name}/bin"):
                path = Path(root) / sub / name
                if path.is_file() and os.access(path, os.X_OK):
                    return str(path)
    return None


def find_tool(name: str) -> str | None:
    """``nvdisasm`` or ``cuobjdump``: on PATH, in the CUDA toolkit, or from its pip wheel."""
    found = shutil.which(name)
    if found:
        return found
    for var in ("CUDA_HOME", "CUDA_PATH"):
        base = os.environ.get(var)
        if base and (Path(base) / "bin" / name).is_file():
            return str(Path(base) / "bin" / name)
    default = Path("/usr/local/cuda/bin") / name
    if default.is_file():
        return str(default)
    return _wheel_tool(name)


def disassembler() -> tuple[str, list[str]] | None:
    """(tool name, argv prefix) of the first disassembler found, or None.

    ``KTT_DISASSEMBLER``: ``none`` uses none (the PTX route), a path uses that nvdisasm."""
    chosen = os.environ.get("KTT_DISASSEMBLER", "").strip()
    if chosen.lower() == "none":
        return None
    if chosen:
        return (
            ("cuobjdump", [chosen, "-sass"])
            if Path(chosen).name.startswith("cuobjdump")
            else ("nvdisasm", [chosen, "-c"])
        )
    nvdisasm = find_tool("nvdisasm")
    if nvdisasm:
        return "nvdisasm", [nvdisasm, "-c"]
    cuobjdump = find_tool("cuobjdump")
    if cuobjdump:
        return "cuobjdump", [cuobjdump, "-sass"]
    return None


class DisassemblyError(Exception):
    """The disassembler failed or is missing; the message says which (one line)."""


def disassemble(cubin: bytes, timeout_s: float = DISASSEMBLE_TIMEOUT_S) -> str:
    """The SASS listing of a cubin; DisassemblyError when it cannot be had.

    The tool runs in its own process group with an allow-listed environment (PATH and
    LC_ALL only), dies with the thread that waits for it, is killed at ``timeout_s``, and
    what it prints is read as it comes, at most MAX_LISTING_BYTES (the counts then cover
    the listing's head; the rest is not read and the tool is stopped)."""
    tool = disassembler()
    if tool is None:
        raise DisassemblyError(
            "no nvdisasm or cuobjdump found (pip install nvidia-cuda-nvdisasm, or the CUDA toolkit)"
            if os.environ.get("KTT_DISASSEMBLER", "").strip().lower() != "none"
            else "KTT_DISASSEMBLER=none"
        )
    name, argv = tool
    with tempfile.TemporaryDirectory(prefix="ktt-sass-") as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}
        try:
            proc = spawn([*argv, str(path)], env=env, text=False, die_with_this_thread=True)
        except OSError as exc:
            raise DisassemblyError(f"{name} could not run: {exc.strerror or exc}") from None
        out = _CappedPipe(proc.stdout, MAX_LISTING_BYTES).start()
        err = _CappedPipe(proc.stderr, MAX_ERROR_BYTES, tail=True).start()
        deadline = time.monotonic() + timeout_s
        while proc.poll() is None and not out.full.is_set() and time.monotonic() < deadline:
            out.full.wait(0.02)
        timed_out = proc.poll() is None and not out.full.is_set()
        code = proc.returncode if proc.poll() is not None else kill_group(proc, grace_s=0.5)
        out.join()
        err.join()
    if timed_out:
        raise DisassemblyError(f"{name} did not finish within {timeout_s:g} s")
    if code != 0 and not out.full.is_set():
        tail = bytes(err.data).decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
        raise DisassemblyError(f"{name} failed (exit {code}): {tail[0][:200]}")
    return bytes(out.data).decode(errors="replace")


class _CappedPipe:
    """Reads one of a child's pipes in a thread, keeping at most ``cap`` bytes: the head (``full``
    is set once more came; the caller then stops the child and the pipe is read no further) or,
    with ``tail``, the last ``cap`` bytes of all it printed (read to its end, so the child never
    blocks on a full pipe)."""

    def __init__(self, stream: IO[bytes] | None, cap: int, *, tail: bool = False) -> None:
        self.stream, self.cap, self.tail = stream, cap, tail
        self.data = bytearray()
        self.full = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> _CappedPipe:
        self.thread.start()
        return self

    def _run(self) -> None:
        if self.stream is None:
            return
        with contextlib.suppress(OSError, ValueError):
            while chunk := self.stream.read1(65536):  # type: ignore[attr-defined]
                if self.tail:
                    self.data = (self.data + chunk)[-self.cap :]
                    continue
                room = self.cap - len(self.data)
                self.data += chunk[:room]
                if len(chunk) > room:
                    self.full.set()
                    return

    def join(self) -> None:
        self.thread.join(5.0)
        with contextlib.suppress(OSError):
            if self.stream is not None:
                self.stream.close()


# -- parsing --------------------------------------------------------------------------------

_SASS_FUNC = re.compile(r"^\s*(?:\.text\.([A-Za-z_$][\w$]*):|Function : ([A-Za-z_$][\w$]*))")
_SASS_LABEL = re.compile(r"^\s*(\.L_x_\d+):")
_SASS_INSN = re.compile(
    r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:\{\s*)?(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)((?:\.[A-Za-z0-9_]+)*)"
)
_SASS_TARGET = re.compile(r"`\((\.L_x_\d+)\)")


def parse_sass(listing: str) -> list[KernelListing]:
    kernels: list[KernelListing] = []
    current: KernelListing | None = None
    for line in listing.splitlines():
        f = _SASS_FUNC.match(line)
        if f:
            name = f.group(1) or f.group(2)
            if current is None or current.name != name:
                current = KernelListing(name)
                kernels.append(current)
            continue
        if current is None:
            continue
        lab = _SASS_LABEL.match(line)
        if lab:
            current.labels[lab.group(1)] = len(current.ops)
            continue
        m = _SASS_INSN.match(line)
        if not m:
            continue
        opcode, mods = m.group(1), m.group(2)
        category = SASS_CATEGORY.get(opcode)
        if opcode == "HFMA2" and ".MMA" in mods and "RZ, RZ" in line.replace("-RZ", "RZ"):
            category = None  # ptxas's idiom for setting a register to zero, not half arithmetic
        detail = None
        if opcode == "MUFU" or category in ("tensor", "TMA") or (category in ("LDG", "STG", "LDS", "STS") and mods):
            detail = _sass_detail(opcode, mods)
            detail = None if detail == opcode and opcode != "MUFU" else detail
        if opcode in ("BRA", "BRX", "JMP") and (t := _SASS_TARGET.search(line)):
            current.branches.append((len(current.ops), t.group(1)))
        current.ops.append((category, detail))
    return kernels


def _sass_detail(opcode: str, mods: str) -> str:
    """``MUFU.RSQ``; a memory op with its width (``LDG.128``); a tensor op with its shape."""
    parts = [p for p in mods.split(".") if p]
    if opcode == "MUFU":
        return f"MUFU.{parts[0]}" if parts else "MUFU"
    shape = next((p for p in parts if re.fullmatch(r"\d+[xX]\d+[xX]\d+", p)), None)
    if shape is not None:  # a tensor-core op: its shape and types (HGMMA.64x128x16.F32.BF16)
        return ".".join([opcode, shape, *[p for p in parts if p != shape][:2]])
    width = next((p for p in parts if p in ("64", "128", "U8", "S8", "U16", "S16")), None)
    return f"{opcode}.{width}" if width is not None else opcode


_PTX_FUNC = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.entry\s+([A-Za-z_$][\w$]*)")
_PTX_LABEL = re.compile(r"^\s*(\$?[A-Za-z_][\w$]*):\s*$")
_PTX_INSN = re.compile(r"^\s*(?:@!?%\w+\s+)?([a-z][a-z0-9_]*)((?:\.[a-z0-9_:]+)*)\s*(.*)$")


def _ptx_category(op: str, mods: str) -> tuple[str | None, str | None]:
    parts = [p for p in mods.split(".") if p]
    f32 = "f32" in parts
    f64 = "f64" in parts
    half = any(p in ("f16", "f16x2", "bf16", "bf16x2") for p in parts)
    if op in ("mma", "wmma", "wgmma", "tcgen05"):
        return "tensor", f"{op}.{'.'.join(parts[:2])}" if parts else op
    if op in ("ex2", "lg2", "sin", "cos", "rsqrt", "tanh") or (op in ("rcp", "sqrt") and "approx" in parts):
        return "MUFU", f"{op}{mods}"
    if op in ("sqrt", "div", "rcp") and f32 and "rn" in parts:
        return None, f"{op}{mods} (IEEE: a multi-instruction sequence)"
    if f64 and op in ("fma", "mul", "add", "sub", "mad"):
        return "FP64", None
    if half and op in ("fma", "mul", "add", "sub"):
        return "FP16x2", None
    if f32 and op in ("fma", "mad"):
        return "FFMA", None
    if f32 and op == "mul":
        return "FMUL", None
    if f32 and op in ("add", "sub"):
        return "FADD", None
    if op in ("ld", "st", "ldu"):
        space = next((p for p in parts if p in ("global", "shared", "local", "param", "const")), "generic")
        vec = next((p for p in parts if p in ("v2", "v4", "v8")), None)
        detail = None
        if space == "global":
            cat = "LDG" if op != "st" else "STG"
        elif space == "shared":
            cat = "LDS" if op != "st" else "STS"
        elif space == "local":
            cat = "LDL/STL"
        else:
            return None, None
        if vec:
            detail = f"{cat}.{vec}"
        return cat, detail
    if op == "cp":
        if "bulk" in parts:
            return "TMA", f"cp{mods}"[:60]
        if "async" in parts:
            return "cp.async", None
    if op in ("bar", "barrier"):
        return "BAR", None
    if op == "mbarrier":
        return "mbarrier", None
    if op == "shfl":
        return "SHFL", None
    if op in ("atom", "red"):
        return "ATOM", None
    if op in ("mad", "mul", "add", "sub", "shl", "shr", "and", "or", "xor", "min", "max", "setp", "selp", "neg", "abs"):
        return "INT", None
    return None, None


def parse_ptx(listing: str) -> list[KernelListing]:
    kernels: list[KernelListing] = []
    current: KernelListing | None = None
    for raw in listing.splitlines():
        line = raw.split("//", 1)[0]
        f = _PTX_FUNC.match(line)
        if f:
            current = KernelListing(f.group(1))
            kernels.append(current)
            continue
        if current is None or not line.strip() or line.strip() in ("{", "}", ")", "("):
            continue
        lab = _PTX_LABEL.match(line)
        if lab:
            current.labels[lab.group(1)] = len(current.ops)
            continue
        stripped = line.strip()
        if stripped.startswith(".") or stripped.startswith("{") or stripped.startswith("}"):
            continue
        m = _PTX_INSN.match(line)
        if not m:
            continue
        op, mods, rest = m.group(1), m.group(2), m.group(3)
        if op == "bra":
            target = rest.strip().rstrip(";").strip()
            current.branches.append((len(current.ops), target))
        current.ops.append(_ptx_category(op, mods))
    return kernels


# -- counting ---------------------------------------------------------------------------------


def _count(ops: Iterable[tuple[str | None, str | None]]) -> Mix:
    mix = Mix()
    for category, detail in ops:
        mix.add(category, detail)
    return mix


def main_loop(k: KernelListing) -> LoopMix | None:
    """The loop whose own body (nested loops left out) holds the most arithmetic (ties: the
    most instructions); None when the kernel has no backward branch."""
    # A branch to itself is not a loop (the trap nvdisasm shows after a kernel's EXIT).
    loops = sorted(
        {(k.labels[t], i) for i, t in k.branches if t in k.labels and k.labels[t] < i}, key=lambda x: (x[0], -x[1])
    )
    best: tuple[tuple[int, int], LoopMix] | None = None
    for first, last in loops:
        inner = [(a, b) for a, b in loops if first <= a and b <= last and (a, b) != (first, last)]
        covered: set[int] = set()
        for a, b in inner:
            covered.update(range(a, b + 1))
        own = _count(k.ops[i] for i in range(first, last + 1) if i not in covered)
        loop = LoopMix(first, last, own, len(covered))
        rank = (own.math(), own.total)
        if best is None or rank > best[0]:
            best = (rank, loop)
    if best is None or best[1].own.math() == 0:
        return None  # no loop does arithmetic (loops unrolled away, or only copy loops)
    return best[1]


def kernel_mixes(kernels: list[KernelListing]) -> list[KernelMixResult]:
    return [KernelMixResult(k.name, _count(k.ops), main_loop(k)) for k in kernels]


def sass_mix(cubin: bytes) -> list[KernelMixResult]:
    """Per kernel of a cubin, from its SASS; DisassemblyError when no disassembler can read it."""
    return kernel_mixes(parse_sass(disassemble(cubin)))


def ptx_mix(ptx: str) -> list[KernelMixResult]:
    return kernel_mixes(parse_ptx(ptx))
