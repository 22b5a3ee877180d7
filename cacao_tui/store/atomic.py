"""Atomic JSON writes: temp file in the same directory, fsync, rename. A reader never sees half a file.

The file's data is fsynced before the rename, so a crash (SIGKILL, or power loss after the
rename reached the disk) leaves either the old or the new content, never a torn file. Only the
LLM call records are written without the fsync (``durable=False``): a record is the transcript
of a call, which no state of the run depends on, and four fsyncs an iteration were a fifth of
the engine's time per iteration on the H200's disk.

The temp file is created exclusively and never through a symbolic link (O_EXCL|O_NOFOLLOW),
and the rename replaces a link at the target rather than writing where it points, so no
write follows a link out of output/. A full disk (ENOSPC, EDQUOT) raises ``DiskFull`` and
latches: every later write of this process fails the same way at once, so the state on
disk stays exactly as it was before the first failed write (as after a SIGKILL), and
``--resume`` continues from there once there is space. Listeners (the launcher) hear of
the first one, to stop the run.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import to_json

from ktt.capped_read import MIB, describe_read_error, read_bytes_capped
from ktt.procs import pid_alive
from ktt.terminal_text import safe_line

M = TypeVar("M", bound=BaseModel)
_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})
_TMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# A state file read back (manifests, iteration states, master.json, call records): larger is not ours.
MAX_STATE_BYTES = 64 * MIB


class DiskFull(OSError):
    """No space left (or quota reached) while writing run state; ``str()`` is one line."""

    def __init__(self, path: Path, strerror: str | None) -> None:
        super().__init__(errno.ENOSPC, strerror or os.strerror(errno.ENOSPC), str(path))
        self.path = Path(path)

    def __str__(self) -> str:
        return f"{self.path}: {self.strerror}"


_disk_full: DiskFull | None = None
_listeners: list[Callable[[DiskFull], None]] = []


def on_disk_full(listener: Callable[[DiskFull], None]) -> None:
    """Call ``listener`` (from the writing thread) the first time a write finds the disk full."""
    _listeners.append(listener)


def disk_full() -> DiskFull | None:
    """The first disk-full failure of this process, if any."""
    return _disk_full


def reset_disk_full() -> None:
    """Forget the latch (tests; a process that freed space and means to write again)."""
    global _disk_full
    _disk_full = None


def _latch(path: Path, exc: OSError) -> DiskFull:
    global _disk_full
    full = DiskFull(path, exc.strerror)
    if _disk_full is None:
        _disk_full = full
        for listener in list(_listeners):
            with contextlib.suppress(Exception):
                listener(full)
    return full


def _create(tmp: Path) -> int:
    """The temp file, created exclusively; the directory and a stale temp are dealt with only
    when the first attempt finds them (the usual write costs one open, no mkdir or unlink)."""
    try:
        return os.open(tmp, _TMP_FLAGS, 0o644)
    except FileExistsError:
        os.unlink(tmp)  # a leftover of a crashed writer with this pid and thread (or a link)
    except FileNotFoundError:
        tmp.parent.mkdir(parents=True, exist_ok=True)
    return os.open(tmp, _TMP_FLAGS, 0o644)


def write_text_atomic(path: Path, text: str, *, durable: bool = True) -> None:
    """``text`` in ``path``, atomically. ``durable=False`` leaves out the fsync: a crash of the
    process still leaves the old file or the new one whole, but a power cut before the kernel's
    writeback can leave the new file empty (for a file whose loss costs nothing the run needs:
    an LLM call record, see llm/recording.py)."""
    if _disk_full is not None:
        raise DiskFull(path, _disk_full.strerror)
    # Each state file has one writer, so a temp name unique to this process and thread is enough
    # (and much cheaper than mkstemp's random names).
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        fd = _create(tmp)
        with open(fd, "w", encoding="utf-8") as f:
            f.write(text)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.errno in _FULL:
            raise _latch(path, exc) from None
        raise


# Temp files of a writer that was killed between create and rename: ours (``.NAME.PID.THREAD.tmp``)
# and ktt's (``tempfile.mkstemp`` with prefix ``.NAME.``: eight random characters after it).
_OUR_TEMP = re.compile(r"\A\..+\.(\d{1,9})\.\d+\.tmp\Z")
_KTT_TEMP = re.compile(r"\A\..+\.(?:json|jsonl)\.[a-z0-9_]{8}\Z")
MAX_CLEAN_WALK = 200_000


def remove_crash_leftovers(root: Path) -> int:
    """Remove temp files of killed writers under ``root`` (a resumed run's output/, under its lock);
    a temp file of a writer that still runs (the app writing branch_config.json) is left. Links
    are never followed. Returns how many were removed."""
    removed = seen = 0
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in files:
            seen += 1
            ours = _OUR_TEMP.match(name)
            stale = (ours is not None and not pid_alive(int(ours.group(1)))) or _KTT_TEMP.match(name) is not None
            if stale:
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(folder, name))
                    removed += 1
        if seen > MAX_CLEAN_WALK:
            break
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(folder, d))]
    return removed


def write_json_atomic(path: Path, data: Any, *, durable: bool = True) -> None:
    # pydantic's serialiser writes what json.dumps(indent=2, ensure_ascii=False) would (floats
    # may be spelled differently, 1e-05 as 0.00001), some ten times faster on a call record.
    write_text_atomic(path, to_json(data, indent=2).decode("utf-8") + "\n", durable=durable)


def write_model(path: Path, model: BaseModel) -> None:
    write_text_atomic(path, model.model_dump_json(indent=2) + "\n")


class StateFileError(Exception):
    """A state file that exists but cannot be read as its model."""

    def __init__(self, path: Path, message: str) -> None:
        self.path = path
        super().__init__(safe_line(f"{path}: {message}", 600))  # a name or key from the file, escaped


def read_state_text(path: Path, limit: int = MAX_STATE_BYTES) -> str:
    """A state file's text: a regular file, not a link, at most ``limit`` bytes, opened without
    blocking (a FIFO or a link to /dev/zero under output/ is a StateFileError, never a hang)."""
    try:
        return read_bytes_capped(path, limit, follow_links=False).decode("utf-8", errors="replace")
    except FileNotFoundError:
        raise StateFileError(path, "cannot read (No such file or directory)") from None
    except OSError as exc:
        raise StateFileError(path, f"cannot read ({describe_read_error(exc)})") from None


def parse_model(text: str, path: Path, model: type[M]) -> M:
    """``text`` (read from ``path``) as ``model``; a mismatch is a StateFileError naming the field."""
    try:
        return model.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise StateFileError(path, f"{where}: {first['msg']}") from None


def read_model(path: Path, model: type[M]) -> M:
    return parse_model(read_state_text(path), path, model)


def read_model_or_none(path: Path, model: type[M]) -> M | None:
    return read_model(path, model) if path.exists() or path.is_symlink() else None
