"""Child processes: each in its own process group, killed as a group, always awaited, never orphaned.

The tuner starts a GPU worker, a host-reference runner and ncu. Any of them can hang
(a kernel in an infinite loop, a reference that never returns), so every child gets its
own session, and stopping it means TERM to the whole group, a grace period, then KILL,
and a ``wait`` so no zombie is left. Pipes are drained by threads while the child runs,
because compiler and profiler output can be long enough to fill a pipe and block. And
every child ends with its parent (``exit_when_parent_dies``, ``die_with_this_thread``): a
tuner, a reference or ncu left running after its caller was killed would hold the GPU.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

PARENT_ENV = "KTT_PARENT_PID"  # set by a spawner whose spawning thread outlives the child

# What a child's environment may hold (docs/SECURITY.md lists it). Everything else is
# dropped, .env keys and API keys included: a child runs model-written or problem code
# (a kernel's compiler, a reference, a tuner), and what it cannot see it cannot leak.
ENV_NAMES = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM",
        "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONHOME", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE",
        "VIRTUAL_ENV", "CC", "CXX", "NCU", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR",
    }
)  # fmt: skip
ENV_PREFIXES = ("LC_", "CUDA_", "NVIDIA_", "KTT_", "OMP_", "MKL_", "OPENBLAS_")
_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSW", "CREDENTIAL", "AUTH", "COOKIE", "PRIVATE")


def env_name_allowed(name: str) -> bool:
    upper = name.upper()
    if any(word in upper for word in _SECRET_WORDS):
        return False
    return name in ENV_NAMES or name.startswith(ENV_PREFIXES)


def child_env(base: Mapping[str, str] | None = None, **extra: str) -> dict[str, str]:
    """The allow-listed part of ``base`` (default: this process's environment), plus ``extra``."""
    source = os.environ if base is None else base
    env = {k: v for k, v in source.items() if env_name_allowed(k)}
    env.update({k: v for k, v in extra.items() if env_name_allowed(k)})
    return env


_PR_SET_PDEATHSIG = 1
try:  # resolved here, before any fork: a child between fork and exec only makes the call
    _PRCTL: Callable[..., int] | None = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # pragma: no cover - not Linux
    _PRCTL = None


def arm_parent_death_signal() -> None:
    """Have the kernel SIGKILL this process when the thread that forked it exits."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)


def pid_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def exit_when_parent_dies(poll_s: float = 0.5, *, only_when_asked: bool = False) -> None:
    """Make this process end with the process that started it (call it first in a child program).

    Two mechanisms, because neither covers every case alone. PR_SET_PDEATHSIG has the kernel
    SIGKILL us when the parent dies, but it fires when the parent *thread* that forked us
    exits, so it is set only when the spawner says (through ``KTT_PARENT_PID``, our parent's
    pid) that its spawning thread lives as long as we do: the engine's event loop, or a
    thread that waits for us (``run``). The tuner restarts its GPU worker from a thread that
    ends before the run does, so the worker relies on the second: a thread that polls the
    parent pid (and the pid in ``KTT_PARENT_PID``, which reaches through ncu to the runner
    it launches) and exits once either is gone. ``only_when_asked``: do nothing unless a
    spawner set ``KTT_PARENT_PID`` (the ``python -m ktt`` command line, which a person may
    start under nohup).
    """
    parent = os.getppid()
    watched: int | None = None
    with contextlib.suppress(ValueError):
        watched = int(os.environ.get(PARENT_ENV, ""))
    if only_when_asked and watched is None:
        return  # started by a person (a shell, nohup): it may outlive its shell
    if watched is not None and watched == parent:
        arm_parent_death_signal()
        if os.getppid() != parent:  # it died before the signal was armed
            os._exit(1)
    elif watched is not None and not pid_alive(watched):
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(poll_s)
            if os.getppid() != parent or (watched is not None and watched != parent and not pid_alive(watched)):
                os._exit(1)

    threading.Thread(target=watch, daemon=True, name="parent-watch").start()


def spawn(
    cmd: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    stdin: int | None = subprocess.DEVNULL,
    text: bool = True,
    die_with_this_thread: bool = False,
) -> subprocess.Popen:
    """Start ``cmd`` in a new session (its own process group), with stdout and stderr piped.

    The child's environment is ``env`` (default: ours) reduced to the allow-list (``child_env``).

    ``die_with_this_thread``: the calling thread waits for the child (``run``), so the kernel
    may kill the child when it exits (PR_SET_PDEATHSIG, armed between fork and exec: the
    only way for a program that is not ours, like ncu or the C compiler), and Python
    children learn our pid through ``KTT_PARENT_PID``.
    """
    env = child_env(env)
    preexec = None
    if die_with_this_thread:
        env[PARENT_ENV] = str(os.getpid())
        if _PRCTL is not None:
            preexec = arm_parent_death_signal
    return subprocess.Popen(
        list(cmd),
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
        text=text,
        bufsize=1 if text else -1,
        start_new_session=True,
        preexec_fn=preexec,  # one prctl call, resolved before the fork
    )


def kill_group(proc: subprocess.Popen, grace_s: float = 2.0) -> int | None:
    """TERM the child's process group, wait ``grace_s``, then KILL it; always reap the child.

    The child was started with ``start_new_session``, so its group id is its pid; the
    group is signalled even when the leader already exited, to reach what it left behind.
    """
    pgid = proc.pid
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    try:
        return proc.wait(timeout=30)
    except subprocess.TimeoutExpired:  # pragma: no cover - a process that survives SIGKILL
        return None


@dataclass
class PipeReader:
    """Drains one pipe in a thread; keeps the last ``keep`` lines and forwards each to ``sink``."""

    stream: object
    keep: int = 400
    sink: Callable[[str], None] | None = None
    lines: deque[str] = field(default_factory=deque)
    thread: threading.Thread | None = None

    def start(self) -> PipeReader:
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def _run(self) -> None:
        for line in iter(self.stream.readline, ""):  # type: ignore[attr-defined]
            line = line.rstrip("\n")
            self.lines.append(line)
            while len(self.lines) > self.keep:
                self.lines.popleft()
            if self.sink is not None:
                with contextlib.suppress(Exception):
                    self.sink(line)

    def join(self, timeout: float = 5.0) -> None:
        if self.thread is not None:
            self.thread.join(timeout)

    def text(self) -> str:
        return "\n".join(self.lines)


@dataclass
class Completed:
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    seconds: float


def run(
    cmd: Sequence[str],
    *,
    timeout_s: float,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    keep_lines: int = 100_000,
) -> Completed:
    """Run ``cmd`` to completion (or kill its group at ``timeout_s``), reading both pipes as it runs."""
    start = time.monotonic()
    proc = spawn(cmd, env=env, cwd=cwd, die_with_this_thread=True)
    out = PipeReader(proc.stdout, keep=keep_lines).start()
    err = PipeReader(proc.stderr, keep=keep_lines).start()
    timed_out = False
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        code = kill_group(proc)
        out.join()
        err.join()
    return Completed(code, out.text(), err.text(), timed_out, time.monotonic() - start)
