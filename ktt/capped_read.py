"""Reading files from a problem directory or a model's output: regular files only, size-capped.

A header linked to /dev/zero, a FIFO named like a reference, or a 2 GB "kernel" must end in one
line, not a hang or an out-of-memory kill. The file is opened without blocking (a FIFO with no
writer would otherwise block the open itself), checked with ``fstat`` on the open descriptor (so
a swap between check and read changes nothing), and read no further than its cap.
"""

from __future__ import annotations

import errno
import importlib.machinery
import importlib.util
import os
import stat
from pathlib import Path
from types import ModuleType

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


def read_bytes_capped(path: Path | str, limit: int, *, follow_links: bool = True) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; ReadRefused (an OSError) otherwise.

    With ``follow_links=False`` a symbolic link (the last part of the path) is refused too.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow_links:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_links:
            raise ReadRefused(path, "a symbolic link, not a regular file") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ReadRefused(path, f"{_describe(st.st_mode)}, not a regular file")
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


def read_text_capped(path: Path | str, limit: int, *, errors: str = "strict") -> str:
    """UTF-8 text of a regular file of at most ``limit`` bytes (UnicodeDecodeError when strict)."""
    return read_bytes_capped(path, limit).decode("utf-8", errors=errors)


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
