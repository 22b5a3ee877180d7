"""Reading files from a problem directory or a model's output: regular files only, size-capped.

A header linked to /dev/zero, a FIFO named like a reference, or a 2 GB "kernel" must end in one
line, not a hang or an out-of-memory kill. This is the one reader of such files, ktt's and
cacao_tui's alike: whole files under a cap (``read_bytes_capped``), the head or the tail of one
of any size (a kernel shown, a log), the lines of a JSON-lines log up to a budget, and
``parse_json`` for what they hold. The file is opened without blocking (a FIFO with no
writer would otherwise block the open itself), checked with ``fstat`` on the open descriptor (so
a swap between check and read changes nothing), and read no further than its cap.
"""

from __future__ import annotations

import errno
import importlib.machinery
import importlib.util
import json
import math
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

KIB = 1024
MIB = 1024 * KIB

# The caps in force (docs/SECURITY.md, "Bounds", lists them).
MAX_YAML_BYTES = 1 * MIB  # problem.yaml, inputs.yaml, tuning.yaml
MAX_SOURCE_BYTES = 4 * MIB  # a reference, a header of the problem directory
# A kernel to compile (``ktt check``, ``ktt tune``, ``ktt profile``) and what the model may write
# as kernels.cu. NVRTC's own time grows with the source: 616 KB of plain kernels kept one
# compile busy for minutes, so a kernel is refused above this, before any compile.
MAX_KERNEL_BYTES = 256 * KIB
MAX_SPEC_BYTES = 64 * KIB  # what the model may write as tuning.yaml (ktt reads any YAML up to MAX_YAML_BYTES)


class ReadRefused(OSError):
    """A file that is not read: not a regular file, or larger than its cap. ``str()`` is one line."""

    def __init__(self, path: Path | str, reason: str) -> None:
        super().__init__(errno.EINVAL, reason, str(path))
        self.reason = reason

    def __str__(self) -> str:
        return self.reason


def _describe(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def run_root(path: Path | str) -> Path | None:
    """The run directory ``path`` lies in: the outermost ancestor named ``output`` beside a
    ``problem.yaml``, or ``archive/output_N`` of such a problem directory; None outside one.

    Everything below it was written by a run, or by whoever else can write there: a reader that
    follows no link follows none between this directory and the file either. The outermost one
    counts, so a ``problem.yaml`` planted inside output/ cannot move it down past a link.
    """
    found = None
    for folder in Path(os.path.abspath(path)).parents:
        problem = None
        if folder.name == "output":
            problem = folder.parent
        elif folder.name.startswith("output_") and folder.parent.name == "archive":
            problem = folder.parent.parent
        if problem is not None and os.path.isfile(problem / "problem.yaml"):
            found = folder
    return found


def _open_beneath(root: Path, path: Path | str, flags: int) -> int:
    """``path`` opened from ``root`` one directory at a time, each opened without following a
    link (``root``'s own last part included); ReadRefused names the link on the way."""
    parts = Path(os.path.relpath(os.path.abspath(path), root)).parts
    if not parts or parts[0] == os.pardir:
        raise ReadRefused(path, "not inside its run directory")
    dir_flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    walked = root
    try:
        fd = os.open(root, dir_flags)
    except OSError as exc:
        _refuse_link(path, root, exc)
    try:
        for part in parts[:-1]:
            walked = walked / part
            try:
                inner = os.open(part, dir_flags, dir_fd=fd)
            except OSError as exc:
                _refuse_link(path, walked, exc)
            os.close(fd)
            fd = inner
        try:
            return os.open(parts[-1], flags | os.O_NOFOLLOW, dir_fd=fd)
        except OSError as exc:
            _refuse_link(path, walked / parts[-1], exc)
    finally:
        os.close(fd)


def _refuse_link(path: Path | str, part: Path, exc: OSError) -> NoReturn:
    """ReadRefused when ``part`` is a link; else ``exc`` again, naming the whole path."""
    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK) and os.path.islink(part):
        last = Path(part) == Path(os.path.abspath(path))
        what = "a symbolic link" if last else f"under a symbolic link ({part.name})"
        raise ReadRefused(path, f"{what}, not a regular file of its run") from None
    raise type(exc)(exc.errno, exc.strerror, str(path)) from None


def open_regular(path: Path | str, *, follow_links: bool = True) -> tuple[int, os.stat_result]:
    """A read-only descriptor of a regular file and its ``fstat``; ReadRefused (an OSError) otherwise.

    Opened without blocking (a FIFO with no writer would block the open itself, ignoring
    signals), checked on the open descriptor (a swap after the check changes nothing). With
    ``follow_links=False`` a symbolic link (the last part of the path) is refused too, and so is
    one at any directory between the file and the run directory it lies in (``run_root``:
    ``output/branches/b1 -> elsewhere`` is never read through). The caller closes the descriptor.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    root = None if follow_links else run_root(path)
    if not follow_links:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = _open_beneath(root, path, flags) if root is not None else os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_links:
            raise ReadRefused(path, "a symbolic link, not a regular file") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ReadRefused(path, f"{_describe(st.st_mode)}, not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_bytes_capped(path: Path | str, limit: int, *, follow_links: bool = True) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; ReadRefused (an OSError) otherwise.

    With ``follow_links=False`` a symbolic link (the last part of the path) is refused too.
    """
    fd, st = open_regular(path, follow_links=follow_links)
    try:
        if st.st_size > limit:
            raise ReadRefused(path, f"{st.st_size:,} bytes, larger than the limit of {limit:,}")
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(1 * MIB, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:  # grew since fstat
                raise ReadRefused(path, f"more than {limit:,} bytes (the limit)")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_head(path: Path | str, limit: int, *, follow_links: bool = False) -> tuple[bytes, bool]:
    """The first ``limit`` bytes of a regular file of any size, and whether there was more."""
    fd, _ = open_regular(path, follow_links=follow_links)
    try:
        data = os.pread(fd, limit + 1, 0)
    finally:
        os.close(fd)
    return data[:limit], len(data) > limit


def read_tail(path: Path | str, limit: int, *, follow_links: bool = False) -> tuple[bytes, os.stat_result]:
    """The last ``limit`` bytes of a regular file of any size (a log), and its ``fstat``."""
    fd, st = open_regular(path, follow_links=follow_links)
    try:
        start = max(0, st.st_size - limit)
        return os.pread(fd, limit, start), st
    finally:
        os.close(fd)


def iter_lines_capped(path: Path | str, limit: int, *, follow_links: bool = False) -> Iterator[bytes]:
    """The lines of a regular file (a JSON-lines log), stopping after ``limit`` bytes in all.

    The file is opened at once (a FIFO or a link is ReadRefused before the first line); a line
    longer than what is left of the budget ends the iteration.
    """
    fd, _ = open_regular(path, follow_links=follow_links)
    f = os.fdopen(fd, "rb")
    return _lines(f, limit)


def _lines(f: Any, limit: int) -> Iterator[bytes]:
    with f:
        left = limit
        while left > 0:
            line = f.readline(left)
            if not line:
                return
            left -= len(line)
            if not line.endswith(b"\n") and left <= 0:
                return  # cut at the budget: not a whole line
            yield line


def finite_number(value: object) -> float | None:
    """A JSON number from an untrusted file as a finite float; None for anything else (a bool, a
    string, a 400-digit integer that no float holds, NaN)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


# JSON from a file or a model: the bounds every number and every nesting level must keep.
MAX_JSON_DEPTH = 100  # arrays and objects inside each other (the YAML reader's bound too)
MAX_NUMBER_CHARS = 40  # a number literal: 64-bit integers and every float fit, 10^400 does not


class JSONBoundsError(ValueError):
    """JSON that parses but breaks a bound (a number no float holds, nesting too deep); one line."""


def _bounded_int(strict: bool) -> Any:
    def parse(text: str) -> int | None:
        if len(text) > MAX_NUMBER_CHARS:
            if strict:
                raise JSONBoundsError(f"a number of {len(text):,} digits (at most {MAX_NUMBER_CHARS})")
            return None
        return int(text)

    return parse


def _bounded_float(strict: bool) -> Any:
    def parse(text: str) -> float | None:
        number = float(text) if len(text) <= MAX_NUMBER_CHARS else math.inf
        if not math.isfinite(number):
            if strict:
                raise JSONBoundsError(f"a number no float holds ({text[:20]}{'...' if len(text) > 20 else ''})")
            return None
        return number

    return parse


def _no_constant(strict: bool) -> Any:
    def parse(name: str) -> None:
        if strict:
            raise JSONBoundsError(f"{name} is not a JSON number")
        return None

    return parse


def json_decoder(*, strict: bool = False) -> json.JSONDecoder:
    """A decoder whose numbers stay within bounds: NaN, Infinity, 1e400 and integers of more than
    ``MAX_NUMBER_CHARS`` characters are null (``strict``: a JSONBoundsError)."""
    return json.JSONDecoder(
        parse_int=_bounded_int(strict), parse_float=_bounded_float(strict), parse_constant=_no_constant(strict)
    )


def json_depth_error(value: Any, limit: int = MAX_JSON_DEPTH) -> str | None:
    """Why ``value`` is nested too deeply (counted without recursion), or None."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return f"nested more than {limit} levels deep"
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return None


def check_json_value(value: Any, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``value`` (already parsed, e.g. by an SDK) within the bounds ``parse_json`` keeps, else
    JSONBoundsError: no deeper than ``max_depth``, every number finite and of at most
    ``MAX_NUMBER_CHARS`` characters."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, bool) or item is None or isinstance(item, str):
            continue
        if isinstance(item, int):
            if item.bit_length() > 128:
                raise JSONBoundsError(f"a number of about {int(item.bit_length() * 0.30103):,} digits "
                                      f"(at most {MAX_NUMBER_CHARS})")  # fmt: skip
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                raise JSONBoundsError(f"a number no float holds ({item})")
            continue
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list | tuple) else ()
        if depth > max_depth:
            raise JSONBoundsError(f"nested more than {max_depth} levels deep")
        stack.extend((child, depth + 1) for child in children)
    return value


def parse_json(data: str | bytes, *, strict: bool = False, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads`` for untrusted text (a file, a lock note, a model's reply), within bounds.

    Nesting deeper than ``max_depth`` is a JSONBoundsError (a ValueError), never a RecursionError;
    a number no float holds (NaN, Infinity, 1e400, a 400-digit integer) reads as null, so a field
    that needs a number has none (``strict``: a JSONBoundsError saying which number).
    """
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        value = json_decoder(strict=strict).decode(text)
    except RecursionError:
        raise JSONBoundsError(f"nested more than {max_depth} levels deep") from None
    why = json_depth_error(value, max_depth)
    if why is not None:
        raise JSONBoundsError(why)
    return value


def read_text_capped(path: Path | str, limit: int, *, errors: str = "strict", follow_links: bool = True) -> str:
    """UTF-8 text of a regular file of at most ``limit`` bytes (UnicodeDecodeError when strict)."""
    return read_bytes_capped(path, limit, follow_links=follow_links).decode("utf-8", errors=errors)


def describe_read_error(exc: OSError | UnicodeDecodeError) -> str:
    """One line for a failed read, without the path (the caller names the file)."""
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text ({exc.reason} at byte {exc.start})"
    if isinstance(exc, ReadRefused):
        return exc.reason
    if isinstance(exc, FileNotFoundError):
        return "file not found"
    return f"cannot read: {exc.strerror or exc}"


class CappedSourceLoader(importlib.machinery.SourceFileLoader):
    """Python's source loader, reading the module's own file through ``read_bytes_capped``.

    ``importlib`` would open ref.py with a plain ``open``: a FIFO blocks it, /dev/zero fills
    memory. Anything else it reads (a cached .pyc) goes the usual way.
    """

    def get_data(self, path: str) -> bytes:
        if os.path.abspath(path) == os.path.abspath(self.path):
            return read_bytes_capped(path, MAX_SOURCE_BYTES)
        return super().get_data(path)


def module_from_file(name: str, path: Path | str) -> ModuleType:
    """A module object for ``path`` whose source is read capped; ``exec_module`` is the caller's."""
    loader = CappedSourceLoader(name, str(path))
    spec = importlib.util.spec_from_file_location(name, str(path), loader=loader)
    if spec is None:  # pragma: no cover - only for names importlib rejects
        raise ReadRefused(path, "cannot be loaded as a Python module")
    return importlib.util.module_from_spec(spec)
