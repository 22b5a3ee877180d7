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
from ktt.half_types import FINITE_MAX, HALF_DTYPES
from ktt.problem.errors import ProblemError
from ktt.problem.files import (
    INTEGER_DTYPES,
    INTEGER_RANGES,
    BufferArg,
    CaseSection,
    Dim3Expr,
    ExprValue,
    InputsFile,
    ProblemFile,
    ScalarArg,
)
from ktt.problem.legacy import (
    LEGACY_BLOCK_DEFAULT,
    LEGACY_KEYS,
    convert_inline_inputs,
    has_legacy_form,
    legacy_block,
)
from ktt.problem.model import Buffer, Dim3, ForbidRule, Problem, Reference, Scalar, Shape
from ktt.problem.yaml_io import read_yaml_mapping, validate_model
from ktt.toolkit import normalize_arch

# No GPU made so far has more memory than this; a buffer larger than it is a typo.
MAX_GPU_BYTES = 288 * 10**9
MAX_THREADS_PER_BLOCK = 1024
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
CASE_NAME = re.compile(r"^[A-Za-z0-9_-]+\Z")
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
    inline = has_legacy_form(raw) and not inputs_path.exists()
    if has_legacy_form(raw) and not inline:
        # The original reads inputs.yaml and ignores problem.yaml's inline keys (unknown keys).
        warnings.append(
            "problem.yaml: scalars/vectors: ignored; inputs.yaml describes the boundary (as in the original)"
        )
    if inline:
        warnings.append("problem.yaml: scalars/vectors: converted from the older inline form")
        inputs_raw = convert_inline_inputs(raw, problem_path, warnings)
        inputs_source = problem_path
    else:
        if not inputs_path.is_file():
            if _framework_form(root):
                raise ProblemError(
                    inputs_path,
                    "",
                    "file not found; this is the original's framework-file form (the boundary is C++ in "
                    "inputs.hpp, its DefineInputs()), which cacao does not read",
                    hint="describe the boundary in inputs.yaml (docs/INPUTS_YAML_GUIDE.md; docs/compatibility.md)",
                )
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

    _check_headers(inputs.headers, inputs_source, root)
    args, scalar_exprs = _resolve_args(inputs, inputs_source, root, warnings, python=inline)
    scalar_names = {a.name for a in args if isinstance(a, Scalar)}
    base_scalars = {a.name: a.value for a in args if isinstance(a, Scalar)}

    grid_exprs = _grid_expressions(pfile.grid, raw, problem_path, scalar_names, python=inline)
    if inline:
        warnings += _two_readings(args, grid_exprs, base_scalars)
    # The older inline form was run by the original's first tuner: grid counted threads and the
    # reference block defaulted to 8 x 8 (docs/compatibility.md). The newer form counts blocks.
    global_size_type = pfile.global_size_type
    if inline and "global_size_type" not in raw:
        global_size_type = "opencl"
    reference, ref_warnings = _resolve_reference(pfile, raw, root, problem_path, inline, global_size_type)
    warnings += ref_warnings
    rules_text, forbid = _resolve_rules(pfile.rules, problem_path, warnings)

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
                root=root,
            )
        ]

    floor_bytes = floor_flops = None
    if pfile.physical_floor is not None:
        if pfile.physical_floor.bytes is not None:
            floor_bytes = _expression(pfile.physical_floor.bytes, problem_path, "physical_floor.bytes", scalar_names)
        if pfile.physical_floor.flops is not None:
            floor_flops = _expression(pfile.physical_floor.flops, problem_path, "physical_floor.flops", scalar_names)
        elif "flops_dtype" in pfile.physical_floor.model_fields_set:
            warnings.append(f"{problem_path.name}: physical_floor.flops_dtype is set but no flops are declared")

    problem = Problem(
        directory=root,
        name=pfile.name or root.name,
        description=pfile.description.strip(),
        gpu_indices=pfile.gpu.index if isinstance(pfile.gpu.index, list) else [pfile.gpu.index],
        compute_capability=_compute_capability(pfile.gpu.compute_capability, problem_path),
        gpu_info=_gpu_info(pfile.gpu.advisory(), warnings),
        arch=_arch(pfile.gpu.arch, problem_path),
        inputs_file=inputs_source,
        global_size_type=global_size_type,
        grid_exprs=grid_exprs,
        reference=reference,
        tolerance=pfile.validation.tolerance,
        poison_outputs=pfile.validation.poison_outputs,
        rtol=pfile.validation.rtol,
        input_sets=pfile.validation.input_sets,
        flush_l2=pfile.timing.flush_l2,
        rules_text=rules_text,
        forbid=forbid,
        args=args,
        headers=list(inputs.headers),
        shared_setup=inputs.shared_setup,
        shapes=shapes,
        declared_cases=bool(pfile.cases),
        floor_bytes=floor_bytes,
        floor_flops=floor_flops,
        floor_flops_dtype=pfile.physical_floor.flops_dtype if pfile.physical_floor else "fp32",
        warnings=warnings,
    )
    for shape in problem.shapes:
        _check_floor(problem, shape, problem_path)
    return problem


def _framework_form(root: Path) -> bool:
    """The original's newest problems (branch framework-file-autotuning): an inputs.hpp that defines
    the boundary as C++ (``DefineInputs``) and a problem.yaml of metadata only."""
    try:
        text = read_text_capped(root / "inputs.hpp", MAX_SOURCE_BYTES, errors="replace")
    except OSError:
        return False
    return "DefineInputs" in text


def _expression(value: ExprValue, path: Path, field: str, known: set[str], python: bool = False) -> Expression:
    try:
        expr = Expression(value, python=python)
        expr.check_names(known)
    except ExpressionError as exc:
        raise ProblemError(path, field, str(exc)) from None
    return expr


def _two_readings(
    args: list[Scalar | Buffer], grid: tuple[Expression, Expression, Expression], env: dict[str, Number]
) -> list[str]:
    """The inline form's sizes and grid are Python (the original's eval); a text that means another
    number when read as C++ (where // starts a comment and / truncates) is worth a warning."""
    items = [(f"vectors: {a.name}.size", a.size) for a in args if isinstance(a, Buffer)]
    items += [(f"grid.{axis}", expr) for axis, expr in zip("xyz", grid, strict=True)]
    out = []
    for label, expr in items:
        if not expr.python or not expr.text:
            continue
        try:
            as_python: Number | str = expr.evaluate(env)
        except ExpressionError as exc:
            as_python = f"an error ({exc})"
        try:
            as_cpp: Number | str = Expression(expr.text).evaluate(env)
        except ExpressionError as exc:
            as_cpp = f"an error ({exc})"
        if as_python != as_cpp:
            out.append(
                f"problem.yaml: {label}: {expr.text!r} is {as_python} as the original reads it (a Python expression: "
                f"// is floor division, / true division), {as_cpp} read as C++ (// starts a comment, / truncates); "
                "the original's reading is used"
            )
    return out


def _evaluate(expr: Expression, env: dict[str, Number], path: Path, field: str) -> Number:
    try:
        return expr.evaluate(env)
    except ExpressionError as exc:
        raise ProblemError(path, field, str(exc)) from None


def _arg_field(index: int, name: str | None, key: str) -> str:
    label = f"args[{index}] ({name})" if name else f"args[{index}]"
    return f"{label}.{key}" if key else label


def _resolve_args(
    inputs: InputsFile, path: Path, root: Path, warnings: list[str], python: bool = False
) -> tuple[list[Scalar | Buffer], dict[str, Expression]]:
    """The boundary; ``python``: the older inline form, whose expressions are Python."""
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
            scalar = _resolve_scalar(item, i, env, scalar_exprs, path, warnings, python)
            env[name] = scalar.value
            resolved[i] = scalar
    # Buffers may size themselves by any scalar, declared before or after them.
    for i, item in enumerate(inputs.args):
        if isinstance(item, BufferArg):
            resolved[i] = _resolve_buffer(item, i, set(env), path, root, python)
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
    item: ScalarArg,
    i: int,
    env: dict[str, Number],
    exprs: dict[str, Expression],
    path: Path,
    warnings: list[str],
    python: bool = False,
) -> Scalar:
    field = _arg_field(i, item.name, "value")
    expr = _expression(item.value, path, field, set(env), python)
    value = _evaluate(expr, env, path, field)
    if item.dtype in INTEGER_DTYPES:
        if isinstance(value, float):
            if not value.is_integer():
                raise ProblemError(path, field, f"{value} is not an integer (dtype {item.dtype})")
            value = int(value)
        bits = INTEGER_RANGES[item.dtype]
        if not (-(2 ** (bits - 1)) <= value < 2 ** (bits - 1)):
            raise ProblemError(path, field, f"{value} does not fit in a {bits}-bit {item.dtype}")
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


def _resolve_buffer(item: BufferArg, i: int, scalars: set[str], path: Path, root: Path, python: bool = False) -> Buffer:
    size = _expression(item.size, path, _arg_field(i, item.name, "size"), scalars, python)
    if item.min is not None and item.max is not None and item.min > item.max:
        raise ProblemError(path, _arg_field(i, item.name, "min"), f"min {item.min} is larger than max {item.max}")
    for key, bound in (("min", item.min), ("max", item.max)):
        if item.dtype in HALF_DTYPES and bound is not None and not abs(bound) <= FINITE_MAX[item.dtype]:
            largest = f"{FINITE_MAX[item.dtype]:.6g}"
            raise ProblemError(
                path, _arg_field(i, item.name, key), f"{bound} is outside {item.dtype}'s range (±{largest})"
            )
    key = "file" if item.file is not None and item.file_name is None else "file_name"
    file_name = item.file_name if item.file_name is not None else item.file
    if item.file is not None and item.file_name is not None:
        raise ProblemError(
            path, _arg_field(i, item.name, "file"), "both file_name and its alias file are set; keep file_name"
        )
    if item.init == "file":
        if not file_name:
            raise ProblemError(
                path,
                _arg_field(i, item.name, "file_name"),
                "init: file needs a 'file_name:' (raw little-endian data under the problem's inputs/)",
            )
        _check_relative(file_name, path, _arg_field(i, item.name, key))
    elif file_name:
        raise ProblemError(
            path, _arg_field(i, item.name, key), f"{key!r} is only used with init: file (init is {item.init!r})"
        )
    for name in ("mean", "std"):
        if getattr(item, name) is not None and item.init != "normal":
            why = f"{name!r} is only used with init: normal (init is {item.init!r})"
            raise ProblemError(path, _arg_field(i, item.name, name), why)
    if item.init == "normal" and item.dtype in INTEGER_DTYPES:
        why = "init: normal draws floats; use random for an integer buffer"
        raise ProblemError(path, _arg_field(i, item.name, "init"), why)
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
        file_name=file_name if item.init == "file" else None,
        file_key=key,
        validate=item.validate_,
        mean=item.mean,
        std=item.std,
    )


_HEADER_NAME = r"[A-Za-z0-9_][A-Za-z0-9_./+-]*"
HEADER = re.compile(rf'^(<{_HEADER_NAME}>|"{_HEADER_NAME}"|{_HEADER_NAME})$')


def _check_headers(headers: list[str], path: Path, root: Path) -> None:
    """``headers`` are #includes of the host generators: <system> ones, or files of the problem."""
    for i, header in enumerate(headers):
        field = f"headers[{i}]"
        if not isinstance(header, str) or not HEADER.match(header) or ".." in header.split("/"):
            raise ProblemError(path, field, f"{str(header)[:80]!r} is not an include like '<cmath>' or 'my.h'")
        if not header.startswith("<"):
            _inside(root, header.strip('"'), path, field)


def _check_relative(name: str, path: Path, field: str) -> None:
    """A data file is named relative to the problem, without '..' (as the original requires)."""
    candidate = Path(name)
    if candidate.is_absolute():
        raise ProblemError(path, field, f"{name!r} is absolute; name a file under the problem's inputs/")
    if ".." in candidate.parts:
        raise ProblemError(path, field, f"{name!r} contains '..'; name a file under the problem's inputs/")


def _data_file(root: Path, buffer: Buffer, name: str, nbytes: int, count: int, path: Path, field: str) -> Path:
    """The file an init: file buffer reads in one shape: present, inside the problem, exactly ``nbytes``.

    ``file_name`` is under inputs/ (the original's rule); the older ``file`` key is relative to
    the problem directory, a bare name looked for there and then in inputs/.
    """
    rel = f"inputs/{name}" if buffer.file_key == "file_name" else name
    where = root / rel
    if buffer.file_key == "file" and not where.exists() and len(Path(name).parts) == 1:
        where = root / "inputs" / name
    want = f"{count:,} {buffer.dtype} elements = {nbytes:,} bytes, raw little-endian"
    if not where.exists():
        shown = where.relative_to(root) if where.is_relative_to(root) else where
        raise ProblemError(path, field, f"{shown}: not found (this shape needs {want})")
    resolved = _inside(root, str(where.relative_to(root)), path, field)
    actual = resolved.stat().st_size
    if actual != nbytes:
        elements = f"{count:,} {buffer.dtype} elements"
        raise ProblemError(path, field, f"{resolved.name} holds {actual:,} bytes, expected {nbytes:,} ({elements})")
    return resolved


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
    grid: Dim3Expr | None, raw: dict[str, Any], path: Path, known: set[str], python: bool = False
) -> tuple[Expression, Expression, Expression]:
    if grid is None:
        raise ProblemError(path, "grid", "missing (required): the launch grid, e.g. {x: 'N / 16', y: 'M / 16'}")
    return (
        _expression(grid.x, path, "grid.x", known, python),
        _expression(grid.y, path, "grid.y", known, python),
        _expression(grid.z, path, "grid.z", known, python),
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


def _resolve_reference(
    pfile: ProblemFile, raw: dict[str, Any], root: Path, path: Path, inline: bool, global_size_type: str
) -> tuple[Reference, list[str]]:
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
    if rtype == "cuda" and not function:
        # A python reference may omit it: the first public function of ref.py is used, as in the original.
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
        if function:
            _check_python_function(source, file_path, function)
    elif rtype == "cuda":
        if (function or "") not in global_function_lines(source):
            raise ProblemError(path, "reference.function", f"no __global__ function {function!r} in {file_path.name}")
    else:
        function = _cpu_function(source, function, file_path, path)

    block = _reference_block(ref.block, raw, path, rtype, inline, global_size_type, warnings)
    return Reference(rtype, file_path, function, block), warnings


def _reference_block(
    nested: Dim3Expr | None,
    raw: dict[str, Any],
    path: Path,
    rtype: str,
    inline: bool,
    global_size_type: str,
    warnings: list[str],
) -> Dim3:
    """The cuda reference's launch block: nested ``block``, else the flat ``block_x/y/z`` keys.

    The flat keys (in ``reference`` or at the top level) are the older form's; its tuner used
    them, 8 x 8 when absent. The newer original ignores them and launches one thread per block,
    so in the newer form they are used where only the block count changes (opencl grids).
    """
    if rtype != "cuda":
        return Dim3()
    flat = legacy_block(raw)  # axes not named are 1 (8 x 8 would exceed 1024 threads with block_x: 256)
    if nested is None and flat is not None:
        if inline or global_size_type == "opencl":
            nested = Dim3Expr.model_validate(flat)
        else:
            warnings.append(
                "problem.yaml: reference.block_x/y/z: ignored, as the original ignores them: the grid counts "
                "blocks (global_size_type cuda), so another block would launch other threads; "
                "write reference.block: {x: ..., y: ...}"
            )
    if inline and "global_size_type" not in raw:
        warnings.append(
            "problem.yaml: global_size_type: not set; the inline form's grid counts threads (opencl), "
            "as the original's first tuner read it"
        )
    if nested is None and inline:
        nested = Dim3Expr.model_validate(LEGACY_BLOCK_DEFAULT)
    if nested is None:
        warnings.append(
            "problem.yaml: reference.block: absent; the cuda reference runs with one thread "
            "per block (legal but very slow)"
        )
        return Dim3()
    block_exprs = tuple(
        _expression(v, path, f"reference.block.{a}", set())
        for a, v in zip("xyz", (nested.x, nested.y, nested.z), strict=True)
    )
    block = _dim3(block_exprs, {}, path, "reference.block", "a block")  # type: ignore[arg-type]
    if block.count() > MAX_THREADS_PER_BLOCK:
        raise ProblemError(
            path,
            "reference.block",
            f"{block.count()} threads per block; CUDA allows at most {MAX_THREADS_PER_BLOCK}",
        )
    return block


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
    file_names: dict[str, tuple[str, Path, str]],
    duration_s: float,
    inputs_path: Path,
    problem_path: Path,
    field_prefix: str,
    root: Path,
) -> Shape:
    """Sizes, grid and data files of one shape; ``file_names``: buffer -> (name, file, field) overrides."""
    sizes: dict[str, int] = {}
    files: dict[str, Path] = {}
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
        if a.init == "file" and a.file_name is not None:
            fname, fpath, ffield = file_names.get(a.name, (a.file_name, inputs_path, _arg_field(i, a.name, a.file_key)))
            files[a.name] = _data_file(root, a, fname, nbytes, count, fpath, ffield)
    if total > MAX_GPU_BYTES:
        raise ProblemError(
            where_inputs,
            f"{field_prefix}: args" if field_prefix else "args",
            f"all buffers together take {total:,} bytes, more than any GPU's memory ({MAX_GPU_BYTES:,} bytes)",
        )
    grid = _dim3(grid_exprs, scalars, problem_path, f"{field_prefix}: grid" if field_prefix else "grid", "a grid")
    return Shape(name, dict(scalars), sizes, files, grid, duration_s)


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
            if s.dtype in INTEGER_DTYPES:
                if isinstance(value, float) and not value.is_integer():
                    raise ProblemError(problem_path, f"{label}.scalars.{s.name}", f"{value} is not an integer")
                value = int(value)
            else:
                value = float(value)
            env[s.name] = value
        files: dict[str, tuple[str, Path, str]] = {}
        for key, rel in case.files.items():
            field = f"{label}.files.{key}"
            if key not in buffers:
                raise ProblemError(problem_path, field, "unknown buffer")
            if buffers[key].init != "file":
                raise ProblemError(problem_path, field, f"buffer {key!r} is not initialised from a file (init: file)")
            _check_relative(rel, problem_path, field)
            files[key] = (rel, problem_path, field)
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
                root=root,
            )
        )
    return shapes


def _resolve_rules(raw: Any, path: Path, warnings: list[str]) -> tuple[list[str], list[ForbidRule]]:
    """``rules`` as the original reads it: a string, a list of strings, or {text, forbid}.

    A malformed block or entry is warned about and ignored, never fatal (utils/rules.py).
    """
    if not raw:
        return [], []
    if isinstance(raw, str):
        return [raw], []
    if isinstance(raw, list):
        return _rule_texts(raw), []
    if not isinstance(raw, dict):
        warnings.append(f"problem.yaml: rules: expected a string, a list or a mapping, got {_kind(raw)}; ignored")
        return [], []
    unknown = sorted(str(k) for k in raw if k not in ("text", "forbid"))
    warnings += [f"problem.yaml: rules.{k}: unknown key (ignored)" for k in unknown]
    text_raw = raw.get("text") or []
    if isinstance(text_raw, str):
        text_raw = [text_raw]
    if not isinstance(text_raw, list):
        warnings.append(f"problem.yaml: rules.text: expected a string or a list, got {_kind(text_raw)}; ignored")
        text_raw = []
    forbid_raw = raw.get("forbid") or []
    if isinstance(forbid_raw, (str, dict)):
        forbid_raw = [forbid_raw]  # one pattern written without the list
    if not isinstance(forbid_raw, list):
        warnings.append(f"problem.yaml: rules.forbid: expected a list, got {_kind(forbid_raw)}; ignored")
        forbid_raw = []
    forbid: list[ForbidRule] = []
    for i, entry in enumerate(forbid_raw):
        field = f"rules.forbid[{i}]"
        if isinstance(entry, str):
            pattern, reason = entry, ""
        elif isinstance(entry, dict) and isinstance(entry.get("pattern"), str) and entry["pattern"]:
            pattern, reason = entry["pattern"], str(entry.get("reason") or "")
            field += ".pattern"
        else:
            warnings.append(f"problem.yaml: {field}: not a pattern or {{pattern, reason}}; skipped")
            continue
        if not pattern.strip():
            warnings.append(f"problem.yaml: {field}: empty pattern; skipped")
            continue
        try:
            forbid.append(ForbidRule(re.compile(pattern, re.MULTILINE), reason))
        except re.error as exc:
            warnings.append(f"problem.yaml: {field}: invalid regular expression {pattern!r} ({exc}); skipped")
    return _rule_texts(text_raw), forbid


def _rule_texts(items: list[Any]) -> list[str]:
    return [str(item) for item in items if item is not None and str(item).strip()]


def _kind(value: Any) -> str:
    return "a number" if isinstance(value, (int, float)) and not isinstance(value, bool) else type(value).__name__


MAX_GPU_INFO_KEYS = 32
MAX_GPU_INFO_CHARS = 200


def _gpu_info(advisory: dict[str, Any], warnings: list[str]) -> dict[str, str | int | float]:
    """gpu.* metadata for the prompts: plain values only, bounded (it is pasted into a prompt)."""
    out: dict[str, str | int | float] = {}
    for key, value in advisory.items():
        if len(out) >= MAX_GPU_INFO_KEYS:
            warnings.append(f"problem.yaml: gpu: more than {MAX_GPU_INFO_KEYS} keys; the rest are ignored")
            break
        name = str(key)
        if not IDENTIFIER.match(name) or len(name) > 64:
            warnings.append(f"problem.yaml: gpu: key {name[:64]!r} is not a plain name; ignored")
        elif isinstance(value, bool) or not isinstance(value, (str, int, float)):
            warnings.append(f"problem.yaml: gpu.{name}: expected a number or a short text; ignored")
        elif isinstance(value, str):
            text = " ".join(value.split())
            out[name] = text if len(text) <= MAX_GPU_INFO_CHARS else text[: MAX_GPU_INFO_CHARS - 3] + "..."
        else:
            out[name] = value
    return out


def _arch(value: str | None, path: Path) -> str | None:
    if value is None:
        return None
    try:
        return normalize_arch(str(value))
    except ValueError as exc:
        raise ProblemError(path, "gpu.arch", str(exc)) from None


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
