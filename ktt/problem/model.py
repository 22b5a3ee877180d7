"""A loaded, validated problem: plain dataclasses that the tuner and the agent share."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from ktt.csource import LinearPattern
from ktt.csource import strip_c_comments as strip_c_comments  # linear time; re-exported for callers
from ktt.expressions import Expression, Number
from ktt.half_types import HALF_DTYPES, HOST_CTYPE
from ktt.problem.files import DTYPES, INTEGER_DTYPES


@dataclass(frozen=True)
class Dim3:
    x: int = 1
    y: int = 1
    z: int = 1

    def as_tuple(self) -> tuple[int, int, int]:
        return (self.x, self.y, self.z)

    def count(self) -> int:
        return self.x * self.y * self.z

    def __str__(self) -> str:
        return f"({self.x}, {self.y}, {self.z})"


@dataclass(frozen=True)
class Scalar:
    name: str
    dtype: str
    value: Number
    placements: tuple[str, ...]

    @property
    def ctype(self) -> str:
        return DTYPES[self.dtype][0]

    @property
    def is_runtime(self) -> bool:
        return "runtime" in self.placements

    @property
    def is_define(self) -> bool:
        return "define" in self.placements


@dataclass(frozen=True)
class Buffer:
    name: str
    dtype: str
    size: Expression
    access: str
    init: str
    min: float | None
    max: float | None
    seed: int | None
    body: str | None
    file_name: str | None  # init: file, as written (see file_key for what it is relative to)
    validate: bool
    file_key: str = "file_name"  # "file_name" (under inputs/) or the older alias "file"
    mean: float | None = None  # init: normal
    std: float | None = None

    @property
    def ctype(self) -> str:
        return DTYPES[self.dtype][0]

    @property
    def host_ctype(self) -> str:
        """The element type a C reference sees: a 16-bit float is its bit pattern (ktt.half_types)."""
        return HOST_CTYPE if self.dtype in HALF_DTYPES else self.ctype

    @property
    def itemsize(self) -> int:
        return DTYPES[self.dtype][1]

    @property
    def numpy_dtype(self) -> str:
        return DTYPES[self.dtype][2]

    @property
    def writable(self) -> bool:
        return self.access in ("write", "readwrite")

    @property
    def value_range(self) -> tuple[float, float]:
        low, high = (-1.0, 1.0) if self.dtype not in INTEGER_DTYPES else (0.0, 1.0)
        return (self.min if self.min is not None else low, self.max if self.max is not None else high)

    @property
    def normal_params(self) -> tuple[float, float]:
        """(mean, std) of ``init: normal``: default 0 and 1, torch.randn's."""
        return (self.mean if self.mean is not None else 0.0, self.std if self.std is not None else 1.0)


Arg = Scalar | Buffer


@dataclass(frozen=True)
class ForbidRule:
    """A problem's forbidden pattern. It runs on RE2 (linear time), so a pattern RE2 cannot run
    (backreferences, look-around) raises ``ForbidPatternError``, a ``re.error``, when the rule is made."""

    pattern: re.Pattern[str]
    reason: str
    _linear: LinearPattern = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_linear", LinearPattern(self.pattern.pattern))

    def find(self, source: str) -> list[int]:
        """Line numbers (1-based) where the pattern matches, comments ignored (at most 100)."""
        return self._linear.lines(strip_c_comments(source))


@dataclass(frozen=True)
class ForbidHit:
    line: int
    pattern: str
    reason: str

    def __str__(self) -> str:
        why = f": {self.reason}" if self.reason else ""
        return f"line {self.line}: forbidden pattern /{self.pattern}/{why}"


@dataclass(frozen=True)
class Reference:
    type: str  # cuda | cpu_c | python
    file: Path
    function: str | None
    block: Dim3


@dataclass(frozen=True)
class Shape:
    """One scored set of sizes: a declared ``cases:`` entry, or the implicit ``default`` shape."""

    name: str
    scalars: dict[str, Number]
    sizes: dict[str, int]  # buffer name -> element count
    files: dict[str, Path]  # buffer name -> file, for buffers initialised from a file
    grid: Dim3
    duration_s: float

    def bytes_of(self, buffer: Buffer) -> int:
        return self.sizes[buffer.name] * buffer.itemsize

    def total_bytes(self, buffers: list[Buffer]) -> int:
        return sum(self.bytes_of(b) for b in buffers)


@dataclass
class Problem:
    directory: Path
    name: str
    description: str
    gpu_indices: list[int]
    compute_capability: str | None
    global_size_type: str
    grid_exprs: tuple[Expression, Expression, Expression]
    reference: Reference
    tolerance: float
    flush_l2: bool
    rules_text: list[str]
    forbid: list[ForbidRule]
    args: list[Arg]
    headers: list[str]
    shared_setup: str
    # The scored shapes in declared order; the first is the primary (the original's anchor case).
    # Without ``cases:`` this is one implicit shape named ``default`` built from the inputs.yaml
    # values; with ``cases:`` those values are only defaults for the cases' overrides.
    shapes: list[Shape]
    declared_cases: bool
    floor_bytes: Expression | None = None
    floor_flops: Expression | None = None
    floor_flops_dtype: str = "fp32"  # physical_floor.flops_dtype: the peak the flops run at (ktt.peaks)
    # validation.poison_outputs: write buffers start each run poisoned, not with their init data.
    poison_outputs: bool = False
    rtol: float = 0.0  # validation.rtol: |kernel - reference| <= tolerance + rtol * |reference|
    input_sets: int = 2  # validation.input_sets: set 0 (tuned on) and input_sets - 1 fresh sets
    gpu_info: dict[str, str | int | float] = field(default_factory=dict)  # gpu.* advisory keys, for prompts
    arch: str | None = None  # gpu.arch: the compile target when it names one (ktt.toolkit.compile_target)
    inputs_file: Path | None = None  # where the boundary was read: inputs.yaml, or problem.yaml (inline form)
    warnings: list[str] = field(default_factory=list)

    @property
    def problem_yaml(self) -> Path:
        return self.directory / "problem.yaml"

    @property
    def inputs_yaml(self) -> Path:
        return self.inputs_file or self.directory / "inputs.yaml"

    @property
    def scalars(self) -> list[Scalar]:
        return [a for a in self.args if isinstance(a, Scalar)]

    @property
    def buffers(self) -> list[Buffer]:
        return [a for a in self.args if isinstance(a, Buffer)]

    @property
    def validated(self) -> list[Buffer]:
        return [b for b in self.buffers if b.validate]

    @property
    def set_indices(self) -> list[int]:
        """The input sets a best must pass: 0, where it is tuned, then the fresh ones."""
        return list(range(self.input_sets))

    def poisoned(self, buffer: Buffer) -> bool:
        """Whether ``buffer`` starts each run poisoned (a write buffer under poison_outputs)."""
        return self.poison_outputs and buffer.access == "write"

    @property
    def boundary(self) -> list[Arg]:
        """Every buffer and every runtime scalar, in args order: the kernel's parameters."""
        return [a for a in self.args if isinstance(a, Buffer) or a.is_runtime]

    @property
    def primary(self) -> Shape:
        return self.shapes[0]

    def shape(self, name: str) -> Shape:
        for s in self.shapes:
            if s.name == name:
                return s
        raise KeyError(name)

    def defines(self, shape: Shape | None = None) -> dict[str, Number]:
        values = (shape or self.primary).scalars
        return {s.name: values[s.name] for s in self.scalars if s.is_define}

    def forbid_hits(self, source: str) -> list[ForbidHit]:
        hits = [ForbidHit(line, r.pattern.pattern, r.reason) for r in self.forbid for line in r.find(source)]
        return sorted(hits, key=lambda h: h.line)

    def floor(self, shape: Shape | None = None) -> tuple[float | None, float | None]:
        """(bytes, flops) of the physical floor for a shape, where the problem declares them."""
        env = (shape or self.primary).scalars
        b = float(self.floor_bytes.evaluate(env)) if self.floor_bytes else None
        f = float(self.floor_flops.evaluate(env)) if self.floor_flops else None
        return b, f

    def boundary_signature(self) -> str:
        """The kernel parameter list a candidate must accept, as C."""
        parts = []
        for a in self.boundary:
            if isinstance(a, Buffer):
                const = "const " if a.access == "read" else ""
                parts.append(f"{const}{a.ctype}* {a.name}")
            else:
                parts.append(f"{a.ctype} {a.name}")
        return ", ".join(parts)


def geometric_mean(values: list[float]) -> float | None:
    if not values or any(v <= 0 or not math.isfinite(v) for v in values):
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))
