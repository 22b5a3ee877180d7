"""A new problem directory from a few fields: the writer behind the UI's new-problem dialog.

``write_problem`` renders problem.yaml, inputs.yaml and a reference, validates them with
the same loader as ``cacao --check`` in a hidden temporary directory beside the target,
and only then renames that directory into place. On any error nothing is left behind and
the ``ProblemError`` names the file as it would have been written.

Without ``reference_source`` the reference is a stub with the right signature that fails
loudly when run (a trap, ``abort()``, ``NotImplementedError``): a problem never gets a
reference that silently computes nothing.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cacao_tui.problem.names import directory_name_error
from ktt.problem import Problem, ProblemError, load_problem
from ktt.problem.files import Arg, BufferArg, Dim3Expr, ExprValue, ForbidEntry, ScalarArg
from ktt.problem.loader import REFERENCE_FILES
from ktt.problem.yaml_io import field_path

ReferenceType = Literal["cuda", "cpu_c", "python"]


class NewProblem(BaseModel):
    """What the new-problem dialog asks for. ``args`` use the inputs.yaml models."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    args: list[Arg]
    grid: Dim3Expr
    reference_type: ReferenceType = "cuda"
    reference_function: str | None = None  # default: <name>_ref
    reference_source: str | None = None  # default: a stub that fails loudly
    block: Dim3Expr | None = None  # for a cuda reference
    tolerance: float = Field(default=1e-4, ge=0)
    duration_s: float = Field(default=20.0, gt=0)
    gpu_index: int = Field(default=0, ge=0)
    compute_capability: str | None = None
    rules_text: list[str] = Field(default_factory=list)
    forbid: list[ForbidEntry] = Field(default_factory=list)
    floor_bytes: ExprValue | None = None
    floor_flops: ExprValue | None = None


def function_name(new: NewProblem) -> str:
    if new.reference_function:
        return new.reference_function
    ident = re.sub(r"[^A-Za-z0-9_]", "_", new.name)
    return f"{'p_' if ident[:1].isdigit() else ''}{ident}_ref"


def _signature(new: NewProblem, buffers_only: bool) -> str:
    ctypes = {"int": "int", "float": "float", "double": "double"}
    parts = []
    for a in new.args:
        if isinstance(a, BufferArg):
            const = "const " if a.access == "read" else ""
            parts.append(f"{const}{ctypes.get(a.dtype, a.dtype)}* {a.name}")
        elif isinstance(a, ScalarArg) and "runtime" in a.placements and not buffers_only:
            parts.append(f"{ctypes.get(a.dtype, a.dtype)} {a.name}")
    return ", ".join(parts)


def _reference_stub(new: NewProblem) -> str:
    func = function_name(new)
    if new.reference_type == "cuda":
        return (
            f"// Reference for {new.name}: launched with the problem's grid and reference.block.\n"
            "// Scalars with placement 'define' arrive as -D macros. Replace the body with the real computation.\n"
            f'extern "C" __global__ void {func}({_signature(new, buffers_only=False)}) {{\n'
            "    __trap();  // not written yet: fail loudly rather than produce wrong reference values\n"
            "}\n"
        )
    if new.reference_type == "cpu_c":
        return (
            f"/* Reference for {new.name}: the buffers in args order (read-only ones const);\n"
            "   scalars arrive as -D macros. Replace the body with the real computation. */\n"
            "#include <stdlib.h>\n\n"
            f"void {func}({_signature(new, buffers_only=True)}) {{\n"
            "    abort(); /* not written yet */\n"
            "}\n"
        )
    return (
        f'"""Reference for {new.name}: returns the validated buffer\'s values."""\n\n'
        "import numpy as np  # noqa: F401\n\n\n"
        f"def {func}(scalars, buffers):\n"
        f'    raise NotImplementedError("write the reference for {new.name} in ref.py")\n'
    )


def _dim3(d: Dim3Expr) -> dict[str, Any]:
    return {axis: getattr(d, axis) for axis in "xyz" if getattr(d, axis) != 1} or {"x": 1}


def _problem_yaml(new: NewProblem) -> str:
    data: dict[str, Any] = {"name": new.name}
    if new.description:
        data["description"] = new.description
    gpu: dict[str, Any] = {"index": new.gpu_index}
    if new.compute_capability:
        gpu["compute_capability"] = new.compute_capability
    data["gpu"] = gpu
    data["grid"] = _dim3(new.grid)
    ref: dict[str, Any] = {"type": new.reference_type, "file": REFERENCE_FILES[new.reference_type]}
    ref["function"] = function_name(new)
    if new.block is not None:
        ref["block"] = _dim3(new.block)
    data["reference"] = ref
    data["validation"] = {"tolerance": new.tolerance}
    data["tuning"] = {"duration_s": new.duration_s}
    floor = {k: v for k, v in (("bytes", new.floor_bytes), ("flops", new.floor_flops)) if v is not None}
    if floor:
        data["physical_floor"] = floor
    rules: dict[str, Any] = {}
    if new.rules_text:
        rules["text"] = list(new.rules_text)
    if new.forbid:
        rules["forbid"] = [{"pattern": f.pattern, **({"reason": f.reason} if f.reason else {})} for f in new.forbid]
    if rules:
        data["rules"] = rules
    header = (
        f"# {new.name}: written by cacao's new-problem template. Check it with: cacao --dir <this dir> --check\n"
        "# State the physical floor here (bytes moved, flops) so impossible times are flagged;\n"
        "# see docs/PROBLEM_YAML_GUIDE.md.\n"
    )
    return header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


def _arg_entry(arg: ScalarArg | BufferArg) -> str:
    """One arg as a flow mapping on one line, without keys that only restate a default."""
    data = arg.model_dump(by_alias=True, exclude_none=True)
    if isinstance(arg, ScalarArg):
        if data.get("placements") == ["host", "define"]:
            del data["placements"]
    else:
        if not data.get("validate"):
            data.pop("validate", None)
        if arg.access == "write" and arg.init == "random":
            del data["init"]  # an output is poisoned before every run; its init is never used
    text = yaml.safe_dump(data, sort_keys=False, default_flow_style=True, allow_unicode=True, width=10**6)
    return text.strip()


def _inputs_yaml(new: NewProblem) -> str:
    lines = [
        "# The I/O boundary: kernels take every buffer and every runtime scalar, in this order.",
        "headers: []",
        "args:",
        *(f"  - {_arg_entry(a)}" for a in new.args),
    ]
    return "\n".join(lines) + "\n"


def render_problem_files(new: NewProblem) -> dict[str, str]:
    """File name -> text, for a preview; ``write_problem`` writes exactly these."""
    reference = new.reference_source if new.reference_source is not None else _reference_stub(new)
    return {
        "problem.yaml": _problem_yaml(new),
        "inputs.yaml": _inputs_yaml(new),
        REFERENCE_FILES[new.reference_type]: reference,
    }


def new_problem_from_fields(fields: dict[str, Any], where: Path) -> NewProblem:
    """Validate dialog fields into a ``NewProblem``; a mistake is one ``ProblemError`` line."""
    try:
        return NewProblem.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        msg = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
        raise ProblemError(where, field_path(tuple(first["loc"]), fields), msg[:1].lower() + msg[1:]) from None


def write_problem(new: NewProblem, parent: Path) -> tuple[Path, Problem]:
    """Create ``parent/new.name`` as a validated problem directory; refuse to write on any error."""
    parent = Path(parent).expanduser().resolve()
    target = parent / new.name
    why = directory_name_error(new.name)
    if why:
        raise ProblemError(target, "name", why)
    if target.exists() or target.is_symlink():
        raise ProblemError(target, "", "already exists; choose another name")
    if not parent.is_dir():
        raise ProblemError(parent, "", "no such directory to create the problem in")
    staging = Path(tempfile.mkdtemp(prefix=f".{new.name}.new-", dir=parent))
    try:
        os.chmod(staging, 0o777 & ~_umask())  # mkdtemp makes it private; a problem directory is not
        for name, text in render_problem_files(new).items():
            (staging / name).write_text(text, encoding="utf-8")
        try:
            staged = load_problem(staging)
        except ProblemError as exc:
            raise _rerooted(exc, staging, target) from None
        _refuse_bad_rules(staged, target)
        if target.exists():
            raise ProblemError(target, "", "already exists; choose another name")
        os.rename(staging, target)
    except BaseException:
        with contextlib.suppress(OSError):
            shutil.rmtree(staging)
        raise
    return target, load_problem(target)


def _refuse_bad_rules(problem: Problem, target: Path) -> None:
    """A rule the loader would skip (a bad regex) is a warning for a file; typed into the form now, an error."""
    for w in problem.warnings:
        if w.startswith("problem.yaml: rules"):
            field, _, message = w.removeprefix("problem.yaml: ").partition(": ")
            raise ProblemError(target / "problem.yaml", field, message.removesuffix("; skipped"))


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _rerooted(exc: ProblemError, staging: Path, target: Path) -> ProblemError:
    """The same error, naming the file where it would have been written."""
    try:
        file = target / exc.file.relative_to(staging)
    except ValueError:
        file = exc.file
    message = exc.message.replace(str(staging), str(target))
    return ProblemError(file, exc.field, message, exc.hint)
