"""Prove a loaded problem will run, without a GPU and without running anything of it but ref.py's import.

``--check`` calls this after the loader (which has already checked every data file and
resolved every case): the cuda reference is compiled with NVRTC for every shape, a cpu_c
reference and the custom input generators are built with the host compiler (built, not
run), and a python reference is imported in its own process. Build products go to the
caches outside the problem directory (``ktt.compile_cache``, ``ktt.host_compiler``); the
problem directory is never written to. A failure is one ``ProblemError`` line.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ktt import procs
from ktt.capped_read import MAX_SOURCE_BYTES, describe_read_error, read_text_capped
from ktt.host_compiler import HostCompileError, build_shared_library, default_host_cache_dir, find_compiler
from ktt.inputs import build_generators, custom_buffers
from ktt.problem.errors import ProblemError
from ktt.problem.model import Problem, Shape
from ktt.problem.ref_import import import_reference
from ktt.workdir import WorkDir, local_headers

if TYPE_CHECKING:
    from ktt.nvrtc import CompileOutput

CXX_SUFFIXES = (".cc", ".cpp", ".cxx", ".C")


@dataclass(frozen=True)
class Step:
    """One thing --check proved, as a line for the summary."""

    name: str
    text: str


def preflight(problem: Problem, *, arch: str | None = None, cache_dir: Path | None = None) -> list[Step]:
    """Every check that needs a compiler or an interpreter; raises ProblemError on the first failure."""
    steps = [_data_step(problem), _cases_step(problem)]
    ref = problem.reference
    if ref.type == "cuda":
        steps.append(_cuda_step(problem, arch, cache_dir))
    elif ref.type == "cpu_c":
        steps.append(_cpu_step(problem, cache_dir))
    else:
        steps.append(_python_step(problem))
    generators = _generators_step(problem, cache_dir)
    if generators is not None:
        steps.append(generators)
    return steps


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _data_step(problem: Problem) -> Step:
    files = {(name, path) for s in problem.shapes for name, path in s.files.items()}
    if not files:
        return Step("data files", "none (no init: file buffer)")
    total = sum(p.stat().st_size for _, p in files)
    return Step(
        "data files",
        f"{_plural(len(files), 'file')} under inputs/ present with the exact byte count ({total:,} bytes)",
    )


def _cases_step(problem: Problem) -> Step:
    if not problem.declared_cases:
        return Step("cases", "none: one implicit shape 'default' from the inputs.yaml values")
    names = ", ".join(s.name for s in problem.shapes)
    count = _plural(len(problem.shapes), "case")
    return Step("cases", f"{count} resolved ({names}); the primary is {problem.primary.name}")


def _distinct_defines(problem: Problem) -> list[Shape]:
    """One shape per distinct set of -D values (the reference's cubin depends on nothing else)."""
    from ktt.nvrtc import define_pairs

    seen: dict[tuple[tuple[str, str], ...], Shape] = {}
    for s in problem.shapes:
        seen.setdefault(define_pairs(problem.defines(s)), s)
    return list(seen.values())


def _cuda_step(problem: Problem, arch: str | None, cache_dir: Path | None) -> Step:
    # NVRTC (cuda.core) is imported only when a cuda reference is compiled.
    from ktt.compile_cache import compile_cached, default_cache_dir
    from ktt.nvrtc import CompileRequest, define_pairs
    from ktt.toolkit import cuda_include_dirs, resolve_arch

    ref = problem.reference
    arch, arch_from = resolve_arch(arch, problem.compute_capability)
    cache = str(cache_dir / "compile") if cache_dir else str(default_cache_dir())
    seconds = 0.0
    cached = True
    shapes = _distinct_defines(problem)
    with tempfile.TemporaryDirectory(prefix="ktt-check-") as tmp:
        work = WorkDir(Path(tmp))
        for shape in shapes:
            d = work.prepare_shape(problem, shape)
            req = CompileRequest(
                source=_source(ref.file),
                program_path=str(work.program_path(shape.name, ref.file.name)),
                display_name=ref.file.name,
                arch=arch,
                defines=define_pairs(problem.defines(shape)),
                include_dirs=(str(d), str(problem.directory), *cuda_include_dirs()),
                header_texts=(("inputs.hpp", (d / "inputs.hpp").read_text()), *local_headers(problem)),
            )
            out, _ = compile_cached(req, cache)
            seconds += out.seconds
            cached = cached and out.cached
            where = f", shape {shape.name}" if len(shapes) > 1 else ""
            if not out.ok:
                raise _nvrtc_error(ref.file, out, f"NVRTC for {arch}{where}")
            if ref.function not in out.kernels:
                raise ProblemError(
                    problem.problem_yaml,
                    "reference.function",
                    f'no kernel {ref.function!r} in the compiled {ref.file.name} (declare it extern "C" __global__)',
                )
    timing = "cached" if cached else f"{seconds:.1f} s"
    n = f"; {_plural(len(shapes), 'distinct set')} of -D values" if len(shapes) > 1 else ""
    return Step(
        "reference",
        f"cuda {ref.file.name}: compiled with NVRTC for {arch} ({timing}{n}; arch from {arch_from}); "
        f"kernel {ref.function} found",
    )


def _source(file: Path) -> str:
    """A reference's text, read again for the compile: regular, capped (ktt.capped_read), else one line."""
    try:
        return read_text_capped(file, MAX_SOURCE_BYTES, errors="replace")
    except OSError as exc:
        raise ProblemError(file, "", describe_read_error(exc)) from None


def _nvrtc_error(file: Path, out: CompileOutput, how: str) -> ProblemError:
    errors = out.errors
    for d in errors:
        if d.line and Path(d.file).name == file.name:
            return ProblemError(file, f"line {d.line}", f"{d.message} ({how})")
    if errors:
        d = errors[0]
        where = f"{d.file}:{d.line}: " if d.line else ""
        return ProblemError(file, "", f"does not compile: {where}{d.message} ({how})")
    return ProblemError(file, "", f"does not compile ({how}): {(out.log.strip().splitlines() or ['?'])[0][:300]}")


def _exported(lib: Path, function: str) -> bool | None:
    """Whether ``lib`` exports ``function`` (nm, without loading the library); None without nm."""
    nm = shutil.which("nm")
    if nm is None:
        return None
    res = procs.run([nm, "-D", "--defined-only", str(lib)], timeout_s=30.0)
    if res.returncode != 0:
        return None
    return any(line.split()[-1:] == [function] for line in res.stdout.splitlines())


def _cpu_step(problem: Problem, cache_dir: Path | None) -> Step:
    ref = problem.reference
    cxx = ref.file.suffix in CXX_SUFFIXES
    out_dir = (cache_dir / "host" if cache_dir else default_host_cache_dir()) / "references"
    start = time.perf_counter()
    shapes = {tuple(sorted(s.scalars.items())): s for s in problem.shapes}.values()
    with tempfile.TemporaryDirectory(prefix="ktt-check-") as tmp:
        work = WorkDir(Path(tmp))
        for shape in shapes:
            d = work.prepare_shape(problem, shape)
            try:
                lib = build_shared_library(
                    _source(ref.file),
                    out_dir,
                    cxx=cxx,
                    defines=dict(shape.scalars),
                    include_dirs=[d, problem.directory],
                    source_name=ref.file.name,
                )
            except HostCompileError as exc:
                raise _host_error(ref.file, exc, shape.name if len(shapes) > 1 else None) from None
            if _exported(lib, ref.function or "") is False:
                raise ProblemError(
                    problem.problem_yaml,
                    "reference.function",
                    f'{ref.file.name} builds but exports no function {ref.function!r} (C++? declare it extern "C")',
                )
    compiler = find_compiler(cxx)
    seconds = time.perf_counter() - start
    n = f"; {_plural(len(shapes), 'shape')}" if len(shapes) > 1 else ""
    return Step(
        "reference",
        f"cpu_c {ref.file.name}: built with {compiler} ({seconds:.1f} s{n}), function {ref.function}; "
        "not run here (it runs on the CPU when tuning)",
    )


def _host_error(file: Path, exc: HostCompileError, shape: str | None) -> ProblemError:
    where = f", shape {shape}" if shape else ""
    for d in exc.errors:
        if Path(d.file).name.endswith(file.name):
            return ProblemError(file, f"line {d.line}", f"{d.message} (host compiler{where})")
    if exc.errors:
        d = exc.errors[0]
        return ProblemError(file, "", f"{Path(d.file).name}:{d.line}: {d.message} (host compiler{where})")
    first = (exc.log.strip().splitlines() or [str(exc).splitlines()[0]])[0]
    return ProblemError(file, "", f"does not build{where}: {first[:300]}")


def import_step(problem: Problem) -> Step:
    """Import the python reference in its own process (a run does this at start, as the original does)."""
    return _python_step(problem)


def _python_step(problem: Problem) -> Step:
    ref = problem.reference
    result = import_reference(ref.file, ref.function)
    if not result.ok:
        line = f"line {result.line}" if result.line else ""
        if result.kind == "missing_module":
            raise ProblemError(
                ref.file,
                line,
                f"imports {result.module!r}, which is not installed for this Python ({result.message})",
                hint=f"install it (pip install {str(result.module).split('.')[0]}) or remove the import",
            )
        if result.kind == "no_function":
            raise ProblemError(problem.problem_yaml, "reference.function", f"{ref.file.name} defines {result.message}")
        raise ProblemError(ref.file, line, f"importing it failed: {result.message}")
    prepare = ", with prepare_input" if result.prepare_input else ""
    return Step(
        "reference",
        f"python {ref.file.name}: imported in its own process ({result.seconds:.1f} s); "
        f"reference function {result.function}{prepare}",
    )


def _generators_step(problem: Problem, cache_dir: Path | None) -> Step | None:
    customs = custom_buffers(problem)
    if not customs:
        return None
    start = time.perf_counter()
    for shape in problem.shapes:
        build_generators(problem, shape, cache_dir / "host" if cache_dir else None)
    seconds = time.perf_counter() - start
    names = ", ".join(b.name for _, b in customs)
    return Step(
        "init",
        f"custom {names}: built with {find_compiler(True)} for {_plural(len(problem.shapes), 'shape')} "
        f"({seconds:.1f} s); not run here",
    )
