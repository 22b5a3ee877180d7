"""The tuning spec (tuning.yaml): tune parameters, restrictions and an ordered list of launches.

Vocabulary follows Kernel Tuner where the idea is the same: ``tune_params`` (name -> list
of values), ``restrictions`` (expressions that a configuration must satisfy). Each
parameter reaches the kernel source as a ``-D`` macro. ``launches`` lists the kernels
of one configuration in order, so a multi-kernel pipeline is timed as one unit.

Expressions (restrictions, grid, block, shared memory, scratch sizes) are evaluated by
``ktt.expressions`` over the tune parameters and the problem's scalars.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ktt.compiler_options import option_problem
from ktt.expressions import Expression, ExpressionError, Number
from ktt.problem.errors import ProblemError
from ktt.problem.files import DTYPES, check_dtype, reject_bool
from ktt.problem.model import Buffer, Dim3, Problem, Scalar, Shape
from ktt.problem.yaml_io import parse_yaml_mapping, read_yaml_mapping, validate_model

ParamValue = int | float | str
Config = dict[str, ParamValue]

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_THREADS_PER_BLOCK = 1024
MAX_STREAMS = 8
DEFAULT_STATIC_SHARED_LIMIT = 48 * 1024
# Bounds on a model-written spec (docs/SECURITY.md, "Bounds"): the space walk recurses once
# per parameter, and every restriction is evaluated for every configuration visited.
MAX_TUNE_PARAMS = 64
MAX_PARAM_VALUES = 10_000
MAX_RESTRICTIONS = 256


_MAIN_STREAM = Expression(0)


class SpecError(ProblemError):
    """A mistake in tuning.yaml (same one-line form as problem errors)."""


class _SpecModel(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Dim3Spec(_SpecModel):
    x: int | str = 1
    y: int | str = 1
    z: int | str = 1

    _nb = field_validator("x", "y", "z", mode="before")(reject_bool)


class ValueArg(_SpecModel):
    """A scalar argument computed from an expression, e.g. ``{value: "N / 2", dtype: int}``."""

    value: int | float | str
    dtype: str = "int"

    _dtype = field_validator("dtype")(check_dtype)


LaunchArg = Annotated[str | ValueArg, Field(union_mode="left_to_right")]


class LaunchSpec(_SpecModel):
    kernel: str
    grid: Dim3Spec
    block: Dim3Spec
    shared_mem: int | str = Field(default=0, alias="shared_mem")
    args: list[LaunchArg] | None = None  # None: the problem's boundary, in args order
    stream: int | str = 0  # 0: the main stream; N > 0: a side stream, forked from and joined to the main one

    _nb = field_validator("shared_mem", "stream", mode="before")(reject_bool)


class ScratchSpec(_SpecModel):
    """A temporary device buffer for a pipeline (partial sums, transposed copies...)."""

    name: str
    dtype: str = "float"
    size: int | str
    zero: bool = True  # memset to zero before each run of the launch sequence

    _nb = field_validator("size", mode="before")(reject_bool)

    _dtype = field_validator("dtype")(check_dtype)


class TuningFile(_SpecModel):
    tune_params: dict[str, list[ParamValue]] = Field(default_factory=dict)
    restrictions: list[str] = Field(default_factory=list)
    launches: list[LaunchSpec]
    scratch: list[ScratchSpec] = Field(default_factory=list)
    compiler_options: list[str] = Field(default_factory=list)
    duration_s: float | None = Field(default=None, gt=0)
    max_configs: int | None = Field(default=None, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _nulls_are_defaults(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if v is not None or k == "launches"}
        return data

    @field_validator("tune_params")
    @classmethod
    def _params(cls, params: dict[str, list[ParamValue]]) -> dict[str, list[ParamValue]]:
        if len(params) > MAX_TUNE_PARAMS:
            raise ValueError(f"{len(params)} parameters; at most {MAX_TUNE_PARAMS}")
        for name, values in params.items():
            if len(values) > MAX_PARAM_VALUES:
                raise ValueError(f"{name}: {len(values):,} values; at most {MAX_PARAM_VALUES:,}")
            if not IDENTIFIER.match(name):
                raise ValueError(f"{name!r} is not a valid macro name")
            if not values:
                raise ValueError(f"{name}: an empty list of values")
            if any(isinstance(v, bool) for v in values):
                raise ValueError(f"{name}: use 0/1 instead of true/false")
            if len(set(map(repr, values))) != len(values):
                raise ValueError(f"{name}: a value is listed twice")
        return params

    @field_validator("restrictions")
    @classmethod
    def _few_restrictions(cls, restrictions: list[str]) -> list[str]:
        if len(restrictions) > MAX_RESTRICTIONS:
            raise ValueError(f"{len(restrictions)} restrictions; at most {MAX_RESTRICTIONS} (join them with &&)")
        return restrictions

    @field_validator("launches")
    @classmethod
    def _non_empty(cls, launches: list[LaunchSpec]) -> list[LaunchSpec]:
        if not launches:
            raise ValueError("empty: at least one kernel launch is needed")
        return launches


@dataclass(frozen=True)
class ResolvedArg:
    """One kernel argument of one launch: a problem buffer, a scratch buffer or a value."""

    kind: Literal["buffer", "scratch", "value"]
    name: str
    dtype: str
    expr: Expression | None = None  # for kind == value


@dataclass(frozen=True)
class Launch:
    kernel: str
    grid: tuple[Expression, Expression, Expression]
    block: tuple[Expression, Expression, Expression]
    shared_mem: Expression
    args: tuple[ResolvedArg, ...]
    stream: Expression = _MAIN_STREAM


@dataclass(frozen=True)
class Scratch:
    name: str
    dtype: str
    size: Expression
    zero: bool

    @property
    def itemsize(self) -> int:
        return DTYPES[self.dtype][1]


@dataclass(frozen=True)
class LaunchGeometry:
    """A launch with every expression evaluated for one configuration and shape."""

    kernel: str
    grid: Dim3
    block: Dim3
    shared_mem: int
    args: tuple[tuple[ResolvedArg, Number | None], ...]  # value only for kind == value
    stream: int = 0


@dataclass
class TuningSpec:
    path: Path
    tune_params: dict[str, list[ParamValue]]
    restrictions: list[Expression]
    launches: list[Launch]
    scratch: list[Scratch]
    compiler_options: list[str]
    duration_s: float | None
    max_configs: int | None

    @property
    def param_names(self) -> list[str]:
        return list(self.tune_params)

    def space_size(self) -> int:
        """Size of the Cartesian product, before restrictions."""
        n = 1
        for values in self.tune_params.values():
            n *= len(values)
        return n

    def env(self, config: Config, shape: Shape) -> dict[str, Number]:
        """Names visible to expressions: the shape's scalars, then the tune parameters."""
        env: dict[str, Number] = dict(shape.scalars)
        for k, v in config.items():
            if isinstance(v, (int, float)):
                env[k] = v
        return env

    def satisfies(self, config: Config, shape: Shape) -> bool:
        env = self.env(config, shape)
        return all(bool(r.evaluate(env)) for r in self.restrictions)

    def geometry(self, config: Config, shape: Shape) -> list[LaunchGeometry]:
        """Evaluate every launch for one configuration. Raises ExpressionError on a bad value."""
        env = self.env(config, shape)
        out = []
        for launch in self.launches:
            grid = Dim3(*(e.evaluate_int(env) for e in launch.grid))
            block = Dim3(*(e.evaluate_int(env) for e in launch.block))
            smem = launch.shared_mem.evaluate_int(env)
            args = tuple((a, a.expr.evaluate(env) if a.expr is not None else None) for a in launch.args)
            stream = launch.stream.evaluate_int(env)
            if stream < 0 or stream > MAX_STREAMS:
                raise ExpressionError(f"{launch.kernel}: stream {stream} out of range 0..{MAX_STREAMS}")
            if smem < 0:
                raise ExpressionError(f"{launch.kernel}: shared_mem evaluates to {smem}")
            out.append(LaunchGeometry(launch.kernel, grid, block, smem, args, stream))
        return out

    def scratch_sizes(self, config: Config, shape: Shape) -> dict[str, int]:
        env = self.env(config, shape)
        return {s.name: s.size.evaluate_int(env) for s in self.scratch}


def load_spec(path: Path | str, problem: Problem) -> TuningSpec:
    """Read and check tuning.yaml against the problem it tunes."""
    path = Path(path)
    try:
        raw = read_yaml_mapping(path)
    except ProblemError as exc:
        raise SpecError(exc.file, exc.field, exc.message) from None
    return _spec_from_raw(raw, path, problem)


def load_spec_text(text: str, problem: Problem, path: Path | str = "tuning.yaml") -> TuningSpec:
    """The same as ``load_spec`` for YAML already in memory (errors name ``path``); the same YAML budget."""
    path = Path(path)
    try:
        raw = parse_yaml_mapping(text, path)
    except ProblemError as exc:
        raise SpecError(exc.file, exc.field, exc.message) from None
    return _spec_from_raw(raw, path, problem)


def _spec_from_raw(raw: dict[str, Any], path: Path, problem: Problem) -> TuningSpec:
    try:
        tf = validate_model(TuningFile, raw, path)
    except ProblemError as exc:
        raise SpecError(exc.file, exc.field, exc.message) from None
    return resolve_spec(tf, path, problem)


def resolve_spec(tf: TuningFile, path: Path, problem: Problem) -> TuningSpec:
    scalars = {s.name for s in problem.scalars}
    clash = sorted(set(tf.tune_params) & scalars)
    if clash:
        raise SpecError(path, f"tune_params.{clash[0]}", "has the name of a problem scalar; rename the parameter")
    known = scalars | set(tf.tune_params)

    def expr(value: int | float | str, field: str) -> Expression:
        try:
            e = Expression(value)
            e.check_names(known)
        except ExpressionError as exc:
            raise SpecError(path, field, str(exc)) from None
        return e

    restrictions = [expr(r, f"restrictions[{i}]") for i, r in enumerate(tf.restrictions)]

    scratch: list[Scratch] = []
    buffer_names = {b.name for b in problem.buffers}
    for i, s in enumerate(tf.scratch):
        if not IDENTIFIER.match(s.name):
            raise SpecError(path, f"scratch[{i}].name", f"{s.name!r} is not a valid identifier")
        if s.name in buffer_names or s.name in known or any(x.name == s.name for x in scratch):
            raise SpecError(path, f"scratch[{i}].name", f"{s.name!r} is already used")
        scratch.append(Scratch(s.name, s.dtype, expr(s.size, f"scratch[{i}].size"), s.zero))
    scratch_names = {s.name: s for s in scratch}

    launches = []
    for i, ls in enumerate(tf.launches):
        label = f"launches[{i}]"
        if not IDENTIFIER.match(ls.kernel):
            raise SpecError(path, f"{label}.kernel", f"{ls.kernel!r} is not a valid kernel name")
        grid = tuple(
            expr(v, f"{label}.grid.{a}") for a, v in zip("xyz", (ls.grid.x, ls.grid.y, ls.grid.z), strict=True)
        )
        block = tuple(
            expr(v, f"{label}.block.{a}") for a, v in zip("xyz", (ls.block.x, ls.block.y, ls.block.z), strict=True)
        )
        smem = expr(ls.shared_mem, f"{label}.shared_mem")
        args = _resolve_args(ls.args, problem, scratch_names, f"{label}.args", path, expr)
        stream = expr(ls.stream, f"{label}.stream")
        launches.append(Launch(ls.kernel, grid, block, smem, args, stream))  # type: ignore[arg-type]

    for i, opt in enumerate(tf.compiler_options):
        problem_text = option_problem(opt)  # exact forms only: no fast math, no file arguments
        if problem_text is not None:
            raise SpecError(path, f"compiler_options[{i}]", f"{opt[:80]!r}: {problem_text}")

    return TuningSpec(
        path=path,
        tune_params=dict(tf.tune_params),
        restrictions=restrictions,
        launches=launches,
        scratch=scratch,
        compiler_options=list(tf.compiler_options),
        duration_s=tf.duration_s,
        max_configs=tf.max_configs,
    )


def _resolve_args(
    args: list[str | ValueArg] | None, problem: Problem, scratch: dict[str, Scratch], field: str, path: Path, expr: Any
) -> tuple[ResolvedArg, ...]:
    if args is None:
        out = []
        for a in problem.boundary:
            if isinstance(a, Buffer):
                out.append(ResolvedArg("buffer", a.name, a.dtype))
            else:
                out.append(ResolvedArg("value", a.name, a.dtype, Expression(a.name)))
        return tuple(out)
    by_name: dict[str, Buffer | Scalar] = {a.name: a for a in problem.args}
    resolved = []
    for j, item in enumerate(args):
        if isinstance(item, ValueArg):
            resolved.append(ResolvedArg("value", f"arg{j}", item.dtype, expr(item.value, f"{field}[{j}].value")))
            continue
        if item in scratch:
            resolved.append(ResolvedArg("scratch", item, scratch[item].dtype))
        elif item in by_name:
            a = by_name[item]
            if isinstance(a, Buffer):
                resolved.append(ResolvedArg("buffer", a.name, a.dtype))
            else:
                resolved.append(ResolvedArg("value", a.name, a.dtype, Expression(a.name)))
        else:
            known = ", ".join([*by_name, *scratch]) or "none"
            raise SpecError(path, f"{field}[{j}]", f"unknown argument {item!r} (buffers, scalars and scratch: {known})")
    return tuple(resolved)
