"""What the contained probe of a module reports (``probe.py`` writes it, ``importer.py`` reads it).

The probe runs the module's code in the same process, so the module could have changed what the
probe prints: the report is untrusted input like any file of a problem. These models bound every
field (names, dtypes from a fixed table, shapes, element counts) before anything is written from
it, and the importer checks each data file's size against its tensor's shape.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

# torch dtype (without "torch.") -> inputs.yaml dtype. bool travels as char (0 or 1).
DTYPES = {
    "float32": "float", "float64": "double", "float16": "half", "bfloat16": "bf16",
    "int32": "int", "int64": "long", "int16": "short", "int8": "char", "bool": "char",
}  # fmt: skip
MAX_DIMS = 8
MAX_ELEMENTS = 1 << 36  # 64 Gi elements: far past any GPU; the memory bound stops a probe long before
MAX_TENSORS = 512  # inputs + parameters + outputs of one module
SOURCE_NAME = re.compile(r"^[A-Za-z0-9_.:\[\] -]{1,200}\Z")  # a state_dict key, an argument name


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Init(_Strict):
    """How an input's values are drawn: a distribution inputs.yaml has, or ``file`` (the drawn data)."""

    kind: Literal["random", "normal", "file"]
    low: float | None = None
    high: float | None = None
    mean: float | None = None
    std: float | None = None

    @field_validator("low", "high", "mean", "std")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError("not a finite number")
        return value


class TensorInfo(_Strict):
    kind: Literal["tensor"] = "tensor"
    source: str  # the forward's argument name, the state_dict key, or "output N"
    dtype: str
    shape: list[Annotated[int, Field(ge=0, le=MAX_ELEMENTS)]] = Field(max_length=MAX_DIMS)
    init: Init | None = None  # inputs; parameters and buffers are always files

    @field_validator("dtype")
    @classmethod
    def _known(cls, value: str) -> str:
        if value not in DTYPES:
            raise ValueError(f"dtype {value!r} has no inputs.yaml dtype (known: {', '.join(DTYPES)})")
        return value

    @field_validator("source")
    @classmethod
    def _plain(cls, value: str) -> str:
        if not SOURCE_NAME.match(value):
            raise ValueError("not a plain name")
        return value

    @property
    def elements(self) -> int:
        return math.prod(self.shape) if self.shape else 1

    @property
    def itemsize(self) -> int:
        return {"float64": 8, "int64": 8, "float32": 4, "int32": 4, "float16": 2, "bfloat16": 2, "int16": 2}.get(
            self.dtype, 1
        )


class ScalarInfo(_Strict):
    """A number that get_inputs() returns among the tensors: a runtime scalar of the boundary."""

    kind: Literal["scalar"] = "scalar"
    source: str
    dtype: Literal["int", "float"]
    value: float

    @field_validator("value")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value) or abs(value) > 2**62:
            raise ValueError("not a finite number in range")
        return value


InputInfo = Annotated[TensorInfo | ScalarInfo, Field(discriminator="kind")]


class ProbeReport(_Strict):
    ok: bool
    kind: str | None = None  # form | missing_module | error | memory
    message: str = Field(default="", max_length=2000)
    line: int | None = None
    seed: int = 42
    inputs: list[InputInfo] = Field(default_factory=list, max_length=MAX_TENSORS)
    params: list[TensorInfo] = Field(default_factory=list, max_length=MAX_TENSORS)
    outputs: list[TensorInfo] = Field(default_factory=list, max_length=MAX_TENSORS)
    # The module's top-level whole numbers (batch_size = 16, ...), in definition order: names for dims.
    sizes: dict[str, int] = Field(default_factory=dict, max_length=256)
    init_inputs: str = Field(default="", max_length=400)  # repr of get_init_inputs(), for the README
    shapes_from: Literal["meta", "cpu", ""] = ""  # how the outputs' shapes were found
    training: bool = True  # Model as constructed is in training mode (KernelBench never calls eval())
    random_in_forward: list[str] = Field(default_factory=list, max_length=64)  # e.g. Dropout(p=0.5)
    walls: list[str] = Field(default_factory=list, max_length=16)  # containment the child lacked
