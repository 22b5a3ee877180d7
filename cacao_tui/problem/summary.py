"""The ``cacao --check`` summary: what the tool understood from a problem directory.

Plain text so it reads the same in a terminal, a log and a test. Every number a kernel
author needs is here: the boundary in args order, buffer sizes in bytes for every shape,
the grid, the reference, cases, rules, the physical floor and each shape's baseline (what
output/reference_time.json holds for it).
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

from ktt.expressions import ExpressionError
from ktt.half_types import HALF_DTYPES
from ktt.peaks import NAMES as PEAK_NAMES
from ktt.peaks import datasheet_peaks
from ktt.problem.files import DEFAULT_INPUT_SETS
from ktt.problem.model import Buffer, Dim3, Problem, Shape
from ktt.reference_times import ReferenceTimes
from ktt.terminal_text import safe_line

if TYPE_CHECKING:  # the preflight pulls in NVRTC; the summary only formats its steps
    from ktt.problem.preflight import Step

LABEL_WIDTH = 11
WRAP = 100


def human_bytes(n: float) -> str:
    """1536 -> '1.5 KiB'. Exact counts are printed beside it; this is for reading at a glance."""
    units = ("bytes", "KiB", "MiB", "GiB", "TiB")
    value = float(n)
    for unit in units:
        if abs(value) < 1024 or unit == units[-1]:
            return f"{int(value)} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def _number(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.6g}"


def _value(v: float) -> str:
    """A scalar's value as written: 16777216, not 1.67772e+07."""
    return str(v) if isinstance(v, int) else f"{v:.10g}"


def _section(label: str, lines: list[str]) -> list[str]:
    """'label      first line' then the rest indented under it."""
    if not lines:
        lines = ["none"]
    pad = " " * LABEL_WIDTH
    return [f"{label:<{LABEL_WIDTH}}{lines[0]}" if lines[0] else label, *(f"{pad}{line}" for line in lines[1:])]


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _init_text(b: Buffer, root: Path, poisoned: bool = False) -> str:
    """How the buffer starts each run: its init data (outputs too, as in the original), or the poison."""
    if poisoned:
        return "output: poisoned before every run (validation.poison_outputs)"
    if b.init == "random":
        low, high = b.value_range
        seed = f", seed {b.seed}" if b.seed is not None else ""
        return f"random in [{low:g}, {high:g}]{seed}"
    if b.init == "normal":
        mean, std = b.normal_params
        seed = f", seed {b.seed}" if b.seed is not None else ""
        return f"normal, mean {mean:g}, std {std:g}{seed}"
    if b.init == "file":
        where = f"inputs/{b.file_name}" if b.file_key == "file_name" else b.file_name
        return f"from {where}" if b.file_name else "from a file"
    if b.init == "custom":
        lines = len((b.body or "").strip().splitlines())
        return f"custom C++ body ({lines} line{'s' if lines != 1 else ''})"
    return b.init


def _tolerance_text(problem: Problem) -> str:
    if problem.rtol:
        return f"|kernel - reference| <= {problem.tolerance:g} + {problem.rtol:g} * |reference|"
    return f"|kernel - reference| <= {problem.tolerance:g}"


def _args_lines(problem: Problem) -> list[str]:
    rows: list[tuple[str, ...]] = [("#", "name", "kind", "dtype", "access / placements", "init / value")]
    for i, a in enumerate(problem.args):
        if isinstance(a, Buffer):
            access = a.access + (", validated" if a.validate else "")
            init = _init_text(a, problem.directory, problem.poisoned(a))
            rows.append((str(i), a.name, "buffer", a.dtype, access, init))
        else:
            rows.append((str(i), a.name, "scalar", a.dtype, ", ".join(a.placements), f"= {_value(a.value)}"))
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def _grid_text(problem: Problem, grid: Dim3) -> str:
    if problem.reference.type != "cuda":  # the grid only sizes kernels here; the reference runs on the host
        unit = "threads (opencl)" if problem.global_size_type == "opencl" else "blocks"
        return f"grid {grid} {unit}"
    if problem.global_size_type == "opencl":
        block = problem.reference.block
        blocks = Dim3(*(-(-g // b) for g, b in zip(grid.as_tuple(), block.as_tuple(), strict=True)))
        return f"grid {grid} threads (opencl): the reference launches {blocks} blocks of {block}"
    return f"grid {grid} blocks"


def _shape_lines(problem: Problem, shape: Shape) -> list[str]:
    scalars = " ".join(f"{s.name}={_value(shape.scalars[s.name])}" for s in problem.scalars)
    lines = [f"{shape.name}: {scalars}".rstrip(), f"  {_grid_text(problem, shape.grid)}"]
    lines.append(f"  tuning budget {shape.duration_s:g} s")
    width = max(len(b.name) for b in problem.buffers)
    for b in problem.buffers:
        count = shape.sizes[b.name]
        nbytes = shape.bytes_of(b)
        lines.append(
            f"  {b.name:<{width}}  {b.size.text} = {count:,} {b.dtype} = {nbytes:,} bytes ({human_bytes(nbytes)})"
        )
    total = shape.total_bytes(problem.buffers)
    lines.append(f"  {'total':<{width}}  {total:,} bytes ({human_bytes(total)})")
    return lines


def _case_lines(problem: Problem) -> list[str]:
    if not problem.declared_cases:
        return []
    defaults = {b.name: b.file_name for b in problem.buffers if b.init == "file"}
    lines = []
    for i, case in enumerate(problem.shapes):
        values = case.scalars
        changed = [f"{s.name}={_value(values[s.name])}" for s in problem.scalars if values[s.name] != s.value]
        files = [
            f"{k} from {_relative(v, problem.directory)}"
            for k, v in case.files.items()
            if _relative(v, problem.directory) not in (f"inputs/{defaults.get(k)}", defaults.get(k))
        ]
        parts = changed + files
        budget = f"; budget {case.duration_s:g} s"
        primary = " (primary)" if i == 0 else ""
        lines.append(f"{case.name}{primary}: {', '.join(parts) if parts else 'the inputs.yaml values'}{budget}")
    lines.append("each case is tuned on its own; the score is the geometric mean of the per-case speedups")
    return lines


def _rules_lines(problem: Problem) -> list[str]:
    lines = []
    for text in problem.rules_text:
        wrapped = textwrap.wrap(text.strip(), WRAP - LABEL_WIDTH - 2) or [""]
        lines.append(f"- {wrapped[0]}")
        lines += [f"  {more}" for more in wrapped[1:]]
    for rule in problem.forbid:
        why = f"  ({rule.reason})" if rule.reason else ""
        lines.append(f"forbid /{rule.pattern.pattern}/{why}")
    return lines


def _floor_lines(problem: Problem) -> list[str]:
    if problem.floor_bytes is None and problem.floor_flops is None:
        return ["not declared (physical_floor: {bytes, flops} lets the tuner flag impossibly fast times)"]
    lines = []
    dtype = problem.floor_flops_dtype
    sheets = datasheet_peaks(dtype)
    for shape in problem.shapes:
        try:
            nbytes, flops = problem.floor(shape)
        except ExpressionError as exc:  # the loader checked this; keep the summary total anyway
            lines.append(f"{shape.name}: {exc}")
            continue
        parts = []
        if nbytes is not None:
            parts.append(f"{_number(nbytes)} bytes moved ({human_bytes(nbytes)})")
        if flops is not None:
            at = "".join(f" ({flops / tflops / 1e9:.3g} ms on {part})" for part, tflops in sheets[:1])
            parts.append(f"{_number(flops)} flops{at}")
        text = f"{shape.name}: {', '.join(parts)}"
        lines += textwrap.wrap(text, WRAP - LABEL_WIDTH, subsequent_indent="  ")
    if problem.floor_flops is not None:
        known = "; ".join(f"{tflops:g} TFLOP/s on {part}" for part, tflops in sheets)
        how = f"{known}, other GPUs by ktt/peaks.py's rule" if known else "the GPU's SMs x clock x FP32 lanes"
        text = f"flops at the {PEAK_NAMES[dtype]} peak (flops_dtype {dtype}): {how}"
        lines += textwrap.wrap(text, WRAP - LABEL_WIDTH, subsequent_indent="  ")
    return lines


def _reference_lines(problem: Problem) -> list[str]:
    ref = problem.reference
    parts = [ref.type, _relative(ref.file, problem.directory)]
    if ref.function:
        parts.append(f"function {ref.function}")
    if ref.type == "cuda":
        parts.append(f"block {ref.block}")
    lines = ["  ".join(parts)]
    if ref.type == "cuda":
        lines.append(f"takes the boundary: ({problem.boundary_signature()})")
    elif ref.type == "cpu_c":
        buffers = ", ".join(b.name for b in problem.buffers)
        lines.append(f"takes the buffers ({buffers}); scalars arrive as -D macros")
    else:
        lines.append("called as f(scalars, buffers), or f(prepare_input(scalars, buffers)) when defined")
    halves = ", ".join(b.name for b in problem.buffers if b.dtype in HALF_DTYPES)
    if halves and ref.type == "cpu_c":
        lines.append(f"{halves}: uint16_t bit patterns (inputs.hpp converts: ktt_bf16_to_float, ktt_float_to_half...)")
    elif halves and ref.type == "python":
        rounded = (
            "; its results for them are rounded to the dtype"
            if any(b.dtype in HALF_DTYPES for b in problem.validated)
            else ""
        )
        lines.append(f"{halves}: float32 arrays of their values{rounded}")
    return lines


def _gpu_lines(problem: Problem) -> list[str]:
    gpus = ", ".join(str(i) for i in problem.gpu_indices)
    cc = problem.compute_capability
    cc = f"; compute capability {cc} when none is detected" if cc else ""
    lines = [f"index {gpus}{cc}"]
    info = {k: v for k, v in problem.gpu_info.items() if k != "compute_capability"}
    if info:
        text = ", ".join(f"{k} {v}" for k, v in info.items())
        wrapped = textwrap.wrap(f"advisory (for the prompts): {text}", WRAP - LABEL_WIDTH)
        lines += wrapped
    return lines


def _baseline_lines(problem: Problem, times: ReferenceTimes) -> list[str]:
    """Per scored shape, what output/reference_time.json gives it: a seed, a measured value, no
    baseline (null), or nothing yet (measured on the first tuning)."""
    where = "output/reference_time.json"
    if not times.exists:
        return [f"{where}: none yet; every shape is timed on its first tuning and recorded there"]
    unit = "microseconds, the original's form" if times.form == "original" else "milliseconds, ktt's earlier form"
    lines = [f"{where} ({unit})"]
    width = max(len(s.name) for s in problem.shapes)
    for shape in problem.shapes:
        lines.append(f"{shape.name:<{width}}  {times.get(shape.name).describe()}")
    named = times.raw.get("cases") if isinstance(times.raw.get("cases"), dict) else {}
    unknown = sorted(str(k) for k in named if k not in {s.name for s in problem.shapes})
    if unknown:
        lines.append(f"not a case of this problem (ignored): {', '.join(unknown)}")
    return lines


def render_check(problem: Problem, steps: list[Step] | None = None, times: ReferenceTimes | None = None) -> str:
    """The full ``--check`` report for a problem that loaded (``steps``: what the preflight proved;
    ``times``: output/reference_time.json as read)."""
    out: list[str] = []
    desc = textwrap.wrap(problem.description, WRAP - LABEL_WIDTH) if problem.description else []
    out += _section("problem", [f"{problem.name}  ({problem.directory})", *desc])
    out += _section("gpu", _gpu_lines(problem))
    out += _section("boundary", [f"({problem.boundary_signature()})", "kernels take these parameters, in this order"])
    out += _section("args", _args_lines(problem))
    defines = [s.name for s in problem.scalars if s.is_define]
    if defines:
        out += _section("defines", [", ".join(f"-D{name}" for name in defines)])
    out += _section("reference", _reference_lines(problem))
    validated = ", ".join(b.name for b in problem.validated)
    starts = (
        "write buffers start each run poisoned (validation.poison_outputs)"
        if problem.poison_outputs
        else "every buffer, outputs included, starts each run with its init data"
    )
    lines = [f"{_tolerance_text(problem)} on every element of {validated}", starts]
    if problem.input_sets != DEFAULT_INPUT_SETS:  # validation.input_sets; the default goes unsaid
        lines.append(f"a best must pass {problem.input_sets} input sets (the one it is tuned on and "
                     f"{problem.input_sets - 1} fresh)")  # fmt: skip
    out += _section("validation", lines)
    shapes: list[str] = ["buffer sizes in bytes, per shape"]
    for shape in problem.shapes:
        shapes += _shape_lines(problem, shape)
    out += _section("shapes", shapes)
    out += _section("cases", _case_lines(problem))
    out += _section("rules", _rules_lines(problem))
    out += _section("floor", _floor_lines(problem))
    if times is not None:
        out += _section("baseline", _baseline_lines(problem, times))
    if steps is not None:
        checked: list[str] = []
        for step in steps:
            wrapped = textwrap.wrap(f"{step.name}: {step.text}", WRAP - LABEL_WIDTH - 2) or [""]
            checked += [f"- {wrapped[0]}", *(f"  {more}" for more in wrapped[1:])]
        out += _section("checked", checked)
    warnings: list[str] = []
    for w in problem.warnings:
        wrapped = textwrap.wrap(w, WRAP - LABEL_WIDTH - 2) or [""]
        warnings += [f"- {wrapped[0]}", *(f"  {more}" for more in wrapped[1:])]
    out += _section("warnings", warnings)
    # One report line per entry: a line break inside a name (problem.yaml's name, a directory,
    # a file name) would forge a line of the report, such as a second "OK: ..." (safe_line).
    return "\n".join(safe_line(line) for line in out)
