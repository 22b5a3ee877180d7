"""A small, safe evaluator for the arithmetic in problem and tuning files.

Sizes, grids, restrictions and launch geometry are written as C-like expressions
(``(N + 15) / 16``, ``BLOCK_X * BLOCK_Y <= 1024 && TILE % 2 == 0``). They come from
files an LLM or a user wrote, so they are parsed here by a tiny Pratt parser and
evaluated over a closed namespace: no ``eval``, no attribute access, no calls other
than a short whitelist of pure functions.

Semantics follow C for integers: ``/`` between integers truncates toward zero, ``%``
takes the sign of the dividend, and results must fit in 64 bits. Python spellings of
the logical operators (``and``, ``or``, ``not``) are accepted too, since Kernel Tuner
restrictions use them. ``//`` starts a comment, as in C++; it is not integer division.

One exception, the ``python`` dialect (``Expression(text, python=True)``): the older inline
form of problem.yaml, whose sizes and grid the original evaluated as Python. There ``//`` is
floor division, ``/`` is true division (a size that comes out fractional is an error, as in the
original), ``%`` takes the sign of the divisor and ``**`` is the power.

Every input gives a number or one ``ExpressionError`` line, never another exception: the
text is capped in length and nesting depth (so neither parsing nor evaluation recurses
without bound), every literal, intermediate and result is checked (integers within 64 bits,
floats finite), and operands must be numbers. Evaluation is therefore linear in the length
of the text: no operation works on more than 64-bit operands or loops.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

Number = int | float
Env = Mapping[str, Number]

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
MAX_EXPRESSION_LENGTH = 4096  # characters, comment removed
MAX_EXPRESSION_DEPTH = 100  # nesting of parentheses, operators and calls in one expression
_MAX_LITERAL_DIGITS = 40


class ExpressionError(ValueError):
    """An expression that cannot be parsed or evaluated; the message is user-facing."""


def _c_div(a: Number, b: Number) -> Number:
    if b == 0:
        raise ExpressionError("division by zero")
    if isinstance(a, int) and isinstance(b, int):
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    return a / b


def _c_mod(a: Number, b: Number) -> Number:
    if b == 0:
        raise ExpressionError("division by zero (in %)")
    if isinstance(a, int) and isinstance(b, int):
        return a - _c_div(a, b) * b
    return math.fmod(a, b)


def _ceil_div(a: Number, b: Number) -> int:
    if b == 0:
        raise ExpressionError("division by zero (in ceil_div)")
    if isinstance(a, int) and isinstance(b, int):
        return -((-a) // b)
    return math.ceil(_finite(a / b))


def _round_up(a: Number, b: Number) -> Number:
    return _ceil_div(a, b) * b


def _to_int(x: Number) -> int:
    return int(x)


def _log2(x: Number) -> float:
    if x <= 0:
        raise ExpressionError(f"log2 of non-positive value {x}")
    return math.log2(x)


def _sqrt(x: Number) -> float:
    if x < 0:
        raise ExpressionError(f"sqrt of negative value {x}")
    return math.sqrt(x)


def _pow(a: Number, b: Number) -> Number:
    if isinstance(a, int) and isinstance(b, int) and b >= 0:
        if b > 64 and abs(a) > 1:
            raise ExpressionError("pow result does not fit in 64 bits")
        return a**b
    if a == 0 and b < 0:
        raise ExpressionError("pow(0, negative): division by zero")
    if a < 0 and not float(b).is_integer():
        raise ExpressionError(f"pow of negative value {a} to a non-integer power {b}")
    try:
        return math.pow(a, b)
    except OverflowError:
        raise ExpressionError("pow result is too large") from None


def _finite(x: float) -> float:
    if not math.isfinite(x):
        raise ExpressionError("result is not a finite number")
    return x


def _ceil(x: Number) -> int:
    return math.ceil(x)


def _floor(x: Number) -> int:
    return math.floor(x)


FUNCTIONS: dict[str, tuple[Callable[..., Number], int | None]] = {
    # name: (function, number of arguments or None for "one or more")
    "min": (min, None),
    "max": (max, None),
    "abs": (abs, 1),
    "ceil": (_ceil, 1),
    "floor": (_floor, 1),
    "ceil_div": (_ceil_div, 2),
    "div_up": (_ceil_div, 2),
    "round_up": (_round_up, 2),
    "int": (_to_int, 1),
    "log2": (_log2, 1),
    "sqrt": (_sqrt, 1),
    "pow": (_pow, 2),
}

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<num>(?:0[xX][0-9a-fA-F]+|(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)[uUlLfF]*)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>&&|\|\||<<|>>|<=|>=|==|!=|[-+*/%()<>!?:,&|^~])
    """,
    re.VERBOSE,
)
# The python dialect: the same, plus the two-character operators // and **.
_PY_TOKEN = re.compile(_TOKEN.pattern.replace("(?P<op>", "(?P<op>//|\\*\\*|"), re.VERBOSE)


@dataclass(frozen=True)
class _Tok:
    kind: str  # "num", "name", "op", "end"
    text: str
    pos: int


def strip_comment(text: str) -> str:
    """Remove a trailing ``//`` comment (C++ style); ``//`` is never integer division here."""
    idx = text.find("//")
    return text if idx < 0 else text[:idx]


def _tokenize(text: str, python: bool = False) -> list[_Tok]:
    toks: list[_Tok] = []
    pos = 0
    pattern = _PY_TOKEN if python else _TOKEN
    while pos < len(text):
        m = pattern.match(text, pos)
        if not m:
            raise ExpressionError(f"unexpected character {text[pos]!r} at position {pos + 1}")
        kind = m.lastgroup or ""
        if kind != "ws":
            toks.append(_Tok(kind, m.group(), pos))
        pos = m.end()
    toks.append(_Tok("end", "", len(text)))
    return toks


def _parse_number(text: str) -> Number:
    body = text.rstrip("uUlLfF") if not text.lower().startswith("0x") else text.rstrip("uUlL")
    if len(body) > _MAX_LITERAL_DIGITS:
        raise ExpressionError(f"number {_quote(text)} is too long (more than {_MAX_LITERAL_DIGITS} characters)")
    if body.lower().startswith("0x"):
        value: Number = int(body, 16)
    elif any(c in body for c in ".eE") or text[-1:] in "fF":
        value = float(body)
    else:
        value = int(body)
    if isinstance(value, int) and not (INT64_MIN <= value <= INT64_MAX):
        raise ExpressionError(f"number {_quote(text)} does not fit in 64 bits")
    if isinstance(value, float) and not math.isfinite(value):
        raise ExpressionError(f"number {_quote(text)} is not a finite number")
    return value


def _quote(text: str, limit: int = 40) -> str:
    """A token for a message: repr (so control characters are escaped), at most ``limit`` characters."""
    return repr(text) if len(text) <= limit else repr(text[: limit - 3]) + "..."


# A compiled node is a function from the environment to a number.
Node = Callable[[Env], Number]

_BINARY_PRECEDENCE = {
    "||": 1,
    "or": 1,
    "&&": 2,
    "and": 2,
    "|": 3,
    "^": 4,
    "&": 5,
    "==": 6,
    "!=": 6,
    "<": 7,
    "<=": 7,
    ">": 7,
    ">=": 7,
    "<<": 8,
    ">>": 8,
    "+": 9,
    "-": 9,
    "*": 10,
    "/": 10,
    "%": 10,
    "//": 10,  # the python dialect only (never a token otherwise)
    "**": 12,  # the python dialect only; binds tighter than a unary minus on its left, right to left
}
_TERNARY_PRECEDENCE = 0
_UNARY_PRECEDENCE = 11


def _check_int64(value: Number) -> Number:
    if isinstance(value, int) and not (INT64_MIN <= value <= INT64_MAX):
        raise ExpressionError("integer overflow: result does not fit in 64 bits")
    if isinstance(value, float) and not math.isfinite(value):
        raise ExpressionError("result is not a finite number")
    if isinstance(value, complex):  # cannot happen with the functions above; kept as a guard
        raise ExpressionError("result is not a real number")
    return value


def _require_int(op: str, *values: Number) -> None:
    for v in values:
        if not isinstance(v, int):
            raise ExpressionError(f"operator {op!r} needs integers, got {v!r}")


def _arith(op: str, a: Number, b: Number) -> Number:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return _c_div(a, b)
    if op == "%":
        return _c_mod(a, b)
    if op == "<":
        return int(a < b)
    if op == "<=":
        return int(a <= b)
    if op == ">":
        return int(a > b)
    if op == ">=":
        return int(a >= b)
    if op == "==":
        return int(a == b)
    if op == "!=":
        return int(a != b)
    _require_int(op, a, b)
    assert isinstance(a, int) and isinstance(b, int)
    if op == "&":
        return a & b
    if op == "|":
        return a | b
    if op == "^":
        return a ^ b
    if b < 0 or b >= 64:
        raise ExpressionError(f"shift count {b} out of range")
    return a << b if op == "<<" else a >> b


def _py_arith(op: str, a: Number, b: Number) -> Number:
    """Python's meaning of / // % ** (the python dialect)."""
    if op in ("/", "//", "%") and b == 0:
        raise ExpressionError(f"division by zero (in {op})")
    if op == "/":
        return a / b
    if op == "//":
        return a // b
    if op == "%":
        return a % b
    return _pow(a, b)


def _binary(op: str, left: Node, right: Node, python: bool = False) -> Node:
    if python and op in ("/", "//", "%", "**"):

        def apply_py(env: Env) -> Number:
            try:
                return _check_int64(_py_arith(op, left(env), right(env)))
            except ExpressionError:
                raise
            except (OverflowError, ZeroDivisionError, ValueError) as exc:
                raise ExpressionError(f"operator {op!r}: {_arith_message(exc)}") from None

        return apply_py
    if op in ("&&", "and"):
        return lambda env: int(bool(left(env)) and bool(right(env)))
    if op in ("||", "or"):
        return lambda env: int(bool(left(env)) or bool(right(env)))

    def apply(env: Env) -> Number:
        try:
            return _check_int64(_arith(op, left(env), right(env)))
        except (OverflowError, ZeroDivisionError, ValueError) as exc:  # float overflow in * or /
            if isinstance(exc, ExpressionError):
                raise
            raise ExpressionError(f"operator {op!r}: {_arith_message(exc)}") from None

    return apply


def _arith_message(exc: BaseException) -> str:
    if isinstance(exc, ZeroDivisionError):
        return "division by zero"
    if isinstance(exc, OverflowError):
        return "result is too large"
    return "invalid operands"


def _load(name: str) -> Node:
    def load(env: Env) -> Number:
        value = env[name]
        if isinstance(value, str):
            raise ExpressionError(f"{name!r} is the text {_quote(value)}, not a number")
        return _check_int64(value)

    return load


class _Parser:
    """Pratt parser; every parse method returns (node, depth of the node tree)."""

    def __init__(self, text: str, toks: list[_Tok], python: bool = False) -> None:
        self.text = text
        self.toks = toks
        self.python = python
        self.i = 0
        self.level = 0
        self.names: set[str] = set()

    def peek(self) -> _Tok:
        return self.toks[self.i]

    def take(self) -> _Tok:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def expect(self, text: str) -> None:
        tok = self.take()
        if tok.text != text:
            found = "end of expression" if tok.kind == "end" else _quote(tok.text)
            raise ExpressionError(f"expected {text!r} at position {tok.pos + 1}, found {found}")

    def _deeper(self, depth: int, tok: _Tok) -> int:
        if depth > MAX_EXPRESSION_DEPTH:
            raise ExpressionError(
                f"nested more than {MAX_EXPRESSION_DEPTH} levels deep (at position {tok.pos + 1}); simplify it"
            )
        return depth

    def parse(self, min_prec: int = -1) -> tuple[Node, int]:
        self.level += 1
        self._deeper(self.level, self.peek())
        try:
            return self._parse(min_prec)
        finally:
            self.level -= 1

    def _parse(self, min_prec: int) -> tuple[Node, int]:
        left, depth = self.prefix()
        while True:
            tok = self.peek()
            op = tok.text
            if tok.kind == "op" and op == "?" and min_prec < _TERNARY_PRECEDENCE:
                self.take()
                then, d_then = self.parse(-1)
                self.expect(":")
                other, d_other = self.parse(_TERNARY_PRECEDENCE - 1)
                cond = left
                left = (lambda c, t, o: lambda env: t(env) if c(env) else o(env))(cond, then, other)
                depth = self._deeper(max(depth, d_then, d_other) + 1, tok)
                continue
            if tok.kind in ("op", "name") and op in _BINARY_PRECEDENCE:
                prec = _BINARY_PRECEDENCE[op]
                if prec <= min_prec:
                    break
                self.take()
                right, d_right = self.parse(prec - 1 if op == "**" else prec)  # ** groups right to left
                left = _binary(op, left, right, self.python)
                depth = self._deeper(max(depth, d_right) + 1, tok)
                continue
            break
        return left, depth

    def prefix(self) -> tuple[Node, int]:
        tok = self.take()
        if tok.kind == "num":
            value = _parse_number(tok.text)
            return (lambda env: value), 1
        if tok.kind == "op" and tok.text == "(":
            inner = self.parse()
            self.expect(")")
            return inner
        if tok.kind == "op" and tok.text in ("-", "+", "!", "~"):
            operand, depth = self.parse(_UNARY_PRECEDENCE)
            depth = self._deeper(depth + 1, tok)
            if tok.text == "-":
                return (lambda env: _check_int64(-operand(env))), depth
            if tok.text == "+":
                return operand, depth
            if tok.text == "!":
                return (lambda env: int(not operand(env))), depth

            def invert(env: Env) -> Number:
                v = operand(env)
                _require_int("~", v)
                assert isinstance(v, int)
                return ~v

            return invert, depth
        if tok.kind == "name":
            if tok.text == "not":
                operand, depth = self.parse(_UNARY_PRECEDENCE)
                return (lambda env: int(not operand(env))), self._deeper(depth + 1, tok)
            if tok.text in ("True", "true"):
                return (lambda env: 1), 1
            if tok.text in ("False", "false"):
                return (lambda env: 0), 1
            if self.peek().text == "(":
                return self.call(tok)
            self.names.add(tok.text)
            return _load(tok.text), 1
        found = "end of expression" if tok.kind == "end" else _quote(tok.text)
        raise ExpressionError(f"unexpected {found} at position {tok.pos + 1}")

    def call(self, tok: _Tok) -> tuple[Node, int]:
        if tok.text not in FUNCTIONS:
            allowed = ", ".join(sorted(FUNCTIONS))
            raise ExpressionError(f"unknown function {_quote(tok.text)} (allowed: {allowed})")
        func, arity = FUNCTIONS[tok.text]
        self.expect("(")
        parsed: list[tuple[Node, int]] = []
        if self.peek().text != ")":
            parsed.append(self.parse())
            while self.peek().text == ",":
                self.take()
                parsed.append(self.parse())
        self.expect(")")
        if (arity is None and not parsed) or (arity is not None and len(parsed) != arity):
            want = "at least 1" if arity is None else str(arity)
            raise ExpressionError(f"{tok.text}() takes {want} argument(s), got {len(parsed)}")
        name = tok.text
        args = [node for node, _ in parsed]
        depth = self._deeper(max(d for _, d in parsed) + 1, tok)

        def apply(env: Env) -> Number:
            values = [a(env) for a in args]
            try:
                return _check_int64(func(*values))
            except ExpressionError:
                raise
            except ZeroDivisionError:
                raise ExpressionError(f"{name}(): division by zero") from None
            except OverflowError:
                raise ExpressionError(f"{name}(): result is too large") from None
            except (ValueError, TypeError) as exc:
                raise ExpressionError(f"{name}(): {_quote(str(exc), 80)}") from None

        return apply, depth


class Expression:
    """A parsed expression; ``names`` are the free names it reads. ``python``: the python
    dialect (the older inline form's sizes and grid), where ``//`` is floor division."""

    __slots__ = ("_node", "names", "python", "text")

    def __init__(self, source: str | int | float, python: bool = False) -> None:
        self.python = python
        if isinstance(source, bool):
            source = int(source)
        if isinstance(source, (int, float)):
            if isinstance(source, int) and not (INT64_MIN <= source <= INT64_MAX):
                raise ExpressionError(f"{_quote(str(source))} does not fit in 64 bits")
            if isinstance(source, float) and not math.isfinite(source):
                raise ExpressionError(f"{source} is not a finite number")
            value: Number = source
            self.text = str(source)
            self.names: frozenset[str] = frozenset()
            self._node: Node = lambda env: value
            return
        if not isinstance(source, str):
            raise ExpressionError(f"expected a number or an expression, got {type(source).__name__}")
        self.text = (source if python else strip_comment(source)).strip()
        if not self.text:
            raise ExpressionError("empty expression")
        if len(self.text) > MAX_EXPRESSION_LENGTH:
            raise ExpressionError(f"longer than {MAX_EXPRESSION_LENGTH} characters")
        parser = _Parser(self.text, _tokenize(self.text, python), python)
        self._node, _ = parser.parse()
        tail = parser.peek()
        if tail.kind != "end":
            raise ExpressionError(f"unexpected {_quote(tail.text)} at position {tail.pos + 1}")
        self.names = frozenset(parser.names)

    def check_names(self, known: set[str] | frozenset[str] | Mapping[str, object]) -> None:
        unknown = sorted(n for n in self.names if n not in known)
        if unknown:
            shown = ", ".join(sorted(known)) or "none"
            raise ExpressionError(f"unknown name {unknown[0]!r} (known names: {shown})")

    def evaluate(self, env: Env) -> Number:
        try:
            return self._node(env)
        except KeyError as exc:
            shown = ", ".join(sorted(env)) or "none"
            raise ExpressionError(f"unknown name {exc.args[0]!r} (known names: {shown})") from None
        except RecursionError:
            raise ExpressionError("expression is nested too deeply") from None
        except ExpressionError:
            raise
        except (ArithmeticError, ValueError, TypeError) as exc:  # a guard: the nodes above convert their own
            raise ExpressionError(f"cannot evaluate: {_arith_message(exc)}") from None

    def evaluate_int(self, env: Env) -> int:
        value = self.evaluate(env)
        if isinstance(value, float):
            if not value.is_integer():
                why = " (a Python expression here: / is true division, // floor division)" if self.python else ""
                raise ExpressionError(f"expected an integer, got {value}{why}")
            value = int(value)
        return value

    def __repr__(self) -> str:
        return f"Expression({self.text!r})"


def evaluate(source: str | int | float, env: Env) -> Number:
    return Expression(source).evaluate(env)


def evaluate_int(source: str | int | float, env: Env) -> int:
    return Expression(source).evaluate_int(env)
