"""Compile CUDA C++ to a cubin with NVRTC (through ``cuda.core``) and map its messages to lines.

Always a cubin for the exact arch: PTX from an NVRTC newer than the driver does not load.
The program is named by a path inside the work directory, next to a freshly generated
``inputs.hpp``: NVRTC searches the source's own directory first, so a stale header in the
problem directory (or the current directory) can never win.

The source is model-written: before NVRTC runs, the options are checked against a
whitelist of exact forms (no file arguments) and the includes against what the compile may
see (ktt.includes); NVRTC then runs in a thread that Landlock confines to the same view
(ktt.sandbox), with a time limit; its messages are scrubbed of secret-looking text and
capped (ktt.redact) before anyone, the compile cache included, sees them.

Given a precompiled-header store (``pch_dir``), a kernel that starts with heavy includes is
compiled against a precompiled header made once (ktt.pch), through NVRTC's own API
(cuda.core 1.2 fails on the status of a compile that creates one).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import os
import re
import resource
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path

from cuda.core import Program, ProgramOptions

from ktt import includes, pch, sandbox
from ktt.compiler_options import FLAG_OPTIONS, MAXRREG, PTXAS_PREFIX, option_problem
from ktt.csource import global_function_lines
from ktt.expressions import Number
from ktt.redact import cap, redact
from ktt.toolkit import cuda_include_dirs

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
    options: tuple[str, ...] = ()  # spec compiler_options; checked again against the whitelist here
    header_texts: tuple[tuple[str, str], ...] = ()  # (name, text) of local headers; for the key only
    # Names among ``defines`` that keep one value for the whole run (the problem's scalars): they
    # stay on the command line of a compile with a precompiled header (ktt.pch); not in the key.
    fixed_defines: tuple[str, ...] = ()
    # "cubin" (what runs), or "ptx": NVRTC's PTX for the same source and options, which
    # ktt.instruction_mix counts where no disassembler is installed (``CompileOutput.cubin``
    # then holds the PTX text).
    output: str = "cubin"


@dataclass
class CompileOutput:
    ok: bool
    cubin: bytes | None
    diagnostics: list[CompileDiagnostic] = field(default_factory=list)
    log: str = ""
    seconds: float = 0.0
    cached: bool = False
    kernels: tuple[str, ...] = ()
    timed_out: bool = False  # cut off at the time limit (never cached)
    pch: str = ""  # "used" or "created" when a precompiled header took part
    deduplicated: bool = False  # the output of an identical compile that was in flight
    out_of_memory: bool = False  # stopped at the compile's memory limit (never cached: the limit is the machine's)

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
    """The request as NVRTC options; raises ValueError for an option outside the whitelist."""
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
        problem = option_problem(opt)
        if problem is not None:
            raise ValueError(f"compiler option {opt[:80]!r}: {problem}")
        if opt in FLAG_OPTIONS:
            key, value = FLAG_OPTIONS[opt]
            kwargs[key] = value
        elif m := MAXRREG.fullmatch(opt):
            kwargs["max_register_count"] = int(m.group(1))
        elif m := PTXAS_PREFIX.fullmatch(opt):
            ptxas += [p for p in m.group(1).split(",") if p]
    if ptxas:
        kwargs["ptxas_options"] = ptxas
    return ProgramOptions(**kwargs)


# -- compiling --------------------------------------------------------------------------------
MAX_LOG_CHARS = 64 * 1024  # compiler output kept per compile (head and tail)
MAX_DIAGNOSTICS = 200
MAX_MESSAGE_CHARS = 2000
COMPILE_TIMEOUT_S = 120.0  # one compile; KTT_COMPILE_TIMEOUT_S overrides


def compile_timeout_s() -> float:
    with contextlib.suppress(ValueError):
        value = float(os.environ.get("KTT_COMPILE_TIMEOUT_S", ""))
        if 0 < value < 1e6:
            return value
    return COMPILE_TIMEOUT_S


_WARM_SOURCE = 'extern "C" __global__ void ktt_warm_up(int* p) { *p = 1; }'


@functools.cache
def warm_up(arch: str) -> None:
    """Load NVRTC's libraries (and the Python they need) before any compile runs sandboxed.

    A Landlock-restricted thread cannot read site-packages, so whatever NVRTC or cuda.core
    loads on first use (libnvrtc-builtins, error classes) is loaded here, unrestricted,
    once per process, with a trivial program on the success and the error path.
    """
    for source in (_WARM_SOURCE, "ktt_warm_up_error"):
        with contextlib.suppress(Exception):
            Program(source, "c++", ProgramOptions(arch=arch, std=STD)).compile("cubin", logs=io.StringIO())
    with contextlib.suppress(Exception):
        from cuda.bindings import nvrtc as _nvrtc_api

        _nvrtc_api.nvrtcGetPCHHeapSize()


_warm_up = warm_up  # the name used before


def _refusal(req: CompileRequest, file: str, line: int | None, message: str, start: float) -> CompileOutput:
    diag = CompileDiagnostic(file, line, None, "error", message)
    where = f"{file}({line})" if line else file
    return CompileOutput(False, None, [diag], f"{where}: error: {message}", time.perf_counter() - start)


def _view(req: CompileRequest) -> includes.IncludeView:
    return includes.include_view(os.path.dirname(req.program_path), tuple(req.include_dirs), cuda_include_dirs())


def precheck(req: CompileRequest) -> CompileOutput | None:
    """A failed output when the options or the includes are refused; None when NVRTC may run.

    Cheap after the first call for a source (memoised), so it runs before every cache
    lookup too: a refused source is never served from the cache, and refusals are not cached.
    """
    start = time.perf_counter()
    try:
        _program_options(req)
    except ValueError as exc:
        return _refusal(req, req.display_name, None, str(exc), start)
    refused = includes.refused_include(req.source, req.display_name, os.path.dirname(req.program_path), _view(req))
    if refused is not None:
        return _refusal(req, refused.file, refused.line, refused.message, start)
    return None


_FLAG_SPELLING = {
    ("lineinfo", True): "--generate-line-info",
    ("device_as_default_execution_space", True): "--device-as-default-execution-space",
    ("extra_device_vectorization", True): "--extra-device-vectorization",
    ("restrict", True): "--restrict",
}


def option_bytes(req: CompileRequest) -> list[bytes]:
    """The request's NVRTC command line, for compiles through NVRTC's API (the precompiled-header path)."""
    opts = _program_options(req)
    if hasattr(opts, "as_bytes"):
        return list(opts.as_bytes("nvrtc"))
    # A cuda.core without ProgramOptions.as_bytes: the same options, spelled as NVRTC documents them.
    out = [f"-arch={req.arch}", f"--std={STD}"]
    out += [f"--include-path={d}" for d in req.include_dirs]
    out += [f"--define-macro={k}={v}" for k, v in req.defines]
    for opt in req.options:
        if opt in FLAG_OPTIONS:
            spelling = _FLAG_SPELLING.get(FLAG_OPTIONS[opt])
            if spelling is None:  # -dopt: how this cuda.core spells it is not known here; no PCH
                raise AttributeError(f"no NVRTC spelling for {opt}")
            out.append(spelling)
        elif m := MAXRREG.fullmatch(opt):
            out.append(f"--maxrregcount={int(m.group(1))}")
        elif m := PTXAS_PREFIX.fullmatch(opt):
            out += [f"--ptxas-options={p}" for p in m.group(1).split(",") if p]
    return [o.encode() for o in out]


def _pch_options(req: CompileRequest) -> list[bytes]:
    """The request's NVRTC options with only its fixed defines (the others move into the source, ktt.pch)."""
    return option_bytes(dataclasses.replace(req, defines=tuple(d for d in req.defines if d[0] in req.fixed_defines)))


def _nvrtc_compile(source: str, name: str, options: list[bytes], heap: int) -> tuple[bytes | None, str, int | None]:
    """One compile through NVRTC's API: (cubin or None, log, PCH heap NVRTC says it needed, if it ran short)."""
    from cuda.bindings import nvrtc as api

    with contextlib.suppress(Exception):
        _, current = api.nvrtcGetPCHHeapSize()
        if current < heap:
            api.nvrtcSetPCHHeapSize(heap)
    err, prog = api.nvrtcCreateProgram(source.encode("utf-8", "surrogatepass"), name.encode(), 0, [], [])
    if err != api.nvrtcResult.NVRTC_SUCCESS:
        return None, f"nvrtcCreateProgram: {err}", None
    try:
        (result,) = api.nvrtcCompileProgram(prog, len(options), options)
        _, size = api.nvrtcGetProgramLogSize(prog)
        buf = b" " * size
        api.nvrtcGetProgramLog(prog, buf)
        log = buf.decode("utf-8", errors="replace")
        needed = None
        with contextlib.suppress(Exception):
            (status,) = api.nvrtcGetPCHCreateStatus(prog)
            if status == api.nvrtcResult.NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED:
                _, needed = api.nvrtcGetPCHHeapSizeRequired(prog)
        if result != api.nvrtcResult.NVRTC_SUCCESS:
            return None, log, needed
        _, size = api.nvrtcGetCUBINSize(prog)
        cubin = b" " * size
        api.nvrtcGetCUBIN(prog, cubin)
        return bytes(cubin), log, needed
    finally:
        api.nvrtcDestroyProgram(prog)


def _nvrtc_ptx(source: str, name: str, options: list[bytes]) -> tuple[bytes | None, str]:
    """PTX through NVRTC's API (cuda.core's PTX path asks for a driver): (PTX or None, log)."""
    from cuda.bindings import nvrtc as api

    err, prog = api.nvrtcCreateProgram(source.encode("utf-8", "surrogatepass"), name.encode(), 0, [], [])
    if err != api.nvrtcResult.NVRTC_SUCCESS:
        return None, f"nvrtcCreateProgram: {err}"
    try:
        (result,) = api.nvrtcCompileProgram(prog, len(options), options)
        _, size = api.nvrtcGetProgramLogSize(prog)
        buf = b" " * size
        api.nvrtcGetProgramLog(prog, buf)
        log = buf.decode("utf-8", errors="replace")
        if result != api.nvrtcResult.NVRTC_SUCCESS:
            return None, log
        _, size = api.nvrtcGetPTXSize(prog)
        ptx = b" " * size
        api.nvrtcGetPTX(prog, ptx)
        return bytes(ptx).rstrip(b"\0 "), log
    finally:
        api.nvrtcDestroyProgram(prog)


def virtual_arch(arch: str) -> str:
    """sm_90a -> compute_90a: the PTX target of a real one."""
    return "compute_" + arch.split("_", 1)[1] if arch.startswith("sm_") else arch


_PTX_ENTRY = re.compile(r"^\s*\.(?:visible\s+|weak\s+)?\.?entry\s+([A-Za-z_$][\w$]*)", re.MULTILINE)


_PCH_NOTE = "precompiled header"


_SUPPRESS_REMARK = "Remark: The warnings can be suppressed"
_pch_refused = False  # NVRTC refused a header in this process (its heap moved): no more tries here


def _note_pch_refused() -> None:
    global _pch_refused
    _pch_refused = True


def _without_pch_notes(log: str) -> tuple[str, bool]:
    """(the log without NVRTC's lines about the precompiled header, whether NVRTC refused it).

    Those lines are ours, not the kernel's: the model never sees them. A successful use
    says "using precompiled header file"; anything else about it (a warning that it is
    incompatible) means NVRTC parsed the includes itself.
    """
    lines = log.splitlines()
    notes = [ln for ln in lines if _PCH_NOTE in ln and "error" not in ln]
    kept = [ln for ln in lines if ln not in notes]
    refused = any(not re.search(r"(?:using|creating) precompiled header file", ln) for ln in notes)
    if refused and not any("warning" in ln.lower() for ln in kept if _SUPPRESS_REMARK not in ln):
        kept = [ln for ln in kept if _SUPPRESS_REMARK not in ln]
    return "\n".join(kept).strip("\n\x00 "), refused


def compile_cubin(req: CompileRequest, timeout_s: float | None = None, pch_dir: str | None = None) -> CompileOutput:
    """Compile one request with NVRTC. Never raises for a compile error: it is in the output.

    Before NVRTC: the options against the whitelist and the includes against the view
    (ktt.includes). NVRTC then runs in a thread restricted to that view (ktt.sandbox), and
    its log comes back scrubbed of secret-looking text and capped. ``pch_dir``: the store
    of precompiled headers this compile may use or add to (ktt.pch).
    """
    start = time.perf_counter()
    refused = precheck(req)
    if refused is not None:
        return refused
    options = _program_options(req)
    view = _view(req)
    warm_up(req.arch)
    plan = None
    ptx = req.output == "ptx"
    if pch_dir and not _pch_refused and not ptx:
        moved = tuple(d for d in req.defines if d[0] not in req.fixed_defines)
        with contextlib.suppress(AttributeError):  # a cuda.core without ProgramOptions.as_bytes: no PCH
            plan = pch.plan(req.source, moved, req.header_texts, req.arch, _pch_options(req), pch_dir)
    box = view.sandbox_view()
    limit = timeout_s or compile_timeout_s()

    def ordinary() -> tuple[bytes | None, str]:
        if ptx:
            virtual = dataclasses.replace(req, arch=virtual_arch(req.arch))
            return _nvrtc_ptx(req.source, req.program_path, option_bytes(virtual))
        log = io.StringIO()
        try:
            obj = Program(req.source, "c++", options).compile("cubin", logs=log)
            return bytes(obj.code), log.getvalue()
        except Exception as exc:  # NVRTCError carries the log in its message
            return None, str(exc)

    def create() -> tuple[bytes | None, str, int | None]:
        assert plan is not None
        opts = [*_pch_options(req), f"--create-pch={plan.tmp}".encode()]
        return _nvrtc_compile(pch.header_only(plan), req.program_path, opts, plan.heap)

    refused = [False]

    def with_pch() -> tuple[bytes | None, str]:
        assert plan is not None
        opts = [*_pch_options(req), f"--use-pch={plan.path}".encode()]
        cubin, log, _ = _nvrtc_compile(plan.source, req.program_path, opts, plan.heap)
        text, refused[0] = _without_pch_notes(log)
        return cubin, text

    made = False
    try:
        if plan is not None and plan.create:
            # NVRTC's front end writes a temporary file (TMPDIR) as well as the header.
            writer = dataclasses.replace(box, writable=(os.path.dirname(plan.path),))
            needed: int | None = None
            with pch.temp_dir(plan):
                try:
                    _, _, needed = sandbox.run_restricted(create, writer, limit)
                finally:
                    made = pch.finish(plan, os.path.isfile(plan.tmp) and needed is None, needed)
            plan = pch.use_plan(plan) if made else None
        cubin: bytes | None = None
        raw = ""
        if plan is not None:
            reader = dataclasses.replace(box, files=(*box.files, plan.path), writable=(pch.scratch(plan),))
            with pch.temp_dir(plan):
                cubin, raw = sandbox.run_restricted(with_pch, reader, limit)
            if cubin is None and pch.suspicious(raw):  # the header, not the kernel, may be at fault
                plan = None
        if plan is None:
            cubin, raw = sandbox.run_restricted(ordinary, box, limit)
    except sandbox.CompileTimeout as exc:
        out = _refusal(req, req.display_name, None, f"the compiler {exc} (a kernel that makes NVRTC spin)", start)
        out.timed_out = True
        return out
    except sandbox.SandboxError as exc:  # Landlock present but refused: do not compile unconfined
        return _refusal(req, req.display_name, None, f"could not confine the compiler: {exc}", start)
    if refused[0]:
        _note_pch_refused()
    used = "" if plan is None or refused[0] else ("created" if made else "used")
    text = clean_log(raw)
    ok = cubin is not None
    seconds = time.perf_counter() - start
    diags = parse_log(text, req)
    if not ok and not any(d.severity == "error" for d in diags):
        diags.append(CompileDiagnostic(req.display_name, None, None, "error", text.strip() or "compilation failed"))
    # NVRTC's front end says "catastrophic error: out of memory"; where the allocation that failed
    # was the log's own, the only trace is a process at its address-space limit.
    oom = not ok and (_OUT_OF_MEMORY.search(text) is not None or at_memory_limit())
    if oom:
        diags.insert(0, CompileDiagnostic(req.display_name, None, None, "error", out_of_memory_message()))
    diags = [_capped(d) for d in diags[:MAX_DIAGNOSTICS]]
    if ptx:
        kernels = tuple(sorted(set(_PTX_ENTRY.findall(cubin.decode(errors="replace"))))) if cubin else ()
    else:
        kernels = tuple(sorted(cubin_kernels(cubin))) if cubin else ()
    return CompileOutput(ok, cubin, diags, text, seconds, False, kernels, pch=used, out_of_memory=oom)


_OUT_OF_MEMORY = re.compile(r"out of memory|std::bad_alloc|cannot allocate memory", re.IGNORECASE)


def at_memory_limit(fraction: float = 0.9) -> bool:
    """True when this process has mapped at least ``fraction`` of its RLIMIT_AS (never without one).

    Read only after a compile failed; a compile worker retires after an out-of-memory compile,
    so a peak reached by an earlier compile never marks a later one."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return False
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            peak = next((int(line.split()[1]) * 1024 for line in f if line.startswith("VmPeak:")), 0)
    except (OSError, ValueError, IndexError):
        return False
    return peak >= fraction * soft


def out_of_memory_message(limit_mb: int | None = None) -> str:
    """The one line a compile stopped by its memory limit reports (``limit_mb``: default, this process's RLIMIT_AS)."""
    if limit_mb is None:
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        limit_mb = 0 if soft == resource.RLIM_INFINITY else soft // (1024 * 1024)
    limit = f" of {limit_mb:,} MiB" if limit_mb else ""
    return (
        f"out of memory: the compiler reached the memory limit{limit} of a compile "
        "(KTT_COMPILE_MEMORY_MB); a kernel that expands to this much (macros, unrolling, templates) is not compiled"
    )


def _capped(d: CompileDiagnostic) -> CompileDiagnostic:
    if len(d.message) <= MAX_MESSAGE_CHARS:
        return d
    return CompileDiagnostic(d.file, d.line, d.column, d.severity, d.message[:MAX_MESSAGE_CHARS] + " [...]")


def clean_log(text: str) -> str:
    """A compiler log as ktt keeps it: NVRTC's preamble dropped, secrets scrubbed, size capped."""
    return cap(redact(_clean_log(text)), MAX_LOG_CHARS, "compiler output")


def _clean_log(text: str) -> str:
    text = text.replace("\x00", " ")
    marker = "compilation log:"
    if marker in text:
        text = text.split(marker, 1)[1]
    return text.strip("\n ")


_DIAG = re.compile(
    r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<sev>catastrophic error|error|warning|remark|note)"
    r"(?: #(?P<num>[\w-]+))?: (?P<msg>.*)$"
)
# "ptxas error : ..." and "ptxas application ptx input, line 21; error   : Instruction ... not supported on .target"
_PTXAS = re.compile(
    r"^(?P<tool>ptxas|nvlink|nvvm)(?: application ptx input, line \d+;)?\s*(?P<sev>error|warning|fatal|info)\s*:"
    r"\s*(?P<msg>.*)$"
)
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
