"""Generate inputs.hpp: the constants and element types of inputs.yaml, for kernels and C references.

The header is C as well as C++ (a cpu_c reference includes it). Every macro is guarded
with ``#ifndef`` so the ``-D`` values of a case or a tuning configuration win. inputs.yaml's
``headers`` are not included: as in the original they are host includes of the custom
generators (ktt.inputs), and a kernel compiled by NVRTC must not see ``<algorithm>``.
"""

from __future__ import annotations

import re
from pathlib import Path

from ktt.problem.model import Buffer, Problem, Shape

HEADER_NAME = "inputs.hpp"


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
    lines.append("// element types and sizes (elements) of the boundary buffers")
    for b in problem.buffers:
        lines.append(f"typedef {b.ctype} {b.name}_t;")
        lines.append(_size_macro(b, set(defines), shape))
    lines.append("")
    return "\n".join(lines)


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
