"""Pydantic models of problem.yaml and inputs.yaml, field for field as users write them.

These models only check shapes and enumerations. Everything that needs the whole
problem (names in expressions, sizes, files on disk) is resolved in ``loader.py``.
Unknown keys are kept (``extra="allow"``) so the loader can warn about them instead of
failing on files written for newer or older versions of the format.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ktt.half_types import DTYPE_ALIASES, HALF_DTYPES

DTYPES: dict[str, tuple[str, int, str]] = {
    # dtype: (C type, bytes, numpy dtype name)
    "int": ("int", 4, "int32"),
    "float": ("float", 4, "float32"),
    "double": ("double", 8, "float64"),
    # The older inline form's integer types, with the widths its tuner gave them (numpy int8,
    # int16, int64; ctypes c_int8, c_int16, c_int64). Written as C types of exactly that width
    # on every platform CUDA runs on (plain char is unsigned on ARM).
    "char": ("signed char", 1, "int8"),
    "short": ("short", 2, "int16"),
    "long": ("long long", 8, "int64"),
    # 16-bit floats (ktt.half_types): CUDA's types in kernels, stored as their bit patterns
    # (numpy has no bfloat16); buffers only.
    "bf16": ("__nv_bfloat16", 2, "uint16"),
    "half": ("__half", 2, "float16"),
}
CORE_DTYPES = ("int", "float", "double")  # what a tuning spec takes (inputs.yaml: every dtype here)
INTEGER_DTYPES = frozenset({"int", "char", "short", "long"})
INTEGER_RANGES = {"char": 8, "short": 16, "int": 32, "long": 64}  # bits of each integer dtype
# The older inline form's spellings (case-insensitive), as its tuner's normalize_dtype read them.
INLINE_DTYPE_ALIASES = {
    "char": "char", "int8": "char", "short": "short", "int16": "short", "int": "int", "int32": "int",
    "long": "long", "int64": "long", "float": "float", "float32": "float", "double": "double", "float64": "double",
}  # fmt: skip

MAX_INPUT_SETS = 16  # validation.input_sets: each set's inputs and reference outputs stay on the GPU
DEFAULT_INPUT_SETS = 2  # the first, and one fresh set: the original's check

ExprValue = int | float | str
Placement = Literal["host", "define", "runtime"]
Access = Literal["read", "write", "readwrite"]
InitKind = Literal["random", "normal", "zeros", "custom", "file"]
ReferenceType = Literal["cuda", "cpu_c", "python"]


def check_dtype(value: Any) -> Any:
    """A tuning spec's dtypes."""
    if value not in CORE_DTYPES:
        allowed = ", ".join(CORE_DTYPES)
        raise ValueError(f"unknown dtype {value!r} (allowed: {allowed})")
    return value


def check_any_dtype(value: Any) -> Any:
    """inputs.yaml's buffer dtypes: every one of the table (bfloat16, float16 and fp16 name the 16-bit floats)."""
    value = DTYPE_ALIASES.get(value, value) if isinstance(value, str) else value
    if value not in DTYPES:
        raise ValueError(f"unknown dtype {value!r} (allowed: {', '.join(DTYPES)})")
    return value


def check_scalar_dtype(value: Any) -> Any:
    """inputs.yaml's scalar dtypes: the table less the 16-bit floats, which are buffer dtypes."""
    value = DTYPE_ALIASES.get(value, value) if isinstance(value, str) else value
    allowed = ", ".join(d for d in DTYPES if d not in HALF_DTYPES)
    if value in HALF_DTYPES:
        raise ValueError(f"{value} is a buffer dtype; a scalar takes {allowed} (a float scalar for a {value} value)")
    if value not in DTYPES:
        raise ValueError(f"unknown dtype {value!r} (allowed: {allowed})")
    return value


def reject_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError(f"expected a number or an expression, got {value!r}")
    return value


class FileModel(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    def unknown_keys(self) -> list[str]:
        return sorted((self.model_extra or {}).keys())

    def unknown_key_paths(self, prefix: str = "") -> list[str]:
        """Unknown keys here and in every nested section, as field paths ('reference.blok')."""
        found = [f"{prefix}.{k}" if prefix else str(k) for k in self.unknown_keys()]
        for name, info in type(self).model_fields.items():
            label = info.alias or name
            where = f"{prefix}.{label}" if prefix else label
            value = getattr(self, name)
            if isinstance(value, FileModel):
                found += value.unknown_key_paths(where)
            elif isinstance(value, list):
                for i, item in enumerate(value):
                    if isinstance(item, FileModel):
                        named = getattr(item, "name", None)
                        suffix = f" ({named})" if isinstance(named, str) else ""
                        found += item.unknown_key_paths(f"{where}[{i}]{suffix}")
        return found


class Dim3Expr(FileModel):
    x: ExprValue = 1
    y: ExprValue = 1
    z: ExprValue = 1

    _no_bool = field_validator("x", "y", "z", mode="before")(reject_bool)


class GpuSection(FileModel):
    """``index`` picks the device; every other key is advisory metadata for the prompts.

    The original documents model, compute_capability, sm_count, max_threads_per_block,
    shared_memory_per_block, registers_per_block and memory_bandwidth_gb, and passes any
    other key through; so unknown keys here are kept (``advisory()``), never warned about.
    """

    index: int | list[int] = 0
    compute_capability: str | float | None = None
    arch: str | None = None  # ours: the compile target (sm_90, sm_90a...); tuning.yaml's arch: wins

    @field_validator("index")
    @classmethod
    def _non_negative(cls, value: int | list[int]) -> int | list[int]:
        values = value if isinstance(value, list) else [value]
        if not values:
            raise ValueError("an empty list of GPUs")
        if any(v < 0 for v in values):
            raise ValueError(f"GPU ordinals must be >= 0, got {value}")
        if len(set(values)) != len(values):
            raise ValueError(f"a GPU is listed twice: {value}")
        return value

    def unknown_keys(self) -> list[str]:
        return []

    def advisory(self) -> dict[str, Any]:
        """The metadata keys as written (compute_capability included when set), in file order."""
        out: dict[str, Any] = dict(self.model_extra or {})
        if self.compute_capability is not None:
            out = {"compute_capability": self.compute_capability, **out}
        return out


class ReferenceSection(FileModel):
    type: ReferenceType | None = None
    file: str | None = None
    function: str | None = None
    block: Dim3Expr | None = None


class ValidationSection(FileModel):
    tolerance: float = Field(default=1e-4, ge=0)
    # Our extension. False (the original's contract): every buffer, write included, starts each
    # run with its init data. True: write buffers are poisoned instead (NaN, a sentinel for int).
    poison_outputs: bool = False
    # Our extensions. rtol: an element passes when |kernel - reference| <= tolerance + rtol * |reference|
    # (torch.allclose's rule; 0, the default, is the original's absolute test). input_sets: how many
    # input sets a best must pass (the first, where it is tuned, and input_sets - 1 fresh ones).
    rtol: float = Field(default=0.0, ge=0)
    input_sets: int = Field(default=DEFAULT_INPUT_SETS, ge=2, le=MAX_INPUT_SETS)


# With neither a case's duration_s nor tuning.duration_s the original's config.py tunes for 100 s
# (TUNER_TIMEOUT; its guide says 20: the code wins).
DEFAULT_DURATION_S = 100.0


class TuningSection(FileModel):
    duration_s: float = Field(default=DEFAULT_DURATION_S, gt=0)


class TimingSection(FileModel):
    """Our extension: how the tuner times. ``flush_l2: false`` opts out of the L2 flush."""

    flush_l2: bool = True


class ForbidEntry(FileModel):
    pattern: str
    reason: str = ""


class RulesSection(FileModel):
    """The mapping form of ``rules``; the loader also takes the original's shorthands."""

    text: str | list[str] = Field(default_factory=list)
    forbid: list[ForbidEntry | str] = Field(default_factory=list)


class CaseSection(FileModel):
    name: str = "default"  # as in the original, an unnamed case is called default
    scalars: dict[str, ExprValue] = Field(default_factory=dict)
    files: dict[str, str] = Field(default_factory=dict)
    duration_s: float | None = Field(default=None, gt=0)

    @field_validator("name", mode="before")
    @classmethod
    def _number_as_name(cls, value: Any) -> Any:
        # "name: 1024" parses as an int; as a case name it is the text "1024".
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        return value


class FloorSection(FileModel):
    """Our extension: the physical floor, as expressions over scalars; ``flops_dtype`` names the
    peak the flops are done at (ktt.peaks: fp32 CUDA cores by default, bf16 for a bf16 GEMM...)."""

    bytes: ExprValue | None = None
    flops: ExprValue | None = None
    flops_dtype: Literal["fp32", "fp64", "tf32", "bf16", "fp16", "fp8"] = "fp32"  # ktt.peaks.FLOPS_DTYPES


class ProblemFile(FileModel):
    name: str | None = None
    description: str = ""
    gpu: GpuSection = Field(default_factory=GpuSection)
    global_size_type: Literal["cuda", "opencl"] = "cuda"
    grid: Dim3Expr | None = None
    reference: ReferenceSection = Field(default_factory=ReferenceSection)
    validation: ValidationSection = Field(default_factory=ValidationSection)
    tuning: TuningSection = Field(default_factory=TuningSection)
    timing: TimingSection = Field(default_factory=TimingSection)
    # A string, a list or a mapping, as in the original; parsed (and a malformed one warned
    # about and ignored) by the loader, so it is kept raw here.
    rules: Any = None
    cases: list[CaseSection] = Field(default_factory=list)
    physical_floor: FloorSection | None = None

    @model_validator(mode="before")
    @classmethod
    def _nulls_are_defaults(cls, data: Any) -> Any:
        # "rules:" with nothing after it parses as None; treat an empty section as absent.
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if v is not None}
        return data


class ScalarArg(FileModel):
    kind: Literal["scalar"]
    name: str
    dtype: str = "int"
    value: ExprValue
    placements: list[Placement] = Field(default_factory=lambda: ["host", "define"])

    _dtype = field_validator("dtype")(check_scalar_dtype)
    _no_bool = field_validator("value", mode="before")(reject_bool)

    @field_validator("placements")
    @classmethod
    def _non_empty(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("must name at least one of host, define, runtime")
        return list(dict.fromkeys(value))


class BufferArg(FileModel):
    kind: Literal["buffer"]
    name: str
    dtype: str = "float"
    size: ExprValue
    access: Access = "read"
    init: InitKind = "random"
    min: float | None = None
    max: float | None = None
    mean: float | None = None  # init: normal (our extension), default 0
    std: float | None = Field(default=None, gt=0)  # init: normal, default 1
    seed: int | None = None
    body: str | None = None
    file_name: str | None = None  # init: file, a path under the problem's inputs/
    file: str | None = None  # accepted alias of file_name (docs/INPUTS_YAML_GUIDE.md)
    validate_: bool = Field(default=False, alias="validate")

    _dtype = field_validator("dtype")(check_any_dtype)
    _no_bool = field_validator("size", mode="before")(reject_bool)


Arg = Annotated[ScalarArg | BufferArg, Field(discriminator="kind")]


class InputsFile(FileModel):
    headers: list[str] = Field(default_factory=list)
    shared_setup: str = ""
    args: list[Arg]

    @model_validator(mode="before")
    @classmethod
    def _nulls_are_defaults(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if v is not None or k == "args"}
        return data
