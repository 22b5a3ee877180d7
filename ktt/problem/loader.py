"""Load and validate a problem directory into a ``Problem``, or raise one ``ProblemError``.

Loading never writes anything. Every check names the file and the field it is about.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from ktt.capped_read import MAX_SOURCE_BYTES, describe_read_error, read_text_capped
from ktt.csource import c_function_definitions, global_function_lines
from ktt.expressions import Expression, ExpressionError, Number
from ktt.problem.errors import ProblemError
from ktt.problem.files import (
    BufferArg,
    CaseSection,
    Dim3Expr,
    ExprValue,
    InputsFile,
    ProblemFile,
    ScalarArg,
)
from ktt.problem.legacy import LEGACY_KEYS, convert_inline_inputs, has_legacy_form, legacy_block
from ktt.problem.model import Buffer, Dim3, ForbidRule, Problem, Reference, Scalar, Shape
from ktt.problem.yaml_io import read_yaml_mapping, validate_model

# No GPU made so far has more memory than this; a buffer larger than it is a typo.
MAX_GPU_BYTES = 288 * 10**9
MAX_THREADS_PER_BLOCK = 1024
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
CASE_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
DEFAULT_SHAPE = "default"  # the one implicit shape of a problem without cases

REFERENCE_FILES = {"cuda": "ref_kernel.cu", "cpu_c": "ref_cpu.c", "python": "ref.py"}
REFERENCE_SUFFIXES = {".cu": "cuda", ".cuh": "cuda", ".c": "cpu_c", ".py": "python"}
C_KEYWORDS = {
    "auto",
    "break",
    "case",
    "char",
    "const",
    "continue",
    "default",
    "do",
    "double",
    "else",
    "enum",
    "extern",
    "float",
    "for",
    "goto",
    "if",
    "int",
    "long",
    "register",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "struct",
    "switch",
    "typedef",
    "union",
    "unsigned",
    "void",
    "volatile",
    "while",
    "class",
    "new",
    "delete",
    "template",
    "this",
    "namespace",
    "bool",
    "true",
    "false",
}


def load_problem(directory: Path | str) -> Problem:
    """Read problem.yaml, inputs.yaml and the reference in ``directory``; validate everything."""
    root = Path(directory).expanduser()
    if not root.exists():
        raise ProblemError(root, "", "no such directory")
    if not root.is_dir():
        raise ProblemError(root, "", "not a directory")
    root = root.resolve()
    problem_path = root / "problem.yaml"
    if not problem_path.is_file():
        raise ProblemError(problem_path, "", "file not found (a problem directory needs problem.yaml)")
    warnings: list[str] = []
    raw = read_yaml_mapping(problem_path, warnings)
    pfile = validate_model(ProblemFile, raw, problem_path)
    warnings += [f"problem.yaml: {k}: unknown key (ignored)" for k in pfile.unknown_key_paths() if k not in LEGACY_KEYS]

    inputs_path = root / "inputs.yaml"
    if has_legacy_form(raw):
        if inputs_path.exists():
            raise ProblemError(
                problem_path,
                "scalars",
                "inline scalars/vectors and inputs.yaml are both present; keep only inputs.yaml",
            )
        warnings.append("problem.yaml: scalars/vectors: converted from the older inline form")
        inputs_raw = convert_inline_inputs(raw, problem_path, warnings)
        inputs_source = problem_path
    else:
        if not inputs_path.is_file():
            raise ProblemError(
                inputs_path,
                "",
                "file not found (the I/O boundary is described in inputs.yaml)",
                hint="see docs/INPUTS_YAML_GUIDE.md (older problems carry scalars:/vectors: in problem.yaml instead)",
            )
        inputs_raw = read_yaml_mapping(inputs_path, warnings)
        inputs_source = inputs_path
    inputs = validate_model(InputsFile, inputs_raw, inputs_source)
    warnings += [f"{inputs_source.name}: {k}: unknown key (ignored)" for k in inputs.unknown_key_paths()]
    if inputs.shared_setup.strip():
        warnings.append("inputs.yaml: shared_setup: C++ for the original driver; not supported here, ignored")

    args, scalar_exprs = _resolve_args(inputs, inputs_source, root, warnings)
    scalar_names = {a.name for a in args if isinstance(a, Scalar)}
    base_scalars = {a.name: a.value for a in args if isinstance(a, Scalar)}

    grid_exprs = _grid_expressions(pfile.grid, raw, problem_path, scalar_names)
    reference, ref_warnings = _resolve_reference(pfile, raw, root, problem_path)
    warnings += ref_warnings

    if pfile.cases:
        shapes = _resolve_cases(
            pfile.cases,
            args,
            scalar_exprs,
            base_scalars,
            grid_exprs,
            pfile.tuning.duration_s,
            inputs_source,
            problem_path,
            root,
        )
    else:
        shapes = [
            _make_shape(
                DEFAULT_SHAPE,
                base_scalars,
                args,
                grid_exprs,
                {},
                pfile.tuning.duration_s,
                inputs_source,
                problem_path,
                field_prefix="",
            )
        ]

    floor_bytes = floor_flops = None
    if pfile.physical_floor is not None:
        if pfile.physical_floor.bytes is not None:
            floor_bytes = _expression(pfile.physical_floor.bytes, problem_path, "physical_floor.bytes", scalar_names)
        if pfile.physical_floor.flops is not None:
            floor_flops = _expression(pfile.physical_floor.flops, problem_path, "physical_floor.flops", scalar_names)

    problem = Problem(
        directory=root,
        name=pfile.name or root.name,
        description=pfile.description.strip(),
        gpu_indices=pfile.gpu.index if isinstance(pfile.gpu.index, list) else [pfile.gpu.index],
        compute_capability=_compute_capability(pfile.gpu.compute_capability, problem_path),
        global_size_type=pfile.global_size_type,
        grid_exprs=grid_exprs,
        reference=reference,
        tolerance=pfile.validation.tolerance,
        flush_l2=pfile.timing.flush_l2,
        rules_text=[pfile.rules.text] if isinstance(pfile.rules.text, str) else list(pfile.rules.text),
        forbid=_compile_forbid(pfile, problem_path),
        args=args,
        headers=list(inputs.headers),
        shared_setup=inputs.shared_setup,
        shapes=shapes,
        declared_cases=bool(pfile.cases),
        floor_bytes=floor_bytes,
        floor_flops=floor_flops,
        warnings=warnings,
    )
    for shape in problem.shapes:
        _check_floor(problem, shape, problem_path)
    return problem


def _expression(value: ExprValue, path: Path, field: str, known: set[str]) -> Expression:
    try:
        expr = Expression(value)
        expr.check_names(known)
    except ExpressionError as exc:
        raise ProblemError(path, field, str(exc)) from None
    return expr


def _evaluate(expr: Expression, env: dict[str, Number], path: Path, field: str) -> Number:
    try:
        return expr.evaluate(env)
    except ExpressionError as exc:
        raise ProblemError(path, field, str(exc)) from None


def _arg_field(index: int, name: str | None, key: str) -> str:
    label = f"args[{index}] ({name})" if name else f"args[{index}]"
    return f"{label}.{key}" if key else label


def _resolve_args(
    inputs: InputsFile, path: Path, root: Path, warnings: list[str]
) -> tuple[list[Scalar | Buffer], dict[str, Expression]]:
    if not inputs.args:
        raise ProblemError(path, "args", "empty: the boundary needs at least one buffer")
    resolved: dict[int, Scalar | Buffer] = {}
    scalar_exprs: dict[str, Expression] = {}
    env: dict[str, Number] = {}
    seen: dict[str, int] = {}
    for i, item in enumerate(inputs.args):
        name = item.name
        if not IDENTIFIER.match(name) or name in C_KEYWORDS:
            raise ProblemError(path, _arg_field(i, name, "name"), f"{name!r} is not a valid C identifier")
        if name in seen:
            raise ProblemError(
                path, _arg_field(i, name, "name"), f"duplicate arg name {name!r} (also args[{seen[name]}])"
            )
        seen[name] = i
        if isinstance(item, ScalarArg):
            scalar = _resolve_scalar(item, i, env, scalar_exprs, path, warnings)
            env[name] = scalar.value
            resolved[i] = scalar
    # Buffers may size themselves by any scalar, declared before or after them.
    for i, item in enumerate(inputs.args):
        if isinstance(item, BufferArg):
            resolved[i] = _resolve_buffer(item, i, set(env), path, root)
    args = [resolved[i] for i in range(len(inputs.args))]
    short = [a.name for a in args if isinstance(a, Scalar) and a.is_define and len(a.name) == 1]
    if short:
        warnings.append(
            f"{path.name}: args: one-letter macros ({', '.join(short)}) clash with template parameters in some "
            f"CUDA headers (<cub/cub.cuh>; -DN also <cuda_pipeline.h>); a kernel including them must wrap the "
            f"#include in #pragma push_macro / #undef / pop_macro"
        )
    if not any(isinstance(a, Buffer) for a in args):
        raise ProblemError(path, "args", "no buffer: the boundary needs at least one buffer")
    if not any(isinstance(a, Buffer) and a.validate for a in args):
        raise ProblemError(
            path, "args", "no buffer has validate: true; mark the output(s) to check against the reference"
        )
    return args, scalar_exprs


def _resolve_scalar(
    item: ScalarArg, i: int, env: dict[str, Number], exprs: dict[str, Expression], path: Path, warnings: list[str]
) -> Scalar:
    field = _arg_field(i, item.name, "value")
    expr = _expression(item.value, path, field, set(env))
    value = _evaluate(expr, env, path, field)
    if item.dtype == "int":
        if isinstance(value, float):
            if not value.is_integer():
                raise ProblemError(path, field, f"{value} is not an integer (dtype int)")
            value = int(value)
        if not (-(2**31) <= value < 2**31):
            raise ProblemError(path, field, f"{value} does not fit in a 32-bit int")
    else:
        value = float(value)
    if "define" in item.placements and item.name.upper() != item.name:
        raise ProblemError(
            path,
            _arg_field(i, item.name, "name"),
            f"a scalar with placement 'define' becomes a macro and must be UPPERCASE "
            f"(got {item.name!r}, try {item.name.upper()!r})",
        )
    if "define" in item.placements and "runtime" in item.placements:
        warnings.append(
            f"{path.name}: {_arg_field(i, item.name, 'placements')}: both define and runtime; the macro "
            f"{item.name} will replace a kernel parameter of the same name, so name that parameter differently"
        )
    exprs[item.name] = expr
    return Scalar(item.name, item.dtype, value, tuple(item.placements))


def _resolve_buffer(item: BufferArg, i: int, scalars: set[str], path: Path, root: Path) -> Buffer:
    size = _expression(item.size, path, _arg_field(i, item.name, "size"), scalars)
    if item.min is not None and item.max is not None and item.min > item.max:
        raise ProblemError(path, _arg_field(i, item.name, "min"), f"min {item.min} is larger than max {item.max}")
    file_path: Path | None = None
    if item.init == "file":
        if not item.file:
            raise ProblemError(
                path,
                _arg_field(i, item.name, "file"),
                "init: file needs a 'file:' path (raw little-endian data under inputs/)",
            )
        file_path = _inside(root, item.file, path, _arg_field(i, item.name, "file"), base="inputs")
    elif item.file:
        raise ProblemError(
            path, _arg_field(i, item.name, "file"), f"'file' is only used with init: file (init is {item.init!r})"
        )
    if item.init == "custom" and not (item.body and item.body.strip()):
        raise ProblemError(path, _arg_field(i, item.name, "body"), "init: custom needs a C++ 'body'")
    if item.validate_ and item.access == "read":
        raise ProblemError(
            path,
            _arg_field(i, item.name, "validate"),
            "a validated buffer is an output: give it access write or readwrite",
        )
    return Buffer(
        name=item.name,
        dtype=item.dtype,
        size=size,
        access=item.access,
        init=item.init,
        min=item.min,
        max=item.max,
        seed=item.seed,
        body=item.body,
        file=file_path,
        validate=item.validate_,
    )


def _inside(root: Path, relative: str, path: Path, field: str, base: str | None = None) -> Path:
    """Resolve a path from a problem file; it must stay inside the problem directory."""
    candidate = Path(relative)
    if candidate.is_absolute():
        raise ProblemError(path, field, f"{relative!r} is absolute; use a path inside the problem directory")
    resolved = (root / candidate).resolve()
    if base and not resolved.exists() and len(candidate.parts) == 1:
        resolved = (root / base / candidate).resolve()
    if not resolved.is_relative_to(root):
        raise ProblemError(path, field, f"{relative!r} leaves the problem directory (links are followed)")
    if resolved.exists() and not resolved.is_file():
        raise ProblemError(path, field, f"{relative!r} is not a regular file")
    if not resolved.is_file():
        raise ProblemError(path, field, f"{relative!r}: file not found")
    return resolved


def _grid_expressions(
    grid: Dim3Expr | None, raw: dict[str, Any], path: Path, known: set[str]
) -> tuple[Expression, Expression, Expression]:
    if grid is None:
        raise ProblemError(path, "grid", "missing (required): the launch grid, e.g. {x: 'N / 16', y: 'M / 16'}")
    return (
        _expression(grid.x, path, "grid.x", known),
        _expression(grid.y, path, "grid.y", known),
        _expression(grid.z, path, "grid.z", known),
    )


def _dim3(
    exprs: tuple[Expression, Expression, Expression], env: dict[str, Number], path: Path, field: str, what: str
) -> Dim3:
    values = []
    for axis, expr in zip("xyz", exprs, strict=True):
        try:
            v = expr.evaluate_int(env)
        except ExpressionError as exc:
            raise ProblemError(path, f"{field}.{axis}", str(exc)) from None
        if v <= 0:
            raise ProblemError(path, f"{field}.{axis}", f"evaluates to {v}; {what} needs at least 1 on every axis")
        values.append(v)
    return Dim3(*values)


def _resolve_reference(pfile: ProblemFile, raw: dict[str, Any], root: Path, path: Path) -> tuple[Reference, list[str]]:
    ref = pfile.reference
    warnings: list[str] = []
    rtype = ref.type
    if ref.file:
        file_path = _inside(root, ref.file, path, "reference.file")
        if rtype is None:
            rtype = REFERENCE_SUFFIXES.get(file_path.suffix)
            if rtype is None:
                raise ProblemError(
                    path,
                    "reference.type",
                    f"cannot tell the type of {ref.file!r}; set reference.type to cuda, cpu_c or python",
                )
    else:
        if rtype is None:
            present = [t for t, name in REFERENCE_FILES.items() if (root / name).is_file()]
            if not present:
                names = ", ".join(REFERENCE_FILES.values())
                raise ProblemError(path, "reference", f"no reference found: add one of {names} or set reference.file")
            rtype = present[0]
            if len(present) > 1:
                warnings.append(
                    f"problem.yaml: reference: several reference files; using "
                    f"{REFERENCE_FILES[rtype]} (set reference.type to choose)"
                )
        name = REFERENCE_FILES[rtype]
        if not (root / name).is_file():
            raise ProblemError(
                path, "reference.file", f"{name!r}: file not found (the default file for a {rtype} reference)"
            )
        file_path = _inside(root, name, path, "reference.file")

    function = ref.function
    if rtype in ("cuda", "python") and not function:
        raise ProblemError(
            path, "reference.function", f"required for a {rtype} reference (the entry point in {file_path.name})"
        )
    if function is not None and not IDENTIFIER.match(function):
        raise ProblemError(path, "reference.function", f"{function!r} is not a valid identifier")
    try:
        source = read_text_capped(file_path, MAX_SOURCE_BYTES, errors="replace")
    except OSError as exc:
        raise ProblemError(file_path, "", describe_read_error(exc)) from None
    if rtype == "python":
        _check_python_function(source, file_path, function or "")
    elif rtype == "cuda":
        if (function or "") not in global_function_lines(source):
            raise ProblemError(path, "reference.function", f"no __global__ function {function!r} in {file_path.name}")
    else:
        function = _cpu_function(source, function, file_path, path)

    block_raw = ref.block
    legacy = legacy_block(raw)
    if block_raw is None and legacy is not None:
        block_raw = Dim3Expr.model_validate(legacy)
    if block_raw is None:
        block = Dim3()
        if rtype == "cuda":
            warnings.append(
                "problem.yaml: reference.block: absent; the cuda reference runs with one thread "
                "per block (legal but very slow)"
            )
    else:
        block_exprs = tuple(
            _expression(v, path, f"reference.block.{a}", set())
            for a, v in zip("xyz", (block_raw.x, block_raw.y, block_raw.z), strict=True)
        )
        block = _dim3(block_exprs, {}, path, "reference.block", "a block")  # type: ignore[arg-type]
        if block.count() > MAX_THREADS_PER_BLOCK:
            raise ProblemError(
                path,
                "reference.block",
                f"{block.count()} threads per block; CUDA allows at most {MAX_THREADS_PER_BLOCK}",
            )
    return Reference(rtype, file_path, function, block), warnings


def _check_python_function(source: str, file_path: Path, function: str) -> None:
    try:
        tree = ast.parse(source, filename=file_path.name)
    except SyntaxError as exc:
        raise ProblemError(file_path, f"line {exc.lineno}", f"Python syntax error: {exc.msg}") from None
    except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes, nesting past the parser's limits
        raise ProblemError(file_path, "", f"cannot parse as Python ({type(exc).__name__})") from None
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    if function not in defined:
        raise ProblemError(
            file_path.parent / "problem.yaml",
            "reference.function",
            f"{function!r} is not defined in {file_path.name} itself (a top-level def is required)",
        )


def _cpu_function(source: str, function: str | None, file_path: Path, path: Path) -> str:
    found = c_function_definitions(source)  # linear time: the source is untrusted
    if function:
        if function not in found:
            raise ProblemError(path, "reference.function", f"no function {function!r} defined in {file_path.name}")
        return function
    if len(found) == 1:
        return found[0]
    if not found:
        raise ProblemError(path, "reference.function", f"no function definition found in {file_path.name}")
    raise ProblemError(
        path,
        "reference.function",
        f"{file_path.name} defines several functions ({', '.join(found)}); name the entry point",
    )


def _make_shape(
    name: str,
    scalars: dict[str, Number],
    args: list[Scalar | Buffer],
    grid_exprs: tuple[Expression, Expression, Expression],
    files: dict[str, Path],
    duration_s: float,
    inputs_path: Path,
    problem_path: Path,
    field_prefix: str,
) -> Shape:
    sizes: dict[str, int] = {}
    total = 0
    where_inputs = inputs_path if not field_prefix else problem_path
    for i, a in enumerate(args):
        if not isinstance(a, Buffer):
            continue
        field = (
            f"{field_prefix}{_arg_field(i, a.name, 'size')}"
            if not field_prefix
            else f"{field_prefix}: buffer {a.name!r} size"
        )
        try:
            count = a.size.evaluate_int(scalars)
        except ExpressionError as exc:
            raise ProblemError(where_inputs, field, str(exc)) from None
        if count <= 0:
            raise ProblemError(where_inputs, field, f"evaluates to {count} elements; a buffer needs at least 1")
        nbytes = count * a.itemsize
        if nbytes > MAX_GPU_BYTES:
            raise ProblemError(
                where_inputs,
                field,
                f"{count:,} {a.dtype} elements = {nbytes:,} bytes, larger than "
                f"any GPU's memory ({MAX_GPU_BYTES:,} bytes)",
            )
        sizes[a.name] = count
        total += nbytes
        source = files.get(a.name, a.file)
        if source is not None:
            actual = source.stat().st_size
            if actual != nbytes:
                ffield = f"{field_prefix}: files.{a.name}" if field_prefix else _arg_field(i, a.name, "file")
                raise ProblemError(
                    where_inputs,
                    ffield,
                    f"{source.name} holds {actual:,} bytes, expected {nbytes:,} ({count} {a.dtype} elements)",
                )
    if total > MAX_GPU_BYTES:
        raise ProblemError(
            where_inputs,
            f"{field_prefix}: args" if field_prefix else "args",
            f"all buffers together take {total:,} bytes, more than any GPU's memory ({MAX_GPU_BYTES:,} bytes)",
        )
    grid = _dim3(grid_exprs, scalars, problem_path, f"{field_prefix}: grid" if field_prefix else "grid", "a grid")
    merged_files = {a.name: a.file for a in args if isinstance(a, Buffer) and a.file is not None}
    merged_files.update(files)
    return Shape(name, dict(scalars), sizes, merged_files, grid, duration_s)


def _resolve_cases(
    cases: list[CaseSection],
    args: list[Scalar | Buffer],
    scalar_exprs: dict[str, Expression],
    base_scalars: dict[str, Number],
    grid_exprs: tuple[Expression, Expression, Expression],
    duration_s: float,
    inputs_path: Path,
    problem_path: Path,
    root: Path,
) -> list[Shape]:
    """The declared cases, in order: each one a scored shape (the first is the primary)."""
    shapes: list[Shape] = []
    seen: set[str] = set()
    scalars = [a for a in args if isinstance(a, Scalar)]
    buffers = {a.name: a for a in args if isinstance(a, Buffer)}
    for i, case in enumerate(cases):
        label = f"cases[{i}]"
        if not CASE_NAME.match(case.name):
            raise ProblemError(problem_path, f"{label}.name", f"{case.name!r} must match [A-Za-z0-9_-]+")
        if case.name in seen:
            raise ProblemError(problem_path, f"{label}.name", f"{case.name!r} is used twice (names must be unique)")
        seen.add(case.name)
        label = f"cases[{i}] ({case.name})"
        overrides: dict[str, Number] = {}
        for key, value in case.scalars.items():
            if key not in base_scalars:
                known = ", ".join(base_scalars) or "none"
                raise ProblemError(problem_path, f"{label}.scalars.{key}", f"unknown scalar (known: {known})")
            expr = _expression(value, problem_path, f"{label}.scalars.{key}", set(base_scalars))
            overrides[key] = _evaluate(expr, base_scalars, problem_path, f"{label}.scalars.{key}")
        # Scalars defined from other scalars follow the overrides, in args order.
        env: dict[str, Number] = {}
        for s in scalars:
            if s.name in overrides:
                value = overrides[s.name]
            else:
                value = _evaluate(scalar_exprs[s.name], env, problem_path, f"{label}.scalars")
            if s.dtype == "int":
                if isinstance(value, float) and not value.is_integer():
                    raise ProblemError(problem_path, f"{label}.scalars.{s.name}", f"{value} is not an integer")
                value = int(value)
            else:
                value = float(value)
            env[s.name] = value
        files: dict[str, Path] = {}
        for key, rel in case.files.items():
            if key not in buffers:
                raise ProblemError(problem_path, f"{label}.files.{key}", "unknown buffer")
            if buffers[key].init != "file":
                raise ProblemError(
                    problem_path, f"{label}.files.{key}", f"buffer {key!r} is not initialised from a file (init: file)"
                )
            files[key] = _inside(root, rel, problem_path, f"{label}.files.{key}", base="inputs")
        shapes.append(
            _make_shape(
                case.name,
                env,
                args,
                grid_exprs,
                files,
                case.duration_s or duration_s,
                inputs_path,
                problem_path,
                field_prefix=label,
            )
        )
    return shapes


def _compile_forbid(pfile: ProblemFile, path: Path) -> list[ForbidRule]:
    rules: list[ForbidRule] = []
    for i, entry in enumerate(pfile.rules.forbid):
        pattern, reason = (entry, "") if isinstance(entry, str) else (entry.pattern, entry.reason)
        field = f"rules.forbid[{i}]" if isinstance(entry, str) else f"rules.forbid[{i}].pattern"
        if not pattern:
            raise ProblemError(path, field, "empty pattern")
        try:
            rules.append(ForbidRule(re.compile(pattern, re.MULTILINE), reason))
        except re.error as exc:
            raise ProblemError(path, field, f"invalid regular expression {pattern!r}: {exc}") from None
    return rules


def _compute_capability(value: str | float | None, path: Path) -> str | None:
    """'9.0', 9.0, '90' or 'sm_90' -> '9.0'."""
    if value is None:
        return None
    text = str(value).strip().lower().removeprefix("sm_").removeprefix("compute_")
    m = re.fullmatch(r"(\d+)\.(\d)|(\d+)(\d)[a-z]?", text)
    if not m:
        raise ProblemError(path, "gpu.compute_capability", f"{value!r} is not a compute capability like '9.0'")
    major, minor = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
    return f"{int(major)}.{minor}"


def _check_floor(problem: Problem, shape: Shape, path: Path) -> None:
    try:
        nbytes, flops = problem.floor(shape)
    except ExpressionError as exc:
        raise ProblemError(path, "physical_floor", f"{exc} (shape {shape.name})") from None
    for label, value in (("bytes", nbytes), ("flops", flops)):
        if value is not None and value <= 0:
            raise ProblemError(path, f"physical_floor.{label}", f"evaluates to {value}; must be positive")
