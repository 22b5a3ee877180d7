"""Compile CUDA C++ to a cubin with NVRTC (through ``cuda.core``) and map its messages to lines.

Always a cubin for the exact arch: PTX from an NVRTC newer than the driver does not load.
The program is named by a path inside the work directory, next to a freshly generated
``inputs.hpp``: NVRTC searches the source's own directory first, so a stale header in the
problem directory (or the current directory) can never win.
"""

from __future__ import annotations

import io
import re
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path

from cuda.core import Program, ProgramOptions

from ktt.csource import global_function_lines
from ktt.expressions import Number

STD = "c++17"


@dataclass(frozen=True)
class CompileDiagnostic:
    file: str
    line: int | None
    column: int | None
    severity: str  # error | warning | note
    message: str


@dataclass(frozen=True)
class CompileRequest:
    """Everything that decides the cubin; the cache key is computed from it (see compile_cache)."""

    source: str
    program_path: str  # where NVRTC believes the source lives (inside the work dir)
    display_name: str  # what the user calls the file in messages ("kernels.cu")
    arch: str
    defines: tuple[tuple[str, str], ...]
    include_dirs: tuple[str, ...]
    options: tuple[str, ...] = ()  # spec compiler_options, already whitelisted
    header_texts: tuple[tuple[str, str], ...] = ()  # (name, text) of local headers; for the key only


@dataclass
class CompileOutput:
    ok: bool
    cubin: bytes | None
    diagnostics: list[CompileDiagnostic] = field(default_factory=list)
    log: str = ""
    seconds: float = 0.0
    cached: bool = False
    kernels: tuple[str, ...] = ()

    @property
    def errors(self) -> list[CompileDiagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]

    def first_error(self) -> str | None:
        errs = self.errors
        if not errs:
            return None
        d = errs[0]
        where = f"{d.file}:{d.line}: " if d.line else f"{d.file}: "
        return f"{where}{d.message}"


def macro_value(value: Number | str) -> str:
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, float):
        text = repr(value)
        return text if ("." in text or "e" in text or "n" in text) else f"{text}.0"
    return str(value)


def define_pairs(*maps: dict[str, Number | str]) -> tuple[tuple[str, str], ...]:
    merged: dict[str, str] = {}
    for m in maps:
        for k, v in m.items():
            merged[k] = macro_value(v)
    return tuple(sorted(merged.items()))


def _program_options(req: CompileRequest) -> ProgramOptions:
    kwargs: dict = {
        "name": req.program_path,
        "arch": req.arch,
        "std": STD,
        "include_path": list(req.include_dirs),
    }
    if req.defines:
        kwargs["define_macro"] = [(k, v) for k, v in req.defines]
    ptxas: list[str] = []
    for opt in req.options:
        if opt in ("-lineinfo", "--generate-line-info"):
            kwargs["lineinfo"] = True
        elif m := re.fullmatch(r"--?maxrregcount=(\d+)", opt):
            kwargs["max_register_count"] = int(m.group(1))
        elif m := re.fullmatch(r"(?:-Xptxas=|--ptxas-options=)(.*)", opt):
            ptxas += [p for p in m.group(1).split(",") if p]
        elif opt == "-default-device":
            kwargs["device_as_default_execution_space"] = True
        elif opt == "--extra-device-vectorization":
            kwargs["extra_device_vectorization"] = True
        elif opt in ("-restrict", "--restrict"):
            kwargs["restrict"] = True
        elif opt in ("-dopt=on", "-dopt=off"):
            kwargs["device_code_optimize"] = opt.endswith("on")
    if ptxas:
        kwargs["ptxas_options"] = ptxas
    return ProgramOptions(**kwargs)


def compile_cubin(req: CompileRequest) -> CompileOutput:
    """Compile one request with NVRTC. Never raises for a compile error: it is in the output."""
    start = time.perf_counter()
    log = io.StringIO()
    try:
        program = Program(req.source, "c++", _program_options(req))
        obj = program.compile("cubin", logs=log)
        cubin = bytes(obj.code)
        text = _clean_log(log.getvalue())
        ok = True
    except Exception as exc:  # NVRTCError carries the log in its message
        text = _clean_log(str(exc))
        cubin = None
        ok = False
    seconds = time.perf_counter() - start
    diags = parse_log(text, req)
    if not ok and not any(d.severity == "error" for d in diags):
        diags.append(CompileDiagnostic(req.display_name, None, None, "error", text.strip() or "compilation failed"))
    kernels = tuple(sorted(cubin_kernels(cubin))) if cubin else ()
    return CompileOutput(ok, cubin, diags, text, seconds, False, kernels)


def _clean_log(text: str) -> str:
    text = text.replace("\x00", "")
    marker = "compilation log:"
    if marker in text:
        text = text.split(marker, 1)[1]
    return text.strip("\n ")


_DIAG = re.compile(
    r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<sev>catastrophic error|error|warning|remark|note)"
    r"(?: #(?P<num>[\w-]+))?: (?P<msg>.*)$"
)
_PTXAS = re.compile(r"^(?P<tool>ptxas|nvlink|nvvm)\s*(?P<sev>error|warning|fatal|info)\s*:\s*(?P<msg>.*)$")
_ENTRY = re.compile(r"(?:Entry function|Function properties for|function) '(?P<name>\w+)'")




def kernel_definition_lines(source: str) -> dict[str, int]:
    """Line of each ``__global__`` function's name in the source (for ptxas messages and checks).

    One linear pass (ktt.csource): the source is the model's, and the regexes used before took
    time that grew with the square of its length.
    """
    return global_function_lines(source)


def parse_log(text: str, req: CompileRequest) -> list[CompileDiagnostic]:
    """NVRTC / ptxas messages as diagnostics, with files named as the user knows them."""
    names = {req.program_path: req.display_name}
    base = Path(req.program_path).parent
    names[str(base / "inputs.hpp")] = "inputs.hpp"
    lines = text.splitlines()
    diags: list[CompileDiagnostic] = []
    kernel_lines: dict[str, int] | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _DIAG.match(line)
        if m:
            sev = m.group("sev")
            severity = "error" if "error" in sev else ("warning" if sev == "warning" else "note")
            column = None
            # NVRTC prints the source line and a caret line under it.
            if i + 2 < len(lines) and lines[i + 2].strip() == "^":
                column = max(1, lines[i + 2].index("^") - 1)
                i += 2
            file = m.group("file")
            display = names.get(file) or Path(file).name
            diags.append(CompileDiagnostic(display, int(m.group("line")), column, severity, m.group("msg").strip()))
        else:
            p = _PTXAS.match(line.strip())
            if p:
                sev = p.group("sev")
                severity = "error" if sev in ("error", "fatal") else ("warning" if sev == "warning" else "note")
                if severity != "note":
                    msg = p.group("msg").strip()
                    target_line = None
                    e = _ENTRY.search(msg)
                    if e:
                        if kernel_lines is None:
                            kernel_lines = kernel_definition_lines(req.source)
                        target_line = kernel_lines.get(e.group("name"))
                    diags.append(CompileDiagnostic(req.display_name, target_line, None, severity, f"ptxas: {msg}"))
        i += 1
    return diags


def cubin_kernels(cubin: bytes | None) -> set[str]:
    """Names of the kernels (entry functions) in a cubin, read from its ELF section names."""
    if not cubin or cubin[:4] != b"\x7fELF" or cubin[4] != 2:
        return set()
    try:
        shoff = struct.unpack_from("<Q", cubin, 0x28)[0]
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
        str_hdr = shoff + shstrndx * shentsize
        str_off = struct.unpack_from("<Q", cubin, str_hdr + 0x18)[0]
        names: set[str] = set()
        for k in range(shnum):
            hdr = shoff + k * shentsize
            name_off = struct.unpack_from("<I", cubin, hdr)[0]
            start = str_off + name_off
            end = cubin.index(b"\0", start)
            section = cubin[start:end].decode(errors="replace")
            if section.startswith(".text."):
                names.add(section[len(".text.") :])
        return names
    except (struct.error, ValueError):
        return set()
