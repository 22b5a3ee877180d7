"""The tuning spec (tuning.yaml): tune parameters, restrictions and an ordered list of launches.

Vocabulary follows Kernel Tuner where the idea is the same: ``tune_params`` (name -> list
of values), ``restrictions`` (expressions that a configuration must satisfy). Each
parameter reaches the kernel source as a ``-D`` macro. ``launches`` lists the kernels
of one configuration in order, so a multi-kernel pipeline is timed as one unit; a
``repeat`` item loops over a body of launches (a pass count or a device flag, a loop
variable, buffer swaps between passes), as the original's C++ launchers did.

Expressions (restrictions, grid, block, shared memory, scratch sizes) are evaluated by
``ktt.expressions`` over the tune parameters and the problem's scalars.

Hopper launches (docs/TUNING_SPEC.md, "Targets, tensor maps and clusters"): ``arch`` picks the
compile target, a ``{tensor_map: BUFFER, ...}`` argument passes a TMA descriptor that the worker
encodes for the buffer (ktt.tensor_map holds its rules), and ``cluster: {x, y, z}`` launches
thread-block clusters.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Discriminator, Field, Tag, field_validator, model_validator

from ktt.compiler_options import option_problem
from ktt.expressions import Expression, ExpressionError, Number
from ktt.problem.errors import ProblemError
from ktt.problem.files import DTYPES, check_dtype, reject_bool
from ktt.problem.model import Buffer, Dim3, Problem, Scalar, Shape
from ktt.problem.yaml_io import parse_yaml_mapping, read_yaml_mapping, validate_model
from ktt.tensor_map import (
    BUFFER_TMA_DTYPE,
    FLOAT_DTYPES,
    L2_PROMOTION_BYTES,
    MAX_RANK,
    SWIZZLE_BYTES,
    TMA_DTYPES,
    TensorMapGeometry,
    layout_problem,
    packed_strides,
    static_problem,
)
from ktt.toolkit import normalize_arch

ParamValue = int | float | str
Config = dict[str, ParamValue]

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
MAX_THREADS_PER_BLOCK = 1024
MAX_STREAMS = 8
DEFAULT_STATIC_SHARED_LIMIT = 48 * 1024
# Bounds on a model-written spec (docs/SECURITY.md, "Bounds"): the space walk recurses once
# per parameter, and every restriction is evaluated for every configuration visited.
MAX_TUNE_PARAMS = 64
MAX_PARAM_VALUES = 10_000
MAX_RESTRICTIONS = 256
# Bounds on launch programs (docs/TUNING_SPEC.md, "Launch programs"): the worker runs every
# pass, and an ``until`` loop reads a flag back after each one.
MAX_LAUNCH_ITEMS = 256  # launch and repeat items written in tuning.yaml, all levels together
MAX_REPEAT_DEPTH = 3  # repeat blocks nested in one another
MAX_PASSES = 10_000  # the largest count or max_passes of one repeat block
MAX_LAUNCHES_PER_RUN = 20_000  # kernel launches of one run of a configuration (until loops at max_passes)
# Thread-block clusters: 8 blocks is the portable limit; larger (Hopper: 16) needs non_portable: true.
MAX_PORTABLE_CLUSTER = 8
MAX_CLUSTER = 16


_MAIN_STREAM = Expression(0)


class SpecError(ProblemError):
    """A mistake in tuning.yaml (same one-line form as problem errors)."""


class LaunchFieldError(ExpressionError):
    """A value of one launch that fails for a configuration, in a field below the launch ('cluster')."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


class _SpecModel(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


def _unquoted_comma(data: Any, keys: tuple[str, ...]) -> Any:
    """``{x: ceil_div(N, B)}`` reaches us as keys ``x`` and ``B)``: say what went wrong."""
    if isinstance(data, dict):
        for key in data:
            if key not in keys and isinstance(key, str) and (")" in key or "(" in key):
                raise ValueError(
                    f"{key!r} is part of an expression cut at a comma: in a {{...}} mapping, quote "
                    'expressions that hold commas, e.g. {x: "ceil_div(N, B)"}'
                )
    return data


class Dim3Spec(_SpecModel):
    x: int | str = 1
    y: int | str = 1
    z: int | str = 1

    _nb = field_validator("x", "y", "z", mode="before")(reject_bool)

    @model_validator(mode="before")
    @classmethod
    def _commas(cls, data: Any) -> Any:
        return _unquoted_comma(data, ("x", "y", "z"))


class ValueArg(_SpecModel):
    """A scalar argument computed from an expression, e.g. ``{value: "N / 2", dtype: int}``."""

    value: int | float | str
    dtype: str = "int"

    _dtype = field_validator("dtype")(check_dtype)

    @model_validator(mode="before")
    @classmethod
    def _commas(cls, data: Any) -> Any:
        return _unquoted_comma(data, ("value", "dtype"))


class TensorMapArg(_SpecModel):
    """A TMA descriptor of a buffer, e.g. ``{tensor_map: A, dims: [K, M], box: [64, BM], swizzle: 128B}``.

    ``dims``, ``box`` and ``strides`` are innermost first (the driver's order); ``strides``
    (the steps of dims[1:], in elements) default to a dense tensor."""

    tensor_map: str
    dtype: str | None = None  # a TMA element type; default: the buffer's
    dims: list[int | str]
    box: list[int | str]
    strides: list[int | str] | None = None
    # A name, or an expression for the size in bytes (0: none), so a tune parameter can choose it.
    swizzle: int | str = "none"  # none | 32B | 64B | 128B
    l2_promotion: int | str = "none"  # none | 64B | 128B | 256B
    oob_fill: Literal["none", "nan"] = "none"

    _nb = field_validator("swizzle", "l2_promotion", mode="before")(reject_bool)

    @field_validator("dims", "box", "strides", mode="before")
    @classmethod
    def _no_bools(cls, value: Any) -> Any:
        if isinstance(value, list):
            for v in value:
                reject_bool(v)
        return value

    @field_validator("dtype")
    @classmethod
    def _tma_dtype(cls, value: str | None) -> str | None:
        if value is not None and value not in TMA_DTYPES:
            raise ValueError(f"unknown tensor-map dtype {value!r} (allowed: {', '.join(TMA_DTYPES)})")
        return value


def _arg_kind(value: Any) -> str:
    if isinstance(value, dict):
        return "function-tensor_map" if "tensor_map" in value else "function-value"
    return "function-name"


LaunchArg = Annotated[
    Annotated[str, Tag("function-name")]
    | Annotated[TensorMapArg, Tag("function-tensor_map")]
    | Annotated[ValueArg, Tag("function-value")],
    Discriminator(_arg_kind),
]


class ClusterSpec(Dim3Spec):
    """Blocks per thread-block cluster; more than 8 only with ``non_portable: true``."""

    non_portable: bool = False


class LaunchSpec(_SpecModel):
    kernel: str
    grid: Dim3Spec
    block: Dim3Spec
    shared_mem: int | str = Field(default=0, alias="shared_mem")
    args: list[LaunchArg] | None = None  # None: the problem's boundary, in args order
    stream: int | str = 0  # 0: the main stream; N > 0: a side stream, forked from and joined to the main one
    cluster: ClusterSpec | None = None  # thread-block clusters (cuLaunchKernelEx)

    _nb = field_validator("shared_mem", "stream", mode="before")(reject_bool)


def _unwrap_repeat(value: Any) -> Any:
    """``{repeat: {...}}`` -> ``{...}``: errors then read ``launches[i].repeat.FIELD``."""
    if isinstance(value, dict):
        extra = sorted(str(k) for k in value if k != "repeat")
        if extra:
            raise ValueError(f"a repeat item holds only 'repeat:' (found {', '.join(extra)}); put launches in its body")
        return value["repeat"]
    return value


def _item_kind(value: Any) -> str:
    # Tags named "function-..." are left out of error paths (ktt.problem.yaml_io.field_path).
    if isinstance(value, dict) and "repeat" in value:
        return "repeat"
    return "function-launch"


class RepeatSpec(_SpecModel):
    """A loop over ``body``: ``count`` passes, or until the scratch int ``until`` is non-zero after a pass."""

    var: str = "pass"
    count: int | str | None = None
    until: str | None = None
    max_passes: int | str | None = None
    swap: list[str | list[str]] = Field(default_factory=list)
    body: list[LaunchItem]

    _nb = field_validator("count", "max_passes", mode="before")(reject_bool)


LaunchItem = Annotated[
    Annotated[LaunchSpec, Tag("function-launch")]
    | Annotated[RepeatSpec, BeforeValidator(_unwrap_repeat), Tag("repeat")],
    Discriminator(_item_kind),
]
RepeatSpec.model_rebuild()


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
    launches: list[LaunchItem]
    scratch: list[ScratchSpec] = Field(default_factory=list)
    compiler_options: list[str] = Field(default_factory=list)
    arch: str | None = None  # the compile target, e.g. sm_90 or sm_90a (default: see ktt.toolkit.compile_target)
    duration_s: float | None = Field(default=None, gt=0)
    max_configs: int | None = Field(default=None, gt=0)

    @field_validator("arch")
    @classmethod
    def _arch(cls, value: str | None) -> str | None:
        return None if value is None else normalize_arch(value)

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
    def _non_empty(cls, launches: list[Any]) -> list[Any]:
        if not launches:
            raise ValueError("empty: at least one kernel launch is needed")
        return launches


@dataclass(frozen=True)
class TensorMapExprs:
    """A tensor-map argument as written: expressions, evaluated per configuration (and pass)."""

    buffer: str
    dtype: str  # a ktt.tensor_map.TMA_DTYPES name
    dims: tuple[Expression, ...]
    box: tuple[Expression, ...]
    strides: tuple[Expression, ...] | None  # None: dense
    swizzle: str | Expression  # a SWIZZLE_BYTES name, or bytes per configuration
    l2_promotion: str | Expression  # an L2_PROMOTION_BYTES name, or bytes per configuration
    oob_fill: str

    def expressions(self) -> tuple[Expression, ...]:
        chosen = tuple(e for e in (self.swizzle, self.l2_promotion) if isinstance(e, Expression))
        return (*self.dims, *self.box, *(self.strides or ()), *chosen)


@dataclass(frozen=True)
class ResolvedArg:
    """One kernel argument of one launch: a problem buffer, a scratch buffer, a value or a tensor map."""

    kind: Literal["buffer", "scratch", "value", "tensor_map"]
    name: str
    dtype: str
    expr: Expression | None = None  # for kind == value
    tensor_map: TensorMapExprs | None = None  # for kind == tensor_map (name: the buffer it maps)


@dataclass(frozen=True)
class Launch:
    kernel: str
    grid: tuple[Expression, Expression, Expression]
    block: tuple[Expression, Expression, Expression]
    shared_mem: Expression
    args: tuple[ResolvedArg, ...]
    stream: Expression = _MAIN_STREAM
    label: str = ""  # its tuning.yaml field, e.g. "launches[1].repeat.body[0]"
    cluster: tuple[Expression, Expression, Expression] | None = None
    non_portable: bool = False  # a cluster above MAX_PORTABLE_CLUSTER blocks is allowed

    def names(self) -> set[str]:
        """Every name its expressions read."""
        out: set[str] = set()
        for e in (*self.grid, *self.block, self.shared_mem, self.stream, *(self.cluster or ())):
            out |= e.names
        for a in self.args:
            if a.expr is not None:
                out |= a.expr.names
            if a.tensor_map is not None:
                for e in a.tensor_map.expressions():
                    out |= e.names
        return out


@dataclass(frozen=True)
class Repeat:
    """A loop over ``body`` (see docs/TUNING_SPEC.md, "Launch programs")."""

    label: str  # "launches[1].repeat"
    var: str  # the loop variable: 0, 1, 2, ... in the body's expressions
    count: Expression | None  # a number of passes, or
    until: str | None  # a scratch int: the loop ends after the pass that leaves its first element non-zero
    max_passes: Expression | None  # with until: reaching it with the flag still zero fails the configuration
    swaps: tuple[tuple[str, str], ...]  # buffer names exchanged after every pass
    body: tuple[Launch | Repeat, ...]

    @property
    def passes(self) -> Expression:
        """The most passes the loop runs."""
        bound = self.count if self.count is not None else self.max_passes
        assert bound is not None
        return bound

    def names(self) -> set[str]:
        """Every name the body's expressions read (the inner loops' own variables included)."""
        out: set[str] = set()
        for item in self.body:
            out |= item.names()
            if isinstance(item, Repeat):
                out |= item.passes.names
        return out


ProgramItem = Launch | Repeat


def iter_launch_items(items: list[ProgramItem] | tuple[ProgramItem, ...]) -> list[Launch]:
    """Every Launch of a program, repeat bodies included, in the order they are written."""
    out: list[Launch] = []
    for item in items:
        if isinstance(item, Repeat):
            out += iter_launch_items(item.body)
        else:
            out.append(item)
    return out


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
    # value for kind == value, the evaluated map (buffer bounds not yet checked) for kind == tensor_map
    args: tuple[tuple[ResolvedArg, Number | TensorMapGeometry | None], ...]
    stream: int = 0
    cluster: Dim3 | None = None
    non_portable: bool = False


@dataclass
class TuningSpec:
    path: Path
    tune_params: dict[str, list[ParamValue]]
    restrictions: list[Expression]
    launches: list[ProgramItem]  # the launch program: launches and repeat blocks, in order
    scratch: list[Scratch]
    compiler_options: list[str]
    duration_s: float | None
    max_configs: int | None
    buffer_dtypes: dict[str, str] = dataclasses.field(default_factory=dict)  # the problem's buffers (swap partners)
    arch: str | None = None  # tuning.yaml's compile target, when it names one

    @property
    def uses_hopper_launches(self) -> str | None:
        """The field of the first tensor-map argument or cluster launch (they need sm_90 or newer)."""
        for launch in self.kernel_launches():
            if launch.cluster is not None:
                return f"{launch.label}.cluster"
            for j, a in enumerate(launch.args):
                if a.kind == "tensor_map":
                    return f"{launch.label}.args[{j}]"
        return None

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

    @property
    def has_repeat(self) -> bool:
        return any(isinstance(item, Repeat) for item in self.launches)

    def kernel_launches(self) -> list[Launch]:
        """Every launch written in the program (repeat bodies included)."""
        return iter_launch_items(self.launches)

    def geometry(self, config: Config, shape: Shape) -> list[LaunchGeometry]:
        """Evaluate the launches outside repeat blocks for one configuration (ktt.launch_program
        evaluates whole programs). Raises ExpressionError on a bad value."""
        env = self.env(config, shape)
        return [evaluate_launch(launch, env) for launch in self.launches if isinstance(launch, Launch)]

    def scratch_sizes(self, config: Config, shape: Shape) -> dict[str, int]:
        env = self.env(config, shape)
        return {s.name: s.size.evaluate_int(env) for s in self.scratch}


def _plain(expr: Expression, env: dict[str, Number], integer: bool) -> Number:
    return expr.evaluate_int(env) if integer else expr.evaluate(env)


def evaluate_launch(
    launch: Launch, env: dict[str, Number], value: Callable[[Expression, dict[str, Number], bool], Number] = _plain
) -> LaunchGeometry:
    """One launch's expressions for one configuration (and pass). Raises ExpressionError.

    ``value(expr, env, integer)`` evaluates one expression (ktt.launch_program passes one that
    reuses the values of expressions that do not read a loop variable)."""
    grid = Dim3(*(int(value(e, env, True)) for e in launch.grid))
    block = Dim3(*(int(value(e, env, True)) for e in launch.block))
    smem = int(value(launch.shared_mem, env, True))
    args: list[tuple[ResolvedArg, Number | TensorMapGeometry | None]] = []
    for j, a in enumerate(launch.args):
        if a.tensor_map is not None:
            args.append((a, _evaluate_map(a.tensor_map, env, value, f"args[{j}]")))
        else:
            args.append((a, value(a.expr, env, False) if a.expr is not None else None))
    stream = int(value(launch.stream, env, True))
    if stream < 0 or stream > MAX_STREAMS:
        raise ExpressionError(f"{launch.kernel}: stream {stream} out of range 0..{MAX_STREAMS}")
    if smem < 0:
        raise ExpressionError(f"{launch.kernel}: shared_mem evaluates to {smem}")
    cluster = None
    if launch.cluster is not None:
        cluster = Dim3(*(int(value(e, env, True)) for e in launch.cluster))
        why = cluster_problem(cluster.as_tuple(), launch.non_portable)
        if why:
            raise LaunchFieldError("cluster", why)
        for axis, g, c in zip("xyz", grid.as_tuple(), cluster.as_tuple(), strict=True):
            if g % c:
                raise LaunchFieldError(f"grid.{axis}", f"{g} blocks is not a multiple of cluster.{axis} = {c}")
    return LaunchGeometry(launch.kernel, grid, block, smem, tuple(args), stream, cluster, launch.non_portable)


def cluster_problem(cluster: tuple[int, int, int], non_portable: bool) -> str | None:
    """Why a cluster shape can never launch (the device may refuse more: ktt.sequence asks it)."""
    if min(cluster) < 1:
        return f"{cluster} has an axis below 1"
    blocks = cluster[0] * cluster[1] * cluster[2]
    if blocks > MAX_CLUSTER:
        return f"{blocks} blocks per cluster; no device allows more than {MAX_CLUSTER}"
    if blocks > MAX_PORTABLE_CLUSTER and not non_portable:
        return (
            f"{blocks} blocks per cluster is above the portable limit of {MAX_PORTABLE_CLUSTER}; "
            "set non_portable: true in the cluster to allow it"
        )
    return None


def _evaluate_map(
    m: TensorMapExprs,
    env: dict[str, Number],
    value: Callable[[Expression, dict[str, Number], bool], Number],
    field: str,
) -> TensorMapGeometry:
    """The map's sizes for one configuration; rules on single values are checked (ktt.tensor_map)."""
    size = TMA_DTYPES[m.dtype]
    swizzle = _option(m.swizzle, SWIZZLE_BYTES, env, value, f"{field}.swizzle")
    l2_promotion = _option(m.l2_promotion, L2_PROMOTION_BYTES, env, value, f"{field}.l2_promotion")
    out: dict[str, tuple[int, ...]] = {}
    for kind, exprs in (("dims", m.dims), ("box", m.box), ("strides", m.strides or ())):
        vals = []
        for i, e in enumerate(exprs):
            v = int(value(e, env, True))
            why = static_problem(f"{kind}[{i}]", v, m.dtype, swizzle)
            if why:
                raise LaunchFieldError(f"{field}.{kind}[{i}]", why)
            vals.append(v)
        out[kind] = tuple(vals)
    dims = out["dims"]
    strides = tuple(s * size for s in out["strides"]) if m.strides is not None else packed_strides(dims, size)
    return TensorMapGeometry(m.buffer, m.dtype, dims, strides, out["box"], swizzle, l2_promotion, m.oob_fill)


def _option(
    chosen: str | Expression,
    names: dict[str, int],
    env: dict[str, Number],
    value: Callable[[Expression, dict[str, Number], bool], Number],
    field: str,
) -> str:
    """A swizzle / L2 promotion chosen by an expression: its size in bytes -> its name."""
    if isinstance(chosen, str):
        return chosen
    nbytes = int(value(chosen, env, True))
    for name, size in names.items():
        if size == nbytes:
            return name
    raise LaunchFieldError(field, f"{nbytes} bytes; allowed: {_choices(names)}")


def _choices(names: dict[str, int]) -> str:
    return ", ".join(f"{n} ({b})" if n != "none" else "none (0)" for n, b in names.items())


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

    def expr(value: int | float | str, field: str, loop_vars: tuple[str, ...] = ()) -> Expression:
        try:
            e = Expression(value)
            e.check_names(known | set(loop_vars))
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

    launches = _ProgramResolver(path, problem, known, scratch_names, expr).items(tf.launches, "launches", (), ())

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
        buffer_dtypes={b.name: b.dtype for b in problem.buffers},
        arch=tf.arch,
    )


def _resolve_args(
    args: list[str | ValueArg | TensorMapArg] | None,
    problem: Problem,
    scratch: dict[str, Scratch],
    field: str,
    path: Path,
    expr: Any,
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
        if isinstance(item, TensorMapArg):
            tmap = _resolve_map(item, problem, scratch, f"{field}[{j}]", path, expr)
            resolved.append(ResolvedArg("tensor_map", item.tensor_map, tmap.dtype, tensor_map=tmap))
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


def _resolve_map(
    item: TensorMapArg, problem: Problem, scratch: dict[str, Scratch], field: str, path: Path, expr: Any
) -> TensorMapExprs:
    """The static checks of a tensor-map argument (per-configuration ones: ktt.launch_program)."""
    buffers = {b.name: b for b in problem.buffers}
    name = item.tensor_map
    if name in buffers:
        buffer_dtype = buffers[name].dtype
    elif name in scratch:
        buffer_dtype = scratch[name].dtype
    else:
        known = ", ".join([*buffers, *scratch]) or "none"
        what = "a scalar" if any(a.name == name for a in problem.scalars) else "unknown"
        raise SpecError(path, f"{field}.tensor_map", f"{name!r} is {what}; a map describes a buffer ({known})")
    dtype = item.dtype or BUFFER_TMA_DTYPE.get(buffer_dtype)
    if dtype is None:
        raise SpecError(path, f"{field}.dtype", f"buffer {name!r} holds {buffer_dtype}; name the map's dtype")
    rank = len(item.dims)
    if not 1 <= rank <= MAX_RANK:
        raise SpecError(path, f"{field}.dims", f"{rank} dimensions; a tensor map has 1 to {MAX_RANK}")
    if len(item.box) != rank:
        raise SpecError(path, f"{field}.box", f"{len(item.box)} sides for {rank} dims; give one per dimension")
    if item.strides is not None and len(item.strides) != rank - 1:
        raise SpecError(
            path,
            f"{field}.strides",
            f"{len(item.strides)} strides for {rank} dims; give {rank - 1} (the steps of dims[1:], in elements)",
        )
    if item.oob_fill == "nan" and dtype not in FLOAT_DTYPES:
        raise SpecError(path, f"{field}.oob_fill", f"nan fills need a floating-point dtype, not {dtype}")
    swizzle = _option_spec(item.swizzle, SWIZZLE_BYTES, f"{field}.swizzle", path, expr)
    l2_promotion = _option_spec(item.l2_promotion, L2_PROMOTION_BYTES, f"{field}.l2_promotion", path, expr)
    # A box rule that reads the swizzle is checked with the swizzle when it is constant.
    static_swizzle = swizzle if isinstance(swizzle, str) else "none"
    out: dict[str, tuple[Expression, ...]] = {}
    for kind, values in (("dims", item.dims), ("box", item.box), ("strides", item.strides or [])):
        exprs = []
        for i, v in enumerate(values):
            e = expr(v, f"{field}.{kind}[{i}]")
            if not e.names:  # a constant: its own rules now
                try:
                    n = e.evaluate_int({})
                except ExpressionError as exc:
                    raise SpecError(path, f"{field}.{kind}[{i}]", str(exc)) from None
                why = static_problem(f"{kind}[{i}]", n, dtype, static_swizzle)
                if why:
                    raise SpecError(path, f"{field}.{kind}[{i}]", why)
            exprs.append(e)
        out[kind] = tuple(exprs)
    tmap = TensorMapExprs(
        name,
        dtype,
        out["dims"],
        out["box"],
        out["strides"] if item.strides is not None else None,
        swizzle,
        l2_promotion,
        item.oob_fill,
    )
    _check_layout(tmap, field, path, problem, buffers, scratch)
    return tmap


def _check_layout(
    tmap: TensorMapExprs,
    field: str,
    path: Path,
    problem: Problem,
    buffers: dict[str, Buffer],
    scratch: dict[str, Scratch],
) -> None:
    """Dims and strides that read no tune parameter are checked for every shape when the spec loads:
    the map's fit in its buffer does not depend on the box or the swizzle."""
    scalar_names = {s.name for s in problem.scalars}
    if not all(e.names <= scalar_names for e in (*tmap.dims, *(tmap.strides or ()))):
        return  # per configuration (ktt.launch_program)
    size = TMA_DTYPES[tmap.dtype]
    for shape in problem.shapes:
        env = dict(shape.scalars)
        try:
            dims = tuple(e.evaluate_int(env) for e in tmap.dims)
            strides = tuple(e.evaluate_int(env) * size for e in tmap.strides or ())
            nbytes = _buffer_bytes(tmap.buffer, buffers, scratch, shape)
        except ExpressionError as exc:
            raise SpecError(path, field, f"{exc} (shape {shape.name})") from None
        for i, d in enumerate(dims):
            why = static_problem(f"dims[{i}]", d, tmap.dtype, "none")
            if why:
                raise SpecError(path, f"{field}.dims[{i}]", f"{why} (shape {shape.name})")
        if tmap.strides is None:
            strides = packed_strides(dims, size)
        if nbytes is None:
            continue
        g = TensorMapGeometry(tmap.buffer, tmap.dtype, dims, strides, (1,) * len(dims))
        bad = layout_problem(g, nbytes, f"{tmap.buffer!r}")
        if bad is not None:
            raise SpecError(path, f"{field}.{bad[0]}", f"{bad[1]} (shape {shape.name})")


def _option_spec(raw: int | str, names: dict[str, int], field: str, path: Path, expr: Any) -> str | Expression:
    """A swizzle / L2 promotion as written: a name ('128B'), a size in bytes, or an expression for one."""
    if isinstance(raw, str) and raw in names:
        return raw
    if isinstance(raw, str) and re.fullmatch(r"\s*\d+\s*[Bb]\s*", raw):
        raise SpecError(path, field, f"{raw!r}: allowed are {_choices(names)}, or an expression for the bytes")
    e = expr(raw, field)
    if e.names:
        return e
    try:
        nbytes = e.evaluate_int({})
    except ExpressionError as exc:
        raise SpecError(path, field, str(exc)) from None
    for name, size in names.items():
        if size == nbytes:
            return name
    raise SpecError(path, field, f"{raw!r}: allowed are {_choices(names)}, or an expression for the bytes")


def _buffer_bytes(name: str, buffers: dict[str, Buffer], scratch: dict[str, Scratch], shape: Shape) -> int | None:
    """A buffer's bytes at one shape; None for a scratch buffer whose size reads a tune parameter."""
    if name in buffers:
        return shape.bytes_of(buffers[name])
    s = scratch[name]
    if s.size.names - set(shape.scalars):
        return None
    return s.size.evaluate_int(dict(shape.scalars)) * s.itemsize


class _ProgramResolver:
    """tuning.yaml's launch items -> Launch and Repeat, with the static checks of launch programs."""

    def __init__(self, path: Path, problem: Problem, known: set[str], scratch: dict[str, Scratch], expr: Any) -> None:
        self.path = path
        self.problem = problem
        self.known = known
        self.scratch = scratch
        self.expr = expr
        self.buffers = {b.name: b for b in problem.buffers}
        self.count = 0

    def error(self, field: str, message: str) -> SpecError:
        return SpecError(self.path, field, message)

    def items(
        self, items: list[Any], prefix: str, loop_vars: tuple[str, ...], flags: tuple[str, ...]
    ) -> list[ProgramItem]:
        out: list[ProgramItem] = []
        for i, item in enumerate(items):
            label = f"{prefix}[{i}]"
            self.count += 1
            if self.count > MAX_LAUNCH_ITEMS:
                raise self.error(label, f"more than {MAX_LAUNCH_ITEMS} launch and repeat items in all")
            if isinstance(item, RepeatSpec):
                out.append(self.repeat(item, f"{label}.repeat", loop_vars, flags))
            else:
                out.append(self.launch(item, label, loop_vars))
        return out

    def launch(self, ls: LaunchSpec, label: str, loop_vars: tuple[str, ...]) -> Launch:
        expr = self.expr
        if not IDENTIFIER.match(ls.kernel):
            raise self.error(f"{label}.kernel", f"{ls.kernel!r} is not a valid kernel name")
        grid = tuple(
            expr(v, f"{label}.grid.{a}", loop_vars)
            for a, v in zip("xyz", (ls.grid.x, ls.grid.y, ls.grid.z), strict=True)
        )
        block = tuple(
            expr(v, f"{label}.block.{a}", loop_vars)
            for a, v in zip("xyz", (ls.block.x, ls.block.y, ls.block.z), strict=True)
        )
        smem = expr(ls.shared_mem, f"{label}.shared_mem", loop_vars)
        args = _resolve_args(
            ls.args, self.problem, self.scratch, f"{label}.args", self.path, lambda v, f: expr(v, f, loop_vars)
        )
        stream = expr(ls.stream, f"{label}.stream", loop_vars)
        if loop_vars and (stream.names or stream.evaluate({}) != 0):
            raise self.error(
                f"{label}.stream",
                "side streams are not allowed in a repeat body (passes run in order on the main stream)",
            )
        cluster = None
        if ls.cluster is not None:
            c = ls.cluster
            cluster = tuple(
                expr(v, f"{label}.cluster.{a}", loop_vars) for a, v in zip("xyz", (c.x, c.y, c.z), strict=True)
            )
            if not any(e.names for e in cluster):  # constant: check it now
                try:
                    dims = tuple(e.evaluate_int({}) for e in cluster)
                except ExpressionError as exc:
                    raise self.error(f"{label}.cluster", str(exc)) from None
                why = cluster_problem(dims, c.non_portable)  # type: ignore[arg-type]
                if why:
                    raise self.error(f"{label}.cluster", why)
        return Launch(
            ls.kernel,
            grid,  # type: ignore[arg-type]
            block,  # type: ignore[arg-type]
            smem,
            args,
            stream,
            label,
            cluster,  # type: ignore[arg-type]
            ls.cluster.non_portable if ls.cluster is not None else False,
        )

    def repeat(self, rs: RepeatSpec, label: str, loop_vars: tuple[str, ...], flags: tuple[str, ...]) -> Repeat:
        if len(loop_vars) >= MAX_REPEAT_DEPTH:
            raise self.error(label, f"repeat blocks nest at most {MAX_REPEAT_DEPTH} deep")
        var = rs.var
        if not IDENTIFIER.match(var):
            raise self.error(f"{label}.var", f"{var!r} is not a valid name")
        if var in self.known or var in self.buffers or var in self.scratch or var in loop_vars:
            raise self.error(f"{label}.var", f"{var!r} is already used (a tune parameter, scalar, buffer or loop)")
        if rs.count is None and rs.until is None:
            raise self.error(label, "give count (a number of passes) or until (a scratch int flag) with max_passes")
        if rs.count is not None and rs.until is not None:
            raise self.error(f"{label}.until", "give count or until, not both")
        count = max_passes = None
        if rs.count is not None:
            if rs.max_passes is not None:
                raise self.error(f"{label}.max_passes", "only with until (count already bounds the loop)")
            count = self._bound(rs.count, f"{label}.count", loop_vars, 0)
        else:
            if rs.max_passes is None:
                raise self.error(
                    f"{label}.max_passes",
                    f"required with until: the most passes before the configuration fails (at most {MAX_PASSES:,})",
                )
            max_passes = self._bound(rs.max_passes, f"{label}.max_passes", loop_vars, 1)
            self._check_flag(rs.until, f"{label}.until")  # type: ignore[arg-type]
        swaps = self._swaps(rs.swap, f"{label}.swap", (*flags, *([rs.until] if rs.until else [])))
        if not rs.body:
            raise self.error(f"{label}.body", "empty: at least one launch is needed")
        inner_flags = (*flags, rs.until) if rs.until else flags
        body = tuple(self.items(rs.body, f"{label}.body", (*loop_vars, var), inner_flags))
        if rs.until and not any(
            a.kind == "scratch" and a.name == rs.until for launch in iter_launch_items(body) for a in launch.args
        ):
            raise self.error(
                f"{label}.until", f"no launch of the body takes {rs.until!r} as an argument, so no pass can set it"
            )
        return Repeat(label, var, count, rs.until, max_passes, swaps, body)

    def _bound(self, value: int | str, field: str, loop_vars: tuple[str, ...], low: int) -> Expression:
        e = self.expr(value, field, loop_vars)
        if not e.names:  # a constant: check it now; otherwise per configuration (ktt.launch_program)
            try:
                n = e.evaluate_int({})
            except ExpressionError as exc:
                raise self.error(field, str(exc)) from None
            if not low <= n <= MAX_PASSES:
                raise self.error(field, f"{n} is out of range {low}..{MAX_PASSES:,}")
        return e

    def _check_flag(self, name: str, field: str) -> None:
        s = self.scratch.get(name)
        if s is None:
            what = "a problem buffer" if name in self.buffers else "not a scratch buffer"
            raise self.error(field, f"{name!r} is {what}; until reads a scratch int (declare it under scratch:)")
        if s.dtype != "int":
            raise self.error(field, f"scratch {name!r} has dtype {s.dtype}; an until flag is an int")
        if not s.zero:
            raise self.error(
                field, f"scratch {name!r} has zero: false; an until flag must start at 0 (the poison is non-zero)"
            )

    def _swaps(self, raw: list[str | list[str]], field: str, flags: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
        if not raw:
            return ()
        if all(isinstance(x, str) for x in raw):
            pairs: list[Any] = [raw]
        elif all(isinstance(x, list) for x in raw):
            pairs = raw
        else:
            raise self.error(field, "write one pair [A, B] or a list of pairs [[A, B], [C, D]]")
        out: list[tuple[str, str]] = []
        seen: set[str] = set()
        for j, pair in enumerate(pairs):
            where = field if len(pairs) == 1 and pairs[0] is raw else f"{field}[{j}]"
            if len(pair) != 2:
                raise self.error(where, f"a swap names two buffers, got {len(pair)}")
            a, b = pair
            if a == b:
                raise self.error(where, f"swaps {a!r} with itself")
            dtypes = []
            for name in (a, b):
                if name in seen:
                    raise self.error(where, f"{name!r} is in two swap pairs of one repeat")
                seen.add(name)
                if name in flags:
                    raise self.error(where, f"{name!r} is an until flag; it cannot be swapped")
                if name in self.scratch:
                    dtypes.append(self.scratch[name].dtype)
                elif name in self.buffers:
                    buf = self.buffers[name]
                    if not buf.writable:
                        raise self.error(
                            where, f"{name!r} is read-only (access: read); swap scratch or writable buffers"
                        )
                    dtypes.append(buf.dtype)
                else:
                    known = ", ".join([*self.buffers, *self.scratch]) or "none"
                    raise self.error(where, f"unknown buffer {name!r} (buffers and scratch: {known})")
            if dtypes[0] != dtypes[1]:
                raise self.error(where, f"{a!r} holds {dtypes[0]} but {b!r} holds {dtypes[1]}; swap partners match")
            for shape in self.problem.shapes:  # sizes known without a configuration: check them now
                sizes = [self._static_size(n, shape) for n in (a, b)]
                if None not in sizes and sizes[0] != sizes[1]:
                    raise self.error(
                        where,
                        f"{a!r} has {sizes[0]:,} elements but {b!r} has {sizes[1]:,} (shape {shape.name}); "
                        "swap partners have one size",
                    )
            out.append((a, b))
        return tuple(out)

    def _static_size(self, name: str, shape: Shape) -> int | None:
        if name in self.buffers:
            return shape.sizes[name]
        size = self.scratch[name].size
        if size.names - set(shape.scalars):
            return None  # depends on tune parameters
        try:
            return size.evaluate_int(dict(shape.scalars))
        except ExpressionError:
            return None
