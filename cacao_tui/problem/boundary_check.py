"""Does the reference declare the parameters the boundary asks for? (a warning, as the original's UI gives)

The boundary (inputs.yaml: every buffer and every runtime scalar, in args order) is what a
kernel and a ``cuda`` reference take; a ``cpu_c`` reference takes the buffers only; a
``python`` reference is ``f(scalars, buffers)`` (a newer one also ``target``). A reference
whose declaration says otherwise builds, and then reads its arguments in the wrong places: the
editor warns about it before the first run does: another count of parameters, or the
boundary's names in another order (parameters are positional: a name of its own is no
mistake). The reference is untrusted text: it is only
scanned (bounded), never compiled or imported here.
"""

from __future__ import annotations

import ast
import re

from ktt.problem.model import Buffer, Problem

MAX_SOURCE_CHARS = 2_000_000
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_IDENT = re.compile(r"[A-Za-z_]\w*")


def _c_parameters(source: str, function: str) -> list[str] | None:
    """The parameter names of ``function``'s first definition or declaration in C/CUDA ``source``;
    None when it is not found (the build step reports that)."""
    text = _COMMENTS.sub(" ", source[:MAX_SOURCE_CHARS])
    m = re.search(rf"\b{re.escape(function)}\s*\(", text)
    if m is None:
        return None
    depth, start = 1, m.end()
    for i in range(start, min(len(text), start + 20_000)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            inner = text[start:i]
            break
    else:
        return None
    params = [p.strip() for p in _split_top(inner) if p.strip() and p.strip() != "void"]
    names = []
    for p in params:
        words = _IDENT.findall(re.sub(r"\[[^\]]*\]", "", p))
        names.append(words[-1] if words else p)
    return names


def _split_top(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "(<[":
            depth += 1
        elif ch in ")>]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def _python_arguments(source: str, function: str) -> list[str] | None:
    try:
        tree = ast.parse(source[:MAX_SOURCE_CHARS])
    except (SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == function:
            return [a.arg for a in [*node.args.posonlyargs, *node.args.args]]
    return None


def _names(params: list[str]) -> str:
    return f"({', '.join(params)})"


def boundary_warnings(problem: Problem, source: str) -> list[str]:
    """One line per way the reference's declaration (``source``) differs from what the boundary asks."""
    ref = problem.reference
    function = ref.function or ""
    if ref.type == "python":
        args = _python_arguments(source, function) if function else None
        if args is None:
            return []
        if len(args) not in (2, 3):
            return [f"{ref.file.name}: {function}{_names(args)} takes {len(args)} argument(s); a python reference "
                    "is f(scalars, buffers) (a newer one also takes target)"]  # fmt: skip
        return []
    if ref.type == "cuda":
        expected = [a.name for a in problem.boundary]
        what = "the boundary (every buffer and runtime scalar, in inputs.yaml's order)"
    else:
        expected = [b.name for b in problem.args if isinstance(b, Buffer)]
        what = "the buffers, in inputs.yaml's order (a cpu_c reference gets the scalars as -D macros)"
    params = _c_parameters(source, function) if function else None
    if params is None:
        return []
    if len(params) != len(expected):
        return [f"{ref.file.name}: {function}{_names(params)} declares {len(params)} parameter(s); "
                f"{what} has {len(expected)}: {_names(expected)}"]  # fmt: skip
    # Parameters are positional: another name is no mistake, one of the boundary's names in another
    # place is (the arguments arrive in inputs.yaml's order, not by name).
    lower = [e.lower() for e in expected]
    moved = [f"{i + 1}: {p} (boundary: {e})" for i, (p, e) in enumerate(zip(params, expected, strict=True))
             if p.lower() != e.lower() and p.lower() in lower]  # fmt: skip
    if moved:
        return [f"{ref.file.name}: {function} takes the boundary's parameters in another order than {what}: "
                + "; ".join(moved[:4]) + (" ..." if len(moved) > 4 else "")]  # fmt: skip
    return []
