"""What a compile may include, and a scan that refuses the rest before NVRTC runs.

A kernel is model-written, and a problem directory is untrusted, so ``#include
"/proc/self/environ"`` or ``#include "../../.env"`` must never reach the compiler: its
error messages would carry the file's text to the model, to the LLM records and to the
compile cache. A compile sees three things only:

- the CUDA/CCCL header directories (``ktt.toolkit.cuda_include_dirs``), whole;
- header files (``HEADER_SUFFIXES``) directly in the other include directories (the work
  directory's shape directory with the generated inputs.hpp, the problem directory, the
  kernel's own directory) or one directory level below, when they are regular files whose
  real path stays inside that directory (a header linked to /dev/zero or out of the
  problem is not one);
- nothing else: no absolute path, no ``..``, no /proc, /dev or /sys, no dotfile, no .env.

The scan reads the source once, left to right (no backtracking regex: a 400 KB kernel
costs milliseconds), and finds every directive the preprocessor could see: after line
splicing, ``#`` or the digraph ``%:`` first on its line (block comments allowed around
it), then ``include``, ``include_next``, ``import`` or ``embed``, and every
``__has_include``/``__has_embed``. Each operand must be a quoted or bracketed name; a
macro operand is refused (the preprocessor could build any path from it). Quoted
names are resolved the way the compiler searches (the including file's directory, then
the include path), and headers that resolve to allowed files are scanned in turn.
``ktt.sandbox`` enforces the same view at the OS level where the kernel has Landlock.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from ktt.sandbox import ReadOnlyView

HEADER_SUFFIXES = (".h", ".hh", ".hpp", ".hxx", ".cuh", ".inc", ".inl", ".ipp")
MAX_HEADER_BYTES = 4 * 1024 * 1024  # a header larger than this is not offered to the compiler
MAX_HEADERS_PER_DIR = 500
_SKIP_DIRS = frozenset({"output", "archive", "inputs", "__pycache__", "work", "tune", "llm"})

_DIRECTIVES = frozenset({"include", "include_next", "import", "embed"})
_HASH = re.compile(r"#|%:")
_HAS = re.compile(r"__has_(?:include_next|include|embed)\b")
_HWS = re.compile(r"[ \t\f\v\r]*")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CLOSE = re.compile(r"\*/")
_SPLICE = re.compile(r"\\\r?\n")  # NVRTC splices only a backslash right before the line break
_MAX_NAME = 4096


class IncludeRefused(Exception):
    """One include that is not allowed; ``line`` is in the file that names it."""

    def __init__(self, file: str, line: int, message: str) -> None:
        super().__init__(message)
        self.file = file
        self.line = line
        self.message = message


@dataclass(frozen=True)
class IncludeView:
    """The files a compile may read: trusted directory trees and single allowed header files."""

    trusted_dirs: tuple[str, ...]  # real paths (CUDA/CCCL headers)
    search_dirs: tuple[str, ...]  # the include path as given, for resolving names
    files: frozenset[str]  # real paths of allowed header files

    def sandbox_view(self) -> ReadOnlyView:
        return ReadOnlyView(self.trusted_dirs, tuple(sorted(self.files)))

    def allows(self, real: str) -> bool:
        if real in self.files:
            return True
        return any(real.startswith(d + os.sep) for d in self.trusted_dirs)


def _is_header_name(name: str) -> bool:
    return not name.startswith(".") and name.endswith(HEADER_SUFFIXES)


def header_files(directory: str | Path, depth: int = 2) -> list[tuple[str, str]]:
    """(path as listed, real path) of the header files in ``directory`` and one level below.

    Only regular files whose real path stays inside the directory's real path; links out
    (to /dev/zero, /etc, another problem) and special files are left out, unread.
    """
    root = os.path.realpath(directory)
    out: list[tuple[str, str]] = []

    def walk(d: str, listed: str, level: int) -> None:
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError:
            return
        for e in entries:
            if len(out) >= MAX_HEADERS_PER_DIR:
                return
            if e.name.startswith("."):
                continue
            path = os.path.join(listed, e.name)
            try:
                if e.is_dir(follow_symlinks=False):
                    if level + 1 < depth and e.name not in _SKIP_DIRS:
                        walk(e.path, path, level + 1)
                    continue
            except OSError:
                continue
            if not _is_header_name(e.name):
                continue
            real = os.path.realpath(e.path)
            if not real.startswith(root + os.sep):
                continue
            try:
                st = os.stat(real)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and st.st_size <= MAX_HEADER_BYTES:
                out.append((path, real))

    walk(root, str(directory), 0)
    return out


def header_texts(directory: str | Path, skip: tuple[str, ...] = ("inputs.hpp",)) -> list[tuple[str, str]]:
    """(name relative to ``directory``, text) of its header files, for the compile cache key."""
    out = []
    for listed, real in header_files(directory):
        name = os.path.relpath(listed, directory)
        if name in skip:
            continue
        text = read_header(real)
        if text is not None:
            out.append((name, text))
    return out


def read_header(path: str) -> str | None:
    """The text of a regular file of bounded size, opened without blocking; None otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_HEADER_BYTES:
            return None
        data = os.read(fd, MAX_HEADER_BYTES + 1)
        if len(data) > MAX_HEADER_BYTES:
            return None
        return data.decode("utf-8", errors="replace")
    except OSError:
        return None
    finally:
        os.close(fd)


@functools.lru_cache(maxsize=64)
def include_view(program_dir: str, include_dirs: tuple[str, ...], trusted: tuple[str, ...]) -> IncludeView:
    """The view of one compile context (memoised: every configuration of a run shares it)."""
    trusted_real = tuple(dict.fromkeys(os.path.realpath(d) for d in trusted if os.path.isdir(d)))
    files: set[str] = set()
    for d in dict.fromkeys((program_dir, *include_dirs)):
        if d in trusted or os.path.realpath(d) in trusted_real:
            continue
        files.update(real for _, real in header_files(d))
    return IncludeView(trusted_real, tuple(include_dirs), frozenset(files))


# -- the scan ---------------------------------------------------------------------------


class _Text:
    """A source after line splicing, with what the scan needs to stay linear."""

    def __init__(self, source: str) -> None:
        self.splices: list[int] = []  # positions (in the spliced text) where a splice was removed
        parts = []
        last = 0
        removed = 0
        for m in _SPLICE.finditer(source):
            parts.append(source[last : m.start()])
            removed_before = m.start() - removed
            self.splices.append(removed_before)
            removed += m.end() - m.start()
            last = m.end()
        parts.append(source[last:])
        self.text = "".join(parts)
        self.closes = [m.start() for m in _CLOSE.finditer(self.text)]
        self._landing: dict[int, int] = {}
        self._line_starts: list[int] | None = None

    def line(self, pos: int) -> int:
        if self._line_starts is None:
            self._line_starts = [0] + [m.end() for m in re.finditer("\n", self.text)]
        spliced = bisect.bisect_right(self.splices, pos)
        return bisect.bisect_right(self._line_starts, pos) + spliced

    def skip(self, pos: int) -> int:
        """Past horizontal white space and block comments (each comment jumped once: linear)."""
        text = self.text
        seen: list[int] = []
        while True:
            pos = _HWS.match(text, pos).end()  # type: ignore[union-attr]
            if not text.startswith("/*", pos):
                break
            k = bisect.bisect_left(self.closes, pos + 2)
            land = self.closes[k] + 2 if k < len(self.closes) else len(text)
            if land in self._landing:
                pos = self._landing[land]
                break
            seen.append(land)
            pos = land
        for land in seen:
            self._landing[land] = pos
        return pos

    def first_on_line(self, pos: int) -> bool:
        """Nothing but white space (or the end of a block comment) before ``pos`` on its line."""
        text = self.text
        i = pos - 1
        while i >= 0 and text[i] in " \t\f\v\r":
            i -= 1
        return i < 0 or text[i] in "\n/"


def _operand(t: _Text, pos: int) -> tuple[str, str] | None:
    """('"' or '<', name) at ``pos``, or None when the operand is not a literal name."""
    text = t.text
    if pos >= len(text) or text[pos] not in '"<':
        return None
    close = '"' if text[pos] == '"' else ">"
    limit = min(len(text), pos + 1 + _MAX_NAME)  # a bounded window keeps the scan linear
    newline = text.find("\n", pos + 1, limit)
    end = text.find(close, pos + 1, newline if newline >= 0 else limit)
    if end < 0:
        return None
    return text[pos], text[pos + 1 : end]


def find_includes(source: str) -> list[tuple[int, str, str | None, str]]:
    """Every include the preprocessor could act on: (line, directive, kind or None, name).

    ``kind`` is '"' or '<'; None means the operand is not a literal name (a macro).
    """
    t = _Text(source)
    text = t.text
    found: list[tuple[int, str, str | None, str]] = []
    for m in _HASH.finditer(text):
        if not t.first_on_line(m.start()):
            continue
        j = t.skip(m.end())
        word = _IDENT.match(text, j)
        if word is None or word.group() not in _DIRECTIVES:
            continue
        k = t.skip(word.end())
        op = _operand(t, k)
        line = t.line(m.start())
        if op is None:
            found.append((line, "#" + word.group(), None, text[k : k + 40].split("\n", 1)[0].strip()))
        else:
            found.append((line, "#" + word.group(), op[0], op[1]))
    for m in _HAS.finditer(text):
        j = t.skip(m.end())
        if not text.startswith("(", j):
            continue
        k = t.skip(j + 1)
        op = _operand(t, k)
        line = t.line(m.start())
        if op is None:
            found.append((line, m.group(), None, text[k : k + 40].split("\n", 1)[0].strip()))
        else:
            found.append((line, m.group(), op[0], op[1]))
    found.sort()
    return found


def _bad_name(name: str) -> str | None:
    if not name:
        return "an empty file name"
    if any(ord(c) < 32 or c == "\x7f" for c in name):
        return "a control character in the file name"
    if name.startswith("/"):
        return "an absolute path"
    if name.startswith("~"):
        return "a path outside the include directories"
    parts = name.replace("\\", "/").split("/")
    if ".." in parts:
        return "'..' in the path"
    if any(p.startswith(".") and p not in (".", "") for p in parts):
        return "a hidden file"
    return None


ALLOWED = "a kernel may include only header files in the problem directory, the work directory and the CUDA headers"


def _why(path: str, real: str) -> str:
    if real != os.path.abspath(path):
        return "is a link leading out of its directory"
    if not os.path.isfile(real):
        return "is not a regular file"
    if not _is_header_name(os.path.basename(real)):
        return "is not a header file"
    return "is outside the include directories"


def _resolve(name: str, kind: str, including_dir: str, view: IncludeView) -> str | None:
    """The path the compiler would open for ``name``, or None when no candidate exists."""
    dirs = ([including_dir] if kind == '"' else []) + list(view.search_dirs)
    for d in dirs:
        candidate = os.path.join(d, name)
        if os.path.lexists(candidate):
            return candidate
    return None


def check_includes(source: str, display_name: str, program_dir: str, view: IncludeView) -> None:
    """Raise IncludeRefused for the first include outside ``view`` (transitively through local headers)."""
    pending: list[tuple[str, str, str]] = [(source, display_name, program_dir)]
    scanned: set[str] = set()
    while pending:
        text, shown, base = pending.pop()
        for line, directive, kind, name in find_includes(text):
            if kind is None:
                raise IncludeRefused(
                    shown,
                    line,
                    f"{directive} with a macro operand ({name or 'nothing'}) is not allowed: "
                    'name the header in quotes or angle brackets, e.g. #include "inputs.hpp"',
                )
            bad = _bad_name(name)
            if bad:
                raise IncludeRefused(shown, line, f'{directive} "{name}": {bad}; {ALLOWED}')
            path = _resolve(name, kind, base, view)
            if path is None:
                continue  # a header built into NVRTC, or one it will report as not found
            real = os.path.realpath(path)
            if not view.allows(real):
                raise IncludeRefused(shown, line, f'{directive} "{name}": {_why(path, real)}; {ALLOWED}')
            if real in scanned or any(real.startswith(d + os.sep) for d in view.trusted_dirs):
                continue
            scanned.add(real)
            body = read_header(real)
            if body is not None:
                pending.append((body, os.path.basename(real), os.path.dirname(path)))


_memo: dict[tuple[str, str, str, IncludeView], IncludeRefused | None] = {}


def refused_include(source: str, display_name: str, program_dir: str, view: IncludeView) -> IncludeRefused | None:
    """check_includes as a value, memoised per source text and view (a run compiles one source many times)."""
    key = (hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest(), display_name, program_dir, view)
    if key in _memo:
        return _memo[key]
    try:
        check_includes(source, display_name, program_dir, view)
        result = None
    except IncludeRefused as exc:
        result = exc
    if len(_memo) > 256:
        _memo.clear()
    _memo[key] = result
    return result
