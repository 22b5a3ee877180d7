"""Landlock for the compiler: NVRTC reads only the files a compile is allowed to see.

The include scan (ktt.includes) refuses what it can see in the source before NVRTC runs;
this is the second wall, for what a scan cannot see (an include path built by macros, a
header swapped after the scan). Each compile runs in a fresh thread that restricts itself
with Landlock (Linux 5.13+, through raw syscalls: no library needed) to read-only access
to the CUDA/CCCL header directories and to the single header files the compile may
include, with no write, no execute and no TCP at all. Landlock restricts the calling
thread and what it starts later, so the process around it (the tuner, the compile pool
worker, ``ktt check``) keeps its own rights, and the thread ends with the compile.

Where the kernel has no Landlock (older than 5.13, or disabled at boot), compiles run
unrestricted and ``status()`` says so in one line; the include scan still applies.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import os
import platform
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

# x86_64 and aarch64 share the numbers of these (new) syscalls.
_SYS_CREATE_RULESET = 444
_SYS_ADD_RULE = 445
_SYS_RESTRICT_SELF = 446
_PR_SET_NO_NEW_PRIVS = 38
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

# landlock.h access rights, by the ABI version that introduced them.
_FS_EXECUTE = 1 << 0
_FS_WRITE_FILE = 1 << 1
_FS_READ_FILE = 1 << 2
_FS_READ_DIR = 1 << 3
_FS_ABI1 = (1 << 13) - 1  # execute .. make_sym
_FS_REFER = 1 << 13  # ABI 2
_FS_TRUNCATE = 1 << 14  # ABI 3
_FS_IOCTL_DEV = 1 << 15  # ABI 5
_NET_BIND_TCP = 1 << 0  # ABI 4
_NET_CONNECT_TCP = 1 << 1
_SCOPE_ABSTRACT_UNIX = 1 << 0  # ABI 6
_SCOPE_SIGNAL = 1 << 1

READ_DIR_RIGHTS = _FS_READ_FILE | _FS_READ_DIR
READ_FILE_RIGHTS = _FS_READ_FILE
_FS_REMOVE_FILE = 1 << 5
_FS_MAKE_REG = 1 << 8
WRITE_DIR_RIGHTS = READ_DIR_RIGHTS | _FS_WRITE_FILE | _FS_REMOVE_FILE | _FS_MAKE_REG


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]  # fmt: skip


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class SandboxError(OSError):
    """Landlock was available but the restriction could not be put in place."""


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


@functools.cache
def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 when there is none (or not Linux)."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "aarch64"):
        return 0
    if os.environ.get("KTT_NO_LANDLOCK"):  # for tests of the degraded path, and as an escape hatch
        return 0
    try:
        abi = _libc().syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(0, int(abi))


def status() -> str:
    """One line for the logs: what walls a compile of model-written code has here."""
    abi = landlock_abi()
    if abi:
        return (
            f"compile sandbox: Landlock ABI {abi}: NVRTC may read only the CUDA headers and the "
            "problem's and work directory's header files"
        )
    reason = "disabled by KTT_NO_LANDLOCK" if os.environ.get("KTT_NO_LANDLOCK") else "this kernel has no Landlock"
    return (
        f"compile sandbox: unavailable ({reason}); includes are checked by the source scan only, "
        "a macro-built include path is not stopped at the OS level"
    )


@dataclass(frozen=True)
class ReadOnlyView:
    """What a sandboxed compile may read: whole directory trees and single files.

    ``writable``: directories it may also create and replace files in (the precompiled
    header store, ktt.pch, for the one compile that writes a header there); usually none.
    """

    dirs: tuple[str, ...]
    files: tuple[str, ...]
    writable: tuple[str, ...] = ()


def _handled(abi: int) -> tuple[int, int, int]:
    fs = _FS_ABI1
    if abi >= 2:
        fs |= _FS_REFER
    if abi >= 3:
        fs |= _FS_TRUNCATE
    if abi >= 5:
        fs |= _FS_IOCTL_DEV
    net = (_NET_BIND_TCP | _NET_CONNECT_TCP) if abi >= 4 else 0
    scoped = (_SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL) if abi >= 6 else 0
    return fs, net, scoped


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise SandboxError(err, f"landlock {what}: {os.strerror(err)}")
    return result


def restrict_current_thread(view: ReadOnlyView) -> bool:
    """Restrict the calling thread (and threads or processes it starts) to reading ``view``.

    Returns False where Landlock is unavailable (nothing changed). Irreversible for the
    thread: call it only in a thread that exists for the restricted work.
    """
    abi = landlock_abi()
    if not abi:
        return False
    libc = _libc()
    fs, net, scoped = _handled(abi)
    attr = _RulesetAttr(fs, net, scoped)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else (16 if abi >= 4 else 8)
    ruleset = _check(libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0), "create")
    try:
        writable = WRITE_DIR_RIGHTS | (_FS_TRUNCATE if abi >= 3 else 0)
        for paths, rights in ((view.dirs, READ_DIR_RIGHTS), (view.files, READ_FILE_RIGHTS), (view.writable, writable)):
            for path in paths:
                try:
                    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                except OSError:
                    continue  # gone since it was listed: nothing to allow
                try:
                    rule = _PathBeneathAttr(rights, fd)
                    _check(libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0), "add rule")
                finally:
                    os.close(fd)
        _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        _check(libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0), "restrict_self")
    finally:
        os.close(ruleset)
    return True


class CompileTimeout(Exception):
    """The restricted work did not finish in time; its thread is left to end with the process."""


def run_restricted(fn: Callable[[], T], view: ReadOnlyView, timeout_s: float | None = None) -> T:
    """Run ``fn`` in a new thread restricted to ``view``; its result, or its exception re-raised.

    A call that outlives ``timeout_s`` raises CompileTimeout; its (daemon) thread cannot be
    killed and ends with the process (compile pool workers are killed at shutdown).
    """
    box: dict[str, object] = {}

    def target() -> None:
        try:
            restrict_current_thread(view)
            box["value"] = fn()
        except BaseException as exc:  # handed to the caller
            box["error"] = exc

    thread = threading.Thread(target=target, name="ktt-sandboxed-compile", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise CompileTimeout(f"did not finish within {timeout_s:g} s")
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]


def existing(paths: Iterable[str]) -> tuple[str, ...]:
    out = []
    for p in paths:
        with contextlib.suppress(OSError):
            if os.path.exists(p):
                out.append(p)
    return tuple(out)
