"""The files a job carries to a node, and back: bounded, regular files only, no secrets.

A problem directory travels without its run state and without hidden entries (``.env``
keys, ``.trash``, ``.git``): ``output/``, ``archive/`` and anything starting with a dot
stay on the head. Links and special files are skipped (a link could point at any host
file), every file is read through a size cap, and the whole bundle has a cap, so a
problem directory can neither stall a node nor ship the head's secrets.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_BUNDLE_BYTES = 256 * 1024 * 1024
MAX_FILES = 4000
SKIP_TOP = frozenset({"output", "archive", "__pycache__"})


class BundleError(Exception):
    """A file that cannot travel (too large, too many): one line naming it."""


@dataclass
class Bundle:
    """Relative POSIX path -> content."""

    files: dict[str, bytes] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return sum(len(b) for b in self.files.values())

    def add(self, rel: str, data: bytes) -> None:
        if len(self.files) >= MAX_FILES:
            raise BundleError(f"{rel}: more than {MAX_FILES} files to send to a node")
        if self.size + len(data) > MAX_BUNDLE_BYTES:
            raise BundleError(f"{rel}: the files for a node would pass {MAX_BUNDLE_BYTES // 2**20} MiB")
        self.files[rel] = data


def read_capped(path: Path, limit: int | None = None) -> bytes:
    """A regular file's bytes (never a link, FIFO or device), at most ``limit`` (default MAX_FILE_BYTES)."""
    limit = MAX_FILE_BYTES if limit is None else limit
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise BundleError(f"{path}: not a regular file")
        if info.st_size > limit:
            raise BundleError(f"{path}: {info.st_size} bytes, over the {limit // 2**20} MiB a node is sent")
        chunks = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > limit:
            raise BundleError(f"{path}: grew past the {limit // 2**20} MiB a node is sent")
        return data
    finally:
        os.close(fd)


def problem_bundle(directory: Path) -> Bundle:
    """What a node needs of a problem: its files, without run state, hidden entries or links."""
    bundle = Bundle()
    root = directory.resolve()
    for current, dirs, names in os.walk(root, followlinks=False):
        here = Path(current)
        rel_dir = here.relative_to(root)
        keep = []
        for d in sorted(dirs):
            if d.startswith(".") or (rel_dir == Path(".") and d in SKIP_TOP) or (here / d).is_symlink():
                continue
            keep.append(d)
        dirs[:] = keep
        for name in sorted(names):
            if name.startswith("."):
                continue
            path = here / name
            info = os.lstat(path)
            if not stat.S_ISREG(info.st_mode):
                continue  # links, FIFOs, sockets stay behind
            bundle.add((rel_dir / name).as_posix(), read_capped(path))
    return bundle


def safe_relative(rel: str) -> PurePosixPath:
    """A bundle path that stays inside the directory it is unpacked into."""
    path = PurePosixPath(rel)
    if path.is_absolute() or not path.parts or any(p in ("", ".", "..") for p in path.parts):
        raise BundleError(f"{rel!r}: not a plain relative path")
    return path


def unpack(files: dict[str, bytes], target: Path) -> None:
    """Write a bundle under ``target`` (which must not hold links: it is a fresh temp dir)."""
    for rel, data in files.items():
        path = target.joinpath(*safe_relative(rel).parts)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)


def collect(directory: Path, *, skip: frozenset[str] = frozenset(), skip_dirs: frozenset[str] = frozenset()) -> Bundle:
    """Every regular file under ``directory`` (a job's output on the node), bounded like a problem."""
    bundle = Bundle()
    if not directory.is_dir():
        return bundle
    for current, dirs, names in os.walk(directory, followlinks=False):
        here = Path(current)
        rel_dir = here.relative_to(directory)
        dirs[:] = sorted(d for d in dirs if not (rel_dir == Path(".") and d in skip_dirs))
        for name in sorted(names):
            rel = (rel_dir / name).as_posix()
            if rel in skip:
                continue
            path = here / name
            if not stat.S_ISREG(os.lstat(path).st_mode):
                continue
            bundle.add(rel, read_capped(path))
    return bundle
