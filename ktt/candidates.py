"""From a configuration to what the compiler and the GPU worker need: a compile request and launches."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ktt.capped_read import MAX_KERNEL_BYTES, ReadRefused, describe_read_error, read_text_capped
from ktt.expressions import ExpressionError
from ktt.includes import header_texts
from ktt.launch_program import evaluate_program, iter_launches
from ktt.nvrtc import CompileOutput, CompileRequest, define_pairs
from ktt.problem.errors import ProblemError
from ktt.problem.model import Problem, Shape
from ktt.protocol import Diagnostic
from ktt.spec import Config, SpecError, TuningSpec
from ktt.toolkit import compile_target, cuda_include_dirs, runs_on
from ktt.workdir import WorkDir, local_headers


@dataclass
class KernelSource:
    text: str
    path: Path  # the user's file
    display_name: str

    @classmethod
    def read(cls, path: Path | str) -> KernelSource:
        """The kernel file: regular, at most MAX_KERNEL_BYTES, UTF-8; an OSError (one line) otherwise."""
        p = Path(path)
        try:
            text = read_text_capped(p, MAX_KERNEL_BYTES)
        except UnicodeDecodeError as exc:
            raise ReadRefused(p, describe_read_error(exc)) from None
        return cls(text, p.resolve(), p.name)

    @classmethod
    def from_text(cls, text: str, name: str = "kernels.cu") -> KernelSource:
        return cls(text, Path(name), name)


class CompileContext:
    """Everything fixed across configurations of one run: source, arch, headers, include dirs."""

    def __init__(self, problem: Problem, spec: TuningSpec, kernel: KernelSource, work: WorkDir, arch: str) -> None:
        self.problem = problem
        self.spec = spec
        self.kernel = kernel
        self.work = work
        self.arch = arch
        # The text of every header the compile may include goes into the cache key: exactly
        # the files ktt.includes lets NVRTC read (regular, size-capped, not linked out).
        self._headers = tuple(local_headers(problem))
        self._kernel_dir_headers: tuple[tuple[str, str], ...] = ()
        kdir = kernel.path.parent
        if kernel.path.is_absolute() and kdir.is_dir() and kdir != problem.directory:
            self._kernel_dir_headers = tuple(header_texts(kdir))
        self._prepared: dict[str, str] = {}

    def _inputs_hpp(self, shape: Shape) -> str:
        if shape.name not in self._prepared:
            d = self.work.prepare_shape(self.problem, shape, self.kernel.text)
            self._prepared[shape.name] = (d / "inputs.hpp").read_text(encoding="utf-8")
        return self._prepared[shape.name]

    def request(self, config: Config, shape: Shape) -> CompileRequest:
        header = self._inputs_hpp(shape)
        include = [str(self.work.shape_dir(shape.name)), str(self.problem.directory)]
        if self.kernel.path.is_absolute() and self.kernel.path.parent != self.problem.directory:
            include.append(str(self.kernel.path.parent))
        return CompileRequest(
            source=self.kernel.text,
            program_path=str(self.work.program_path(shape.name)),
            display_name=self.kernel.display_name,
            arch=self.arch,
            defines=define_pairs(self.problem.defines(shape), config),
            include_dirs=(*include, *cuda_include_dirs()),
            options=tuple(self.spec.compiler_options),
            header_texts=(("inputs.hpp", header), *self._headers, *self._kernel_dir_headers),
            fixed_defines=tuple(sorted(set(self.problem.defines(shape)) - set(config))),
        )


def target_arch(device_arch: str, spec: TuningSpec, problem: Problem) -> str:
    """The arch to compile for on a GPU of ``device_arch`` (ktt.toolkit.compile_target).

    Raises SpecError / ProblemError naming the field: a chosen target whose cubin cannot run
    on the GPU, or tensor maps and clusters with a target older than sm_90."""
    target, source = compile_target(device_arch, spec.arch, problem.arch)
    why = runs_on(target, device_arch)
    if why is not None:
        if source == "tuning.yaml arch":
            raise SpecError(spec.path, "arch", why)
        raise ProblemError(problem.problem_yaml, "gpu.arch", why)
    field = spec.uses_hopper_launches
    digits = "".join(c for c in target if c.isdigit())
    if field is not None and int(digits) < 90:
        raise SpecError(spec.path, field, f"tensor maps and clusters need sm_90 or newer; the target is {target}")
    return target


def launch_plan(spec: TuningSpec, config: Config, shape: Shape) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(program, scratch) as the worker reads them (ktt.launch_program). Raises ExpressionError on a bad value."""
    launches = evaluate_program(spec, config, shape)
    scratch = []
    sizes = spec.scratch_sizes(config, shape)
    for s in spec.scratch:
        count = sizes[s.name]
        if count <= 0:
            raise ExpressionError(f"scratch {s.name}: size evaluates to {count}")
        scratch.append({"name": s.name, "bytes": count * s.itemsize, "zero": s.zero})
    return launches, scratch


def geometry_problems(launches: list[dict[str, Any]]) -> str | None:
    """Limits every CUDA device shares (no device needed): at most 1024 threads, every axis >= 1."""
    for i, launch in enumerate(iter_launches(launches)):
        grid, block = launch["grid"], launch["block"]
        where = f"{launch.get('label') or f'launches[{i}]'} ({launch['kernel']})"
        if min(grid) < 1 or min(block) < 1:
            return f"{where}: grid {tuple(grid)} / block {tuple(block)} has an axis below 1"
        threads = block[0] * block[1] * block[2]
        if threads > 1024:
            return f"{where}: {threads} threads per block (CUDA allows at most 1024)"
        if block[2] > 64:
            return f"{where}: block.z = {block[2]} (CUDA allows at most 64)"
        if grid[1] > 65535 or grid[2] > 65535:
            return f"{where}: grid {tuple(grid)}: y and z are limited to 65535"
    return None


def protocol_diagnostics(out: CompileOutput, limit: int = 50) -> list[Diagnostic]:
    """Compiler errors and warnings as protocol Diagnostics (notes dropped, at most ``limit``)."""
    return [
        Diagnostic(file=d.file, line=d.line, column=d.column, severity=d.severity, message=d.message)
        for d in out.diagnostics
        if d.severity in ("error", "warning")
    ][:limit]
