"""The walls around an imported module: memory, file size, what it may read and write, no new processes.

``cacao import`` runs a KernelBench module's top-level code, ``get_init_inputs()``,
``Model(...)``, ``get_inputs()`` and ``forward`` to learn the boundary: untrusted code, in a
child process that the parent starts with a time limit, the allow-listed environment and its
own process group (``ktt.procs``, as ``ref.py``'s import). Inside that child, before the module
is loaded, ``enter`` puts up the rest, each through the kernel, so nothing the module does in
Python can take it down again:

- memory: ``RLIMIT_AS`` (an allocation past it is a MemoryError, not the machine's memory);
- files: ``RLIMIT_FSIZE`` (no file it writes grows past the limit), no core dump;
- reads and writes: Landlock (``ktt.sandbox``): read-only access to Python's own directories
  (the interpreter, the standard library, site-packages: torch, numpy), the module file and the
  few system files torch reads; write access to the child's output folder only; no TCP. Your
  home directory, ``.env`` files, keys and other processes' ``/proc`` entries are out of reach;
- processes: a seccomp filter refuses ``fork``, ``vfork``, ``clone`` without ``CLONE_THREAD``
  and ``execve``: threads (torch's) are allowed, a new process or program is not, so nothing
  outlives the child and its group.

Where the kernel lacks Landlock or seccomp (not Linux, an old kernel), ``enter`` says so in its
report and the other walls still hold (the parent's time limit and group kill, the environment).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import resource
import site
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ktt import sandbox

# System files torch and numpy read on import and first use (CPU count, memory, libraries).
SYSTEM_READ_FILES = ("/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/etc/ld.so.cache", "/dev/null", "/dev/urandom")
SYSTEM_READ_DIRS = ("/sys/devices/system/cpu", "/sys/fs/cgroup", "/usr/lib", "/lib", "/lib64", "/usr/lib64")

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_EPERM, _ENOSYS = 1, 38
_CLONE_THREAD = 0x00010000
_X32_BIT = 0x40000000

# (audit arch, fork, vfork, clone, clone3, execve, execveat); -1: no such call on that machine
_SYSCALLS = {
    "x86_64": (0xC000003E, 57, 58, 56, 435, 59, 322),
    "aarch64": (0xC00000B7, -1, -1, 220, 435, 221, 281),
}


@dataclass
class Walls:
    """What ``enter`` put up, for the report (a wall that could not be raised is named, with why)."""

    memory_bytes: int = 0
    landlock: bool = False
    seccomp: bool = False
    notes: list[str] = field(default_factory=list)


def _set_limit(kind: int, value: int) -> None:
    _, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(kind, (value, hard))


def _package_root() -> Path:
    """The folder holding cacao_tui (a checkout's root, where a .env may live): never readable."""
    return Path(__file__).resolve().parents[2]


def read_view(module_file: Path, out_dir: Path) -> sandbox.ReadOnlyView:
    """Python's own directories, the module file, a few system files; the output folder writable.

    Import-path entries count as Python's own, except the home directory, the checkout cacao runs
    from (its modules are loaded before the walls go up) and any folder above either of them."""
    shut = [Path.home().resolve(), _package_root()]
    dirs: list[str] = []
    for p in [sys.prefix, sys.base_prefix, sys.exec_prefix, *site.getsitepackages(), *sys.path]:
        if not (p and os.path.isabs(p) and os.path.isdir(p)):
            continue
        real = Path(p).resolve()
        if any(real == s or real in s.parents for s in shut):
            continue
        dirs.append(str(real))
    dirs += [os.path.realpath(d) for d in SYSTEM_READ_DIRS]
    files = [str(module_file), *SYSTEM_READ_FILES, f"/proc/{os.getpid()}"]
    return sandbox.ReadOnlyView(
        dirs=sandbox.existing(dict.fromkeys(dirs)),
        files=sandbox.existing(files),
        writable=(str(out_dir),),
    )


def _seccomp_program(machine: str) -> bytes | None:
    numbers = _SYSCALLS.get(machine)
    if numbers is None:
        return None
    arch, fork, vfork, clone, clone3, execve, execveat = numbers
    ld_w_abs, jeq_k, jset_k, jge_k, ret_k = 0x20, 0x15, 0x45, 0x35, 0x06

    def op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
        return struct.pack("HBBI", code, jt, jf, k & 0xFFFFFFFF)

    denied = [n for n in (fork, vfork, execve, execveat) if n >= 0]
    # (instruction, k, where to go when true, when false): None goes on to the next instruction.
    items: list[tuple[str, int, str | None, str | None]] = [
        ("ld", 4, None, None),  # seccomp_data.arch
        ("jeq", arch, None, "allow"),  # another ABI: not ours to judge
        ("ld", 0, None, None),  # seccomp_data.nr
        ("jge", _X32_BIT, "eperm", None),  # x32 numbers on x86_64
        *[("jeq", n, "eperm", None) for n in denied],
        ("jeq", clone3, "enosys", None),  # glibc then falls back to clone, tested below
        ("jeq", clone, None, "allow"),
        ("ld", 16, None, None),  # clone's flags (args[0], low word)
        ("jset", _CLONE_THREAD, "allow", "eperm"),
    ]
    targets = {"allow": len(items), "eperm": len(items) + 1, "enosys": len(items) + 2}
    codes = {"ld": ld_w_abs, "jeq": jeq_k, "jset": jset_k, "jge": jge_k}
    prog = [
        op(codes[kind], k, targets[t] - i - 1 if t else 0, targets[f] - i - 1 if f else 0)
        for i, (kind, k, t, f) in enumerate(items)
    ]
    prog += [op(ret_k, _RET_ALLOW), op(ret_k, _RET_ERRNO | _EPERM), op(ret_k, _RET_ERRNO | _ENOSYS)]
    return b"".join(prog)


def forbid_new_processes() -> str | None:
    """Install the seccomp filter (no fork, no exec, threads allowed); None, or why it could not be."""
    if platform.system() != "Linux":
        return "no seccomp (not Linux)"
    program = _seccomp_program(platform.machine())
    if program is None:
        return f"no seccomp filter for {platform.machine()}"

    class _Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return f"no_new_privs: {os.strerror(ctypes.get_errno())}"
    fprog = _Fprog(len(program) // 8, program)
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        return f"seccomp: {os.strerror(ctypes.get_errno())}"
    return None


def enter(module_file: Path, out_dir: Path, memory_bytes: int) -> Walls:
    """Put every wall up in this process (call it once, before the module is loaded)."""
    walls = Walls(memory_bytes=memory_bytes)
    _set_limit(resource.RLIMIT_AS, memory_bytes)
    _set_limit(resource.RLIMIT_FSIZE, memory_bytes)
    with contextlib.suppress(ValueError, OSError):
        _set_limit(resource.RLIMIT_CORE, 0)
    try:
        walls.landlock = sandbox.restrict_current_thread(read_view(module_file, out_dir))
        if not walls.landlock:
            walls.notes.append("Landlock unavailable: file reads are not restricted")
    except OSError as exc:
        walls.notes.append(f"Landlock not applied: {exc}")
    why = forbid_new_processes()
    walls.seccomp = why is None
    if why:
        walls.notes.append(why)
    return walls
