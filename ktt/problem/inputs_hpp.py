"""Generate inputs.hpp: the constants and element types of inputs.yaml, for kernels and C references.

The header is C as well as C++ (a cpu_c reference includes it); a bf16 or half buffer's type
is CUDA's in a kernel and its uint16_t bit pattern in C. Every macro is guarded
with ``#ifndef`` so the ``-D`` values of a case or a tuning configuration win. inputs.yaml's
``headers`` are not included: as in the original they are host includes of the custom
generators (ktt.inputs), and a kernel compiled by NVRTC must not see ``<algorithm>``.
"""

from __future__ import annotations

import re
from pathlib import Path

from ktt.half_types import C_HELPERS, HALF_DTYPES
from ktt.problem.model import Buffer, Problem, Shape

HEADER_NAME = "inputs.hpp"
CUDA_HEADERS = {"bf16": "cuda_bf16.h", "half": "cuda_fp16.h"}


def render_inputs_hpp(problem: Problem, shape: Shape | None = None) -> str:
    shape = shape or problem.primary
    lines = [
        f"// {HEADER_NAME}: generated from inputs.yaml of problem '{problem.name}'. Do not edit:",
        "// it is rewritten whenever inputs.yaml changes.",
        "#pragma once",
        "",
    ]
    defines = problem.defines(shape)
    if defines:
        lines.append("// scalars with placement 'define' (also passed as -D)")
        for name, value in defines.items():
            lines += [f"#ifndef {name}", f"#define {name} {_literal(value)}", "#endif"]
        lines.append("")
    halves = [b for b in problem.buffers if b.dtype in HALF_DTYPES]
    if halves:
        lines += _half_prelude(halves)
    lines.append("// element types and sizes (elements) of the boundary buffers")
    for b in problem.buffers:
        if b.dtype not in HALF_DTYPES:
            lines.append(f"typedef {b.ctype} {b.name}_t;")
        lines.append(_size_macro(b, set(defines), shape))
    lines.append("")
    return "\n".join(lines)


def _half_prelude(halves: list[Buffer]) -> list[str]:
    """CUDA's 16-bit float types in kernels; their bit patterns and the conversions in C (ktt.half_types)."""
    dtypes = {b.dtype for b in halves}
    lines = [
        "// 16-bit float buffers: CUDA's types in kernels; in C (a cpu_c reference) their bit patterns,",
        "// uint16_t, with conversions that round to nearest even (ktt_float_to_bf16, ktt_bf16_to_float, ...)",
        "#if defined(__CUDACC__) || defined(__CUDACC_RTC__)",
    ]
    lines += [f"#include <{CUDA_HEADERS[d]}>" for d in sorted(dtypes)]
    lines += [f"typedef {b.ctype} {b.name}_t;" for b in halves]
    lines += ["#else", "#include <stdint.h>", "#include <string.h>", C_HELPERS.rstrip("\n")]
    lines += [f"typedef {b.host_ctype} {b.name}_t;" for b in halves]
    lines += ["#endif", ""]
    return lines


def _literal(value: int | float) -> str:
    if isinstance(value, float):
        text = repr(value)
        return f"{text}f" if ("." in text or "e" in text) else f"{text}.0f"
    return str(value)


def _size_macro(buffer: Buffer, define_names: set[str], shape: Shape) -> str:
    name = f"{buffer.name}_SIZE"
    # A size in the python dialect (the inline form: // is floor division) is never pasted as C.
    if buffer.size.names and buffer.size.names <= define_names and not buffer.size.python:
        # Widen every name first so the product cannot overflow a 32-bit int.
        widened = re.sub(
            r"[A-Za-z_][A-Za-z0-9_]*",
            lambda m: f"((size_t){m.group()})" if m.group() in define_names else m.group(),
            buffer.size.text,
        )
        body = f"({widened})"
    else:
        body = f"((size_t){shape.sizes[buffer.name]}ULL)"
    return f"#ifndef {name}\n#define {name} {body}\n#endif"


def write_inputs_hpp(problem: Problem, directory: Path | None = None) -> Path:
    """Write inputs.hpp (default: the problem directory) only when its content changed."""
    target = (directory or problem.directory) / HEADER_NAME
    text = render_inputs_hpp(problem)
    if not target.exists() or target.read_text(encoding="utf-8") != text:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".hpp.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(target)
    return target
