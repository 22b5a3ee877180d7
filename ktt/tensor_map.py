"""Tensor-map launch arguments (TMA descriptors): element types, options and the driver's rules.

A kernel that loads or stores through the tensor memory accelerator takes a ``CUtensorMap``
(128 bytes, by value, as a ``__grid_constant__ const`` parameter) that the host encodes with
``cuTensorMapEncodeTiled`` for one device address. The GPU worker encodes it (ktt.device) for
the buffer's current address; everything that does not depend on the address is checked here,
with no GPU and no driver, by ``ktt check`` and by the orchestrator before a configuration
reaches the GPU: the rank, the sizes and alignments the driver demands (cuda.h documents them
with cuTensorMapEncodeTiled), the swizzle span, and that ``dims`` x ``strides`` stay inside
the buffer the map describes. TMA never reads or writes outside ``dims``: elements of a box
that fall outside are filled (zero, or NaN with ``oob_fill: nan``) on a load and dropped on a
store, so a map that fits its buffer keeps every access inside it.

``dims``, ``box`` and ``strides`` are written innermost dimension first, as the driver takes
them; ``strides`` are in elements of the map's dtype (the driver's are in bytes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# The driver's element types (CUtensorMapDataType) by name, with their size in bytes.
TMA_DTYPES: dict[str, int] = {
    "uint8": 1,
    "uint16": 2,
    "uint32": 4,
    "int32": 4,
    "uint64": 8,
    "int64": 8,
    "float16": 2,
    "float32": 4,
    "float64": 8,
    "bfloat16": 2,
    "float32_ftz": 4,
    "tfloat32": 4,
    "tfloat32_ftz": 4,
}
FLOAT_DTYPES = frozenset({"float16", "float32", "float64", "bfloat16", "float32_ftz", "tfloat32", "tfloat32_ftz"})
# A map's dtype when it names none: the buffer's element type (ktt.problem.files.DTYPES). "long"
# is the older inline form's int64 (issue 19); its char and short have no signed TMA type: a map
# of them names its dtype (uint8, uint16).
BUFFER_TMA_DTYPE = {
    "int": "int32", "float": "float32", "double": "float64", "long": "int64", "bf16": "bfloat16", "half": "float16",
}  # fmt: skip
SWIZZLE_BYTES = {"none": 0, "32B": 32, "64B": 64, "128B": 128}
L2_PROMOTION_BYTES = {"none": 0, "64B": 64, "128B": 128, "256B": 256}
OOB_FILLS = ("none", "nan")  # none: out-of-bound elements read as zero (CUDA's FLOAT_OOB_FILL_NONE)

MAX_RANK = 5
MAX_BOX = 256
MAX_DIM = 2**32
MAX_STRIDE_BYTES = 2**40
ALIGN_BYTES = 16  # global address, strides and the inner box row
TENSOR_MAP_BYTES = 128


@dataclass(frozen=True)
class TensorMapGeometry:
    """One map with every expression evaluated: what the worker hands to cuTensorMapEncodeTiled."""

    buffer: str  # the problem or scratch buffer it describes
    dtype: str  # a TMA_DTYPES name
    dims: tuple[int, ...]  # elements, innermost first
    strides: tuple[int, ...]  # bytes, of dims[1:] (rank - 1 entries)
    box: tuple[int, ...]  # elements, innermost first
    swizzle: str = "none"
    l2_promotion: str = "none"
    oob_fill: str = "none"

    @property
    def itemsize(self) -> int:
        return TMA_DTYPES[self.dtype]

    def extent_bytes(self) -> int:
        """Bytes from the buffer's start to the end of the map's last element."""
        return self.dims[0] * self.itemsize + sum((d - 1) * s for d, s in zip(self.dims[1:], self.strides, strict=True))

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "tensor_map",
            "name": self.buffer,
            "dtype": self.dtype,
            "dims": list(self.dims),
            "strides": list(self.strides),
            "box": list(self.box),
            "swizzle": self.swizzle,
            "l2_promotion": self.l2_promotion,
            "oob_fill": self.oob_fill,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TensorMapGeometry:
        return cls(
            str(data["name"]),
            str(data["dtype"]),
            tuple(int(v) for v in data["dims"]),
            tuple(int(v) for v in data["strides"]),
            tuple(int(v) for v in data["box"]),
            str(data.get("swizzle", "none")),
            str(data.get("l2_promotion", "none")),
            str(data.get("oob_fill", "none")),
        )


def packed_strides(dims: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Byte strides of a dense tensor (no padding): dims[0] * itemsize, then times each next dim."""
    out: list[int] = []
    step = itemsize
    for d in dims[:-1]:
        step *= d
        out.append(step)
    return tuple(out)


def static_problem(field: str, value: int, dtype: str, swizzle: str) -> str | None:
    """A rule one constant ``dims[i]``/``box[i]``/``strides[i]`` breaks on its own (field: 'box[0]'...)."""
    size = TMA_DTYPES[dtype]
    kind, _, rest = field.partition("[")
    index = int(rest.rstrip("]"))
    if kind == "dims":
        if not 1 <= value <= MAX_DIM:
            return f"{value} is out of range 1..2^32"
    elif kind == "box":
        if not 1 <= value <= MAX_BOX:
            return f"{value} is out of range 1..{MAX_BOX} (the driver's largest box side)"
        if index == 0:
            row = value * size
            if row % ALIGN_BYTES:
                return (
                    f"{value} x {size} B ({dtype}) = {row} B; the box's inner row must be a multiple of "
                    f"{ALIGN_BYTES} bytes"
                )
            span = SWIZZLE_BYTES[swizzle]
            if span and row > span:
                return f"{value} x {size} B ({dtype}) = {row} B is wider than the swizzle span ({swizzle})"
    elif kind == "strides":
        nbytes = value * size
        if value < 1:
            return f"{value}: a stride is at least 1 element"
        if nbytes % ALIGN_BYTES:
            return f"{value} elements x {size} B = {nbytes} B; strides must be multiples of {ALIGN_BYTES} bytes"
        if nbytes >= MAX_STRIDE_BYTES:
            return f"{nbytes} B; strides must be below 2^40 bytes"
    return None


def geometry_problem(g: TensorMapGeometry, buffer_bytes: int, buffer_label: str) -> tuple[str, str] | None:
    """(field, message) for the first rule an evaluated map breaks, else None.

    ``field`` is relative to the map: 'dims[1]', 'box[0]', 'strides[0]', 'oob_fill', 'dims'.
    ``buffer_label`` names the buffer in messages ('A (4,096 elements of float)')."""
    for kind, values in (("dims", g.dims), ("box", g.box)):
        for i, v in enumerate(values):
            why = static_problem(f"{kind}[{i}]", v, g.dtype, g.swizzle)
            if why:
                return f"{kind}[{i}]", why
    return layout_problem(g, buffer_bytes, buffer_label)


def layout_problem(g: TensorMapGeometry, buffer_bytes: int, buffer_label: str) -> tuple[str, str] | None:
    """The rules on ``dims`` and ``strides`` alone (the box and the swizzle aside): alignment, no
    overlapping rows, and the fit in the buffer."""
    size = g.itemsize
    for i, nbytes in enumerate(g.strides):
        if nbytes % size:
            return f"strides[{i}]", f"{nbytes} B is not a whole number of {g.dtype} elements"
        why = static_problem(f"strides[{i}]", nbytes // size, g.dtype, g.swizzle)
        if why:
            return f"strides[{i}]", why
    # Each stride spans the dimensions inside it (cuda.h: globalStrides[i] includes the previous ones).
    inner = g.dims[0] * size
    for i, (d, s) in enumerate(zip(g.dims[1:], g.strides, strict=True)):
        if s < inner:
            return (
                f"strides[{i}]",
                f"{s // size} elements ({s} B) is less than the {inner // size} elements ({inner} B) of the "
                f"dimensions inside it: rows would overlap",
            )
        inner = s * d
    if g.oob_fill == "nan" and g.dtype not in FLOAT_DTYPES:
        return "oob_fill", f"nan fills need a floating-point dtype, not {g.dtype}"
    extent = g.extent_bytes()
    if extent > buffer_bytes:
        return (
            "dims",
            f"dims {list(g.dims)}{f' with strides {[s // size for s in g.strides]}' if g.strides else ''} span "
            f"{extent:,} bytes, but "
            f"{buffer_label} holds {buffer_bytes:,}: a box would run past the buffer's end",
        )
    return None


def address_problem(address: int) -> str | None:
    """The one rule that depends on the device address (checked by the worker before encoding)."""
    if address % ALIGN_BYTES:
        return f"the buffer's address 0x{address:x} is not {ALIGN_BYTES}-byte aligned"
    return None
