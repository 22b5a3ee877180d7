"""Linear-time scans of C, C++ and CUDA source that came from a problem directory or a model.

Backtracking regular expressions over untrusted text take time that grows with the square of
its length (or worse): ``^\\s*`` over a file of blank lines, ``/\\*.*?\\*/`` over many unclosed
comments, ``__global__[^;{]*?\\b(\\w+)\\s*\\(`` over repeated ``__global__``. Everything here
is one pass over the text: ``str.find`` jumps and regexes that match one token or one
character class at a time (no backtracking across the text), with parentheses paired once by
a stack. Comments are told from string and character literals, so ``"/*"`` in a string does
not hide the code after it from a forbid rule.

Problem-defined forbid patterns run on RE2 (google-re2), whose time is linear in the text
whatever the pattern: see ``LinearPattern``.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

import re2

# One token: an identifier or number, or any other single non-space character.
_TOKEN = re.compile(r"[A-Za-z_0-9]+|[^\sA-Za-z_0-9]")
_INTERESTING = re.compile(r"""[/"']""")
_STRING_END = {'"': re.compile(r'["\\\n]'), "'": re.compile(r"['\\\n]")}

CPU_RETURN_TYPES = frozenset({"void", "int", "float", "double"})

# Bounds on problem-defined patterns (docs/SECURITY.md, "Bounds").
MAX_PATTERN_LENGTH = 1_000
MAX_PATTERN_MEMORY = 8 << 20  # bytes RE2 may use for one compiled pattern
MAX_HITS_PER_PATTERN = 100


def _blank(segment: str) -> str:
    """Spaces for every character but line breaks, so offsets and line numbers stay right."""
    return "\n".join(" " * len(part) for part in segment.split("\n"))


def _mask(source: str, *, strings: bool) -> str:
    out: list[str] = []
    pos = 0
    n = len(source)
    while True:
        m = _INTERESTING.search(source, pos)
        if m is None:
            out.append(source[pos:])
            break
        i = m.start()
        c = source[i]
        if c == "/":
            nxt = source[i + 1 : i + 2]
            if nxt == "/":
                end = source.find("\n", i)
                end = n if end < 0 else end
            elif nxt == "*":
                end = source.find("*/", i + 2)
                end = n if end < 0 else end + 2
            else:
                out.append(source[pos : i + 1])
                pos = i + 1
                continue
            out.append(source[pos:i])
            out.append(_blank(source[i:end]))
            pos = end
            continue
        # A string or character literal: runs to its closing quote (escapes skipped) or the line's end.
        finder = _STRING_END[c]
        j = i + 1
        while True:
            e = finder.search(source, j)
            if e is None:
                j = n
                break
            ch = source[e.start()]
            if ch == "\\":
                j = e.start() + 2
                continue
            j = e.start() + (1 if ch == c else 0)
            break
        out.append(source[pos : i + 1])
        body_end = j - 1 if source[j - 1 : j] == c and j - 1 > i else j
        body = source[i + 1 : body_end]
        out.append(_blank(body) if strings else body)
        out.append(source[body_end:j])
        pos = j
    return "".join(out)


def strip_c_comments(source: str) -> str:
    """Blank out C/C++ comments, keeping line breaks so line numbers stay right. Linear time."""
    return _mask(source, strings=False)


def code_only(source: str) -> str:
    """Comments and the contents of string/character literals blanked (quotes kept). Linear time."""
    return _mask(source, strings=True)


@dataclass(frozen=True)
class _Tok:
    text: str
    start: int


def _tokens(code: str) -> list[_Tok]:
    return [_Tok(m.group(), m.start()) for m in _TOKEN.finditer(code)]


def _pair_parens(tokens: list[_Tok]) -> dict[int, int]:
    """Index of each '(' token -> index of its matching ')' (unmatched ones are absent)."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    for k, tok in enumerate(tokens):
        if tok.text == "(":
            stack.append(k)
        elif tok.text == ")" and stack:
            pairs[stack.pop()] = k
    return pairs


class _Lines:
    """Offset -> 1-based line number, by binary search over the line breaks."""

    def __init__(self, text: str) -> None:
        self._breaks: list[int] = []
        at = text.find("\n")
        while at >= 0:
            self._breaks.append(at)
            at = text.find("\n", at + 1)

    def of(self, offset: int) -> int:
        return bisect.bisect_left(self._breaks, offset) + 1


def _is_name(text: str) -> bool:
    return text[:1].isalpha() or text[:1] == "_"


def global_function_lines(source: str) -> dict[str, int]:
    """Line of each ``__global__`` function's name in the source, comments ignored. Linear time.

    The name is the identifier just before the first '(' after ``__global__`` (skipping
    ``__launch_bounds__(...)``), if no ';' or '{' comes first.
    """
    code = code_only(source)
    tokens = _tokens(code)
    pairs = _pair_parens(tokens)
    lines = _Lines(code)
    out: dict[str, int] = {}
    pending = False
    k = 0
    while k < len(tokens):
        text = tokens[k].text
        if text == "__global__":
            pending = True
        elif pending and text in (";", "{"):
            pending = False
        elif pending and text == "__launch_bounds__" and k + 1 < len(tokens) and tokens[k + 1].text == "(":
            close = pairs.get(k + 1)
            if close is None:
                break
            k = close
        elif pending and text == "(":
            pending = False
            if k > 0 and _is_name(tokens[k - 1].text):
                out.setdefault(tokens[k - 1].text, lines.of(tokens[k - 1].start))
        k += 1
    return out


def _first_on_line(code: str, tokens: list[_Tok]) -> list[bool]:
    """Whether each token is the first of its line (looking only at the gap before it: linear)."""
    first = []
    prev_end = 0
    for k, tok in enumerate(tokens):
        first.append(k == 0 or code.find("\n", prev_end, tok.start) >= 0)
        prev_end = tok.start + len(tok.text)
    return first


def c_function_definitions(source: str, return_types: frozenset[str] = CPU_RETURN_TYPES) -> list[str]:
    """Names of functions defined as ``[extern "C"] TYPE name(...) {``, the line starting there. Linear time."""
    code = code_only(source)
    tokens = _tokens(code)
    pairs = _pair_parens(tokens)
    first = _first_on_line(code, tokens)
    found: list[str] = []
    for k in range(2, len(tokens)):
        if tokens[k].text != "(" or not _is_name(tokens[k - 1].text) or tokens[k - 2].text not in return_types:
            continue
        t = k - 2  # the return type: first on its line, or after an extern "C" that is
        after_extern = t >= 3 and [x.text for x in tokens[t - 3 : t]] == ["extern", '"', '"'] and first[t - 3]
        if not (first[t] or after_extern):
            continue
        close = pairs.get(k)
        if close is not None and close + 1 < len(tokens) and tokens[close + 1].text == "{":
            found.append(tokens[k - 1].text)
    return found


class ForbidPatternError(re.error):
    """A forbid pattern RE2 cannot run (or too long); a ``re.error`` so callers report it alike."""


def _re2_options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False
    options.max_mem = MAX_PATTERN_MEMORY
    return options


class LinearPattern:
    """A problem-defined regular expression, run in time linear in the text (RE2).

    RE2 takes Python's syntax except backreferences and look-around, which are refused with a
    clear message. ``^`` and ``$`` match at line breaks (as with ``re.MULTILINE``); ``\\b``,
    ``\\w``, ``\\d`` and ``\\s`` are ASCII-only.
    """

    def __init__(self, pattern: str) -> None:
        if len(pattern) > MAX_PATTERN_LENGTH:
            raise ForbidPatternError(f"longer than {MAX_PATTERN_LENGTH} characters")
        self.pattern = pattern
        try:
            self._compiled = re2.compile(f"(?m){pattern}", _re2_options())
        except re2.error as exc:
            detail = exc.args[0] if exc.args else exc
            text = detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)
            raise ForbidPatternError(f"not supported by the linear-time matcher (RE2): {text}") from None

    def lines(self, text: str, limit: int = MAX_HITS_PER_PATTERN) -> list[int]:
        """1-based lines where the pattern matches (at most ``limit``, one per match)."""
        lines = _Lines(text)
        out: list[int] = []
        for m in self._compiled.finditer(text):
            out.append(lines.of(m.start()))
            if len(out) >= limit:
                break
        return out
