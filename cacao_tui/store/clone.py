"""``--clone NAME``: copy a problem's definition to a sibling directory, without its runs.

Everything in the problem directory is copied (problem.yaml, inputs.yaml, the reference,
inputs/, example/, notes) except ``output/``, ``archive/``, the run lock and Python caches. The copy is
made in a hidden staging directory and renamed into place, so a failure leaves nothing
half-written, and an existing target is never touched.

A problem directory is untrusted, so the copy is bounded: links are copied as links, never
followed; a FIFO, device or socket is refused; the data to copy (the blocks files really hold,
so a sparse file counts for its data, not its size) must stay under ``MAX_CLONE_BYTES`` and the
free space of the file system, and at most ``MAX_CLONE_ENTRIES`` entries; holes are kept as
holes (``SEEK_DATA``/``SEEK_HOLE``), so a 1 TB sparse file costs its data, not a terabyte.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from cacao_tui.problem.names import directory_name_error
from ktt.capped_read import MAX_YAML_BYTES, read_text_capped
from ktt.terminal_text import safe_line

NOT_COPIED = ("output", "archive", "output.lock", "__pycache__", "*.pyc")
GENERATED = ("inputs.hpp",)  # at the top: what cacao writes from inputs.yaml (the clone's own is written at its run)
_NAME_LINE = re.compile(r"^name:[ \t]*(?P<value>[^\n#>|]*?)[ \t]*(?P<comment>#[^\n]*)?$", re.MULTILINE)


class CloneError(Exception):
    """A clone that cannot be made; the message is one line for the user."""


@dataclass(frozen=True)
class ClonedProblem:
    source: Path
    target: Path
    files: int
    renamed: bool  # problem.yaml's top-level name: was changed to the new name


def _rename_in_problem_yaml(path: Path, name: str) -> bool:
    """Point a top-level ``name:`` line at the clone, keeping the rest of the file (and its comments)."""
    text = read_text_capped(path, MAX_YAML_BYTES)  # a regular file within the YAML cap (ReadRefused otherwise)
    m = _NAME_LINE.search(text)
    if m is None or not m.group("value"):
        return False  # no name: the loader uses the directory name, which is already right
    comment = f"  {m.group('comment')}" if m.group("comment") else ""
    value = name if yaml.safe_load(name) == name else f"'{name}'"  # "2024" or "true" must stay text
    path.unlink()  # a link copied as a link: the clone gets its own file, the link's target is untouched
    path.write_text(text[: m.start()] + f"name: {value}{comment}" + text[m.end() :], encoding="utf-8")
    return True


MAX_CLONE_BYTES = 64 * 1024**3  # data in a problem directory's files (its inputs/ included)
MAX_CLONE_ENTRIES = 100_000


@dataclass
class _Plan:
    dirs: list[Path]
    files: list[Path]  # regular files
    links: list[Path]
    data_bytes: int


def _plan(source: Path) -> _Plan:
    """What to copy, checked before anything is: entries, their kinds, the data they hold."""
    plan = _Plan([], [], [], 0)
    stack = [source]
    while stack:
        folder = stack.pop()
        for entry in sorted(os.scandir(folder), key=lambda e: e.name):
            if any(fnmatch.fnmatch(entry.name, pattern) for pattern in NOT_COPIED):
                continue
            if folder == source and entry.name in GENERATED:
                continue
            path = Path(entry.path)
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                plan.links.append(path)
            elif stat.S_ISDIR(st.st_mode):
                plan.dirs.append(path)
                stack.append(path)
            elif stat.S_ISREG(st.st_mode):
                plan.files.append(path)
                plan.data_bytes += min(st.st_size, st.st_blocks * 512)  # a sparse file: its data only
            else:
                raise CloneError(f"{safe_line(path)}: is not a regular file, a directory or a link "
                                 "(a FIFO, a device, a socket); move it out to clone (nothing was copied)")  # fmt: skip
            if len(plan.dirs) + len(plan.files) + len(plan.links) > MAX_CLONE_ENTRIES:
                raise CloneError(f"{safe_line(source)}: more than {MAX_CLONE_ENTRIES:,} entries to copy; "
                                 "not a problem directory to clone (nothing was copied)")  # fmt: skip
            if plan.data_bytes > MAX_CLONE_BYTES:
                raise CloneError(f"{safe_line(source)}: its files hold more than {MAX_CLONE_BYTES // 1024**3} GiB "
                                 "of data; clone it by hand (nothing was copied)")  # fmt: skip
    return plan


def _data_ranges(fd: int, size: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each region of a file that holds data; all of it where the file system cannot say."""
    offset = 0
    while offset < size:
        try:
            start = os.lseek(fd, offset, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno != errno.ENXIO:  # no SEEK_DATA on this file system: copy the rest whole
                yield offset, size
            return  # ENXIO: only a hole is left
        end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
        yield start, end
        offset = end


def _copy_sparse(src: Path, dst: Path) -> None:
    """Copy a regular file keeping its holes; never through a link, never blocking on a FIFO."""
    fd_in = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd_in)
        if not stat.S_ISREG(st.st_mode):
            raise CloneError(f"{safe_line(src)}: is no longer a regular file (nothing was copied)")
        fd_out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            for start, end in _data_ranges(fd_in, st.st_size):
                while start < end:
                    chunk = os.pread(fd_in, min(1 << 20, end - start), start)
                    if not chunk:
                        break
                    os.pwrite(fd_out, chunk, start)
                    start += len(chunk)
            os.ftruncate(fd_out, st.st_size)
        finally:
            os.close(fd_out)
        _copystat_writable(src, dst)
    finally:
        os.close(fd_in)


def _copystat_writable(src: Path, dst: Path) -> None:
    """The source's times and modes, but writable by its owner: a clone is a copy to edit, even of a
    read-only problem (a shipped one, a colleague's)."""
    shutil.copystat(src, dst, follow_symlinks=False)
    mode = stat.S_IMODE(os.lstat(dst).st_mode)
    os.chmod(dst, mode | (stat.S_IRWXU if dst.is_dir() else stat.S_IRUSR | stat.S_IWUSR))


def clone_problem(source: Path, name: str) -> ClonedProblem:
    """Copy the problem at ``source`` to ``source.parent / name``."""
    source = Path(source).expanduser().resolve()
    why = directory_name_error(name)
    if why:
        raise CloneError(f"--clone: {why}")
    if not (source / "problem.yaml").is_file():
        raise CloneError(f"{source}: not a problem directory (no problem.yaml)")
    target = source.parent / name
    if target.exists() or target.is_symlink():
        raise CloneError(f"{target}: already exists; choose another name (nothing was copied)")
    plan = _plan(source)
    free = shutil.disk_usage(source.parent).free
    if plan.data_bytes > free:
        raise CloneError(
            f"{target.parent}: {free:,} bytes free, the clone needs {plan.data_bytes:,} (nothing was copied)"
        )
    staging = Path(tempfile.mkdtemp(prefix=f".{name}.clone-", dir=source.parent))
    try:
        _copystat_writable(source, staging)
        for d in plan.dirs:
            (staging / d.relative_to(source)).mkdir(parents=True, exist_ok=True)
        for link in plan.links:  # copied as links, never followed: a header linked to /dev/zero stays a link
            os.symlink(os.readlink(link), staging / link.relative_to(source))
        for f in plan.files:
            _copy_sparse(f, staging / f.relative_to(source))
        for d in reversed(plan.dirs):
            _copystat_writable(d, staging / d.relative_to(source))
        renamed = _rename_in_problem_yaml(staging / "problem.yaml", name)
        files = len(plan.files) + len(plan.links)
        if target.exists():
            raise CloneError(f"{target}: already exists; choose another name (nothing was copied)")
        os.rename(staging, target)
    except BaseException:
        with contextlib.suppress(OSError):
            shutil.rmtree(staging)
        raise
    return ClonedProblem(source, target, files, renamed)
