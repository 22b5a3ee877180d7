"""Precompiled headers for kernels that start with heavy includes (cub, thrust, libcu++).

Parsing ``<cub/block/block_reduce.cuh>`` is most of such a kernel's compile (about 1.9 of
2.0 s with NVRTC 13); with a precompiled header it is about 0.4 s. NVRTC reuses a
precompiled header only when the command line is the same, and every configuration has
its own ``-D`` values, so a kernel is compiled as

    <its leading #include lines, verbatim>
    #pragma nv_hdrstop
    #define PARAM value        (each tuning parameter, instead of -DPARAM=value)
    #line <first line of the rest>
    <the rest of the kernel>

(the problem's scalars keep one value for the run and stay -D), which is the same program
as long as no header above the stop can read a moved define (tests compare cubins): that is
checked (ktt.macro_use: the names must not appear in the problem's header texts, in any
file under the CUDA header directories, nor look reserved), and otherwise the kernel is
compiled the ordinary way. Only a prefix of ``#include`` lines (and blank lines, ``//``
comments, ``#pragma once``) with at least one ``<...>`` include qualifies.

Where the files live, and who may write them. NVRTC accepts a precompiled header only in
the process instance that made it (its heap must sit at the same address), so NVRTC's PCH
heap is reserved in the compile pool's forkserver before any worker forks
(ktt.nvrtc_heap), and the headers are shared by the pool's workers and live as long as the
pool: in a fresh private directory (mode 0700, made by the pool, removed at its shutdown;
checked to be ours and not writable by others before every use). A header is loaded into
NVRTC's memory as is, so nobody else may be able to write it. It is written by the first
compile that needs it (the others compile the ordinary way meanwhile: nobody waits), under
an exclusive lock, into a temporary file renamed into place, from inside the same Landlock
sandbox as any compile (ktt.sandbox), which may write only that directory. Its name hashes
everything that decides it: the NVRTC version, the arch, the options, the include lines, the
text of the problem's headers and the define names. The directory is kept under
``KTT_PCH_MAX_BYTES`` (default 4 GiB; one cub header makes a 345 MB file) by removing the
least recently made files. A compile against a header that fails in a way that may be the
header's (a catastrophic or PCH error) is compiled again the ordinary way.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass

from ktt.macro_use import names_read
from ktt.toolkit import cuda_include_dirs, nvrtc_version

PCH_FORMAT = 1
DEFAULT_MAX_BYTES = 4 * 1024**3
HEAP_BYTES = 1024**3  # NVRTC's PCH heap, reserved once before the pool's workers fork (one cub header: 343 MB)
HDRSTOP = "#pragma nv_hdrstop"
STALE_TMP_S = 3600.0


@dataclass(frozen=True)
class Split:
    prefix: str  # the leading include lines, each ending in a newline
    body: str
    body_line: int  # 1-based line of the source where ``body`` starts


def _include_operand(rest: str) -> str | None:
    """'<' or '"' when ``rest`` (after 'include') is one literal header name and nothing else but a comment."""
    rest = rest.strip()
    if not rest or rest[0] not in '<"':
        return None
    close = ">" if rest[0] == "<" else '"'
    end = rest.find(close, 1)
    if end <= 1:
        return None
    tail = rest[end + 1 :].strip()
    if tail and not tail.startswith("//"):
        return None
    return rest[0]


def split_prefix(source: str) -> Split | None:
    """The leading run of include lines, when it holds at least one ``<...>`` include; else None."""
    lines = source.split("\n")
    angle = False
    count = 0
    for line in lines:
        s = line.strip()
        if line.endswith("\\") or "/*" in s or "??" in s:  # splices, block comments, trigraphs: stop
            break
        if not s or s.startswith("//"):
            count += 1
            continue
        if not s.startswith("#"):
            break
        directive = s[1:].lstrip()
        if directive.startswith("include") and not directive.startswith("include_next"):
            kind = _include_operand(directive[len("include") :])
            if kind is None:
                break
            angle = angle or kind == "<"
        elif directive.split() != ["pragma", "once"]:
            break
        count += 1
    # Trailing blank or comment lines go to the body (they change nothing) - keep the prefix tight.
    while count and not lines[count - 1].strip().startswith("#"):
        count -= 1
    body = "\n".join(lines[count:])
    if not angle or count == 0 or not body.strip():
        return None
    return Split("".join(ln + "\n" for ln in lines[:count]), body, count + 1)


def transformed(split: Split, defines: tuple[tuple[str, str], ...]) -> str:
    """The kernel with its defines moved below the header stop (line numbers of the rest kept)."""
    defs = "".join(f"#define {k} {v}\n" for k, v in defines)
    return f"{split.prefix}{HDRSTOP}\n{defs}#line {split.body_line}\n{split.body}"


def private_dir(path: str) -> bool:
    """Make ``path`` (mode 0700) if missing; True when it is a real directory of ours that only we can write."""
    with contextlib.suppress(FileExistsError, OSError):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.mkdir(path, 0o700)
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not (st.st_mode & 0o077)


def _safe_values(defines: tuple[tuple[str, str], ...]) -> bool:
    return all("\n" not in v and "\r" not in v and not v.endswith("\\") for _, v in defines)


@dataclass
class Plan:
    """How one compile uses the store: ``create`` the file at ``tmp`` (holding ``lock_fd``), or use ``path``."""

    source: str
    path: str
    heap: int
    create: bool = False
    tmp: str = ""
    lock_fd: int | None = None
    prefix: str = ""


def key_of(arch: str, options: list[bytes], split: Split, header_texts: tuple, names: list[str]) -> str:
    h = hashlib.sha256()
    opts = json.dumps([o.decode(errors="replace") for o in options])
    head = (f"pch={PCH_FORMAT}", f"nvrtc={nvrtc_version()}", f"arch={arch}", json.dumps(sorted(names)), opts)
    for part in (*head, split.prefix, json.dumps(header_texts)):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()[:40]


def plan(
    source: str,
    defines: tuple[tuple[str, str], ...],
    header_texts: tuple[tuple[str, str], ...],
    arch: str,
    options: list[bytes],
    store: str | None,
) -> Plan | None:
    """A plan when this compile may use (or make) a precompiled header; None: compile the ordinary way."""
    if not store:
        return None
    split = split_prefix(source)
    if split is None or not _safe_values(defines):
        return None
    names = [k for k, _ in defines]
    directives = "".join(ln for ln in split.prefix.splitlines(keepends=True) if ln.lstrip().startswith("#"))
    read = names_read(names, [directives, *(t for _, t in header_texts)], cuda_include_dirs())
    if read is None or read:
        return None  # a header above the stop could read a define: keep -D
    if not private_dir(store) or not private_dir(os.path.join(store, "tmp")):
        return None
    key = key_of(arch, options, split, header_texts, names)
    path = os.path.join(store, f"{key}.pch")
    meta = _read_meta(path)
    text = transformed(split, defines)
    if meta.get("ok") and os.path.isfile(path):
        return Plan(text, path, HEAP_BYTES)
    if meta.get("failed"):
        return None  # NVRTC could not make it (too big for the heap): the ordinary way for this run
    try:
        fd = os.open(os.path.join(store, f"{key}.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None  # another compile is making it: compile the ordinary way meanwhile
    meta = _read_meta(path)
    if meta.get("ok") and os.path.isfile(path):
        os.close(fd)
        return Plan(text, path, HEAP_BYTES)
    if meta.get("failed"):
        os.close(fd)
        return None
    tmp = os.path.join(store, f".tmp-{os.getpid()}-{key}.pch")
    return Plan(text, path, HEAP_BYTES, create=True, tmp=tmp, lock_fd=fd, prefix=split.prefix)


def header_only(p: Plan) -> str:
    """What a creating compile compiles: the include lines and the stop, nothing of the kernel."""
    return f"{p.prefix}{HDRSTOP}\n"


def use_plan(p: Plan) -> Plan:
    return Plan(p.source, p.path, p.heap)


def scratch(p: Plan) -> str:
    """The directory NVRTC's front end writes its temporary file to while it makes or reads a header."""
    return os.path.join(os.path.dirname(p.path), "tmp")


@contextlib.contextmanager
def temp_dir(p: Plan) -> Iterator[None]:
    """TMPDIR in the store's scratch directory (the sandbox lets the compile write only there)."""
    old = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = scratch(p)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = old


def suspicious(log: str) -> bool:
    """A failure that may be the precompiled header's (not the kernel's): retried without it."""
    low = log.lower()
    return "catastrophic" in low or "precompiled" in low or "pch" in low


def _meta_path(path: str) -> str:
    return path[: -len(".pch")] + ".json"


def _read_meta(path: str) -> dict:
    try:
        with open(_meta_path(path), encoding="utf-8") as f:
            value = json.load(f)
        return value if isinstance(value, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_meta(path: str, meta: dict) -> None:
    tmp = f"{_meta_path(path)}.tmp-{os.getpid()}"
    with contextlib.suppress(OSError):
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(meta, f)
        os.replace(tmp, _meta_path(path))


def finish(p: Plan, created: bool, heap_required: int | None) -> bool:
    """After a creating compile: move the file into place (or record why not), release the lock."""
    ok = False
    try:
        if created and os.path.isfile(p.tmp):
            os.replace(p.tmp, p.path)
            _write_meta(p.path, {"ok": True, "created": time.time()})
            ok = True
        else:
            with contextlib.suppress(OSError):
                os.unlink(p.tmp)
            _write_meta(p.path, {"ok": False, "failed": True, "heap_needed": heap_required})
    finally:
        if p.lock_fd is not None:
            os.close(p.lock_fd)
    if ok:
        prune(os.path.dirname(p.path))
    return ok


def max_bytes() -> int:
    with contextlib.suppress(ValueError):
        value = int(os.environ.get("KTT_PCH_MAX_BYTES", ""))
        if value >= 0:
            return value
    return DEFAULT_MAX_BYTES


def prune(store: str, limit: int | None = None) -> None:
    """Remove the least recently used precompiled headers until the store fits ``limit`` bytes."""
    limit = max_bytes() if limit is None else limit
    files = []
    now = time.time()
    with contextlib.suppress(OSError):
        for e in os.scandir(store):
            if not e.name.endswith(".pch") or not e.is_file(follow_symlinks=False):
                continue
            st = e.stat(follow_symlinks=False)
            if e.name.startswith(".tmp-"):
                if now - st.st_mtime > STALE_TMP_S:  # left by a creator that was killed
                    with contextlib.suppress(OSError):
                        os.unlink(e.path)
                continue
            files.append((max(st.st_atime, st.st_mtime), st.st_size, e.path))
    total = sum(size for _, size, _ in files)
    for _, size, path in sorted(files):
        if total <= limit:
            break
        with contextlib.suppress(OSError):
            os.unlink(path)
            os.unlink(_meta_path(path))
        total -= size
