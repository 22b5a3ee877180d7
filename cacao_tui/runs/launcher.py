"""Start a run as a process of its own, so that it outlives the app and the SSH session.

The run is ``python -m cacao_tui --dir X --no-ui ...`` in a new session
(``start_new_session``: no controlling terminal, so a dropped SSH connection sends it no
SIGHUP and quitting the app leaves it running), stdin from /dev/null, stdout and stderr
appended to ``output/launch.log``. A fresh run's earlier ``output/`` is archived here,
under the run lock, before the log is opened, and the child runs with ``--no-clean`` into
the empty ``output/``: so the log lies beside the run it belongs to and moves to
``archive/`` with it. The flags go through the same parser as the command line, so a
mistake is the same one line, before anything is archived or started.
"""

from __future__ import annotations

import datetime as dt
import errno
import os
import shlex
import stat
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from cacao_tui.store.archive import ArchiveError, prepare_output
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.run_lock import RunLocked, acquire_run_lock, held_here
from ktt.capped_read import read_tail
from ktt.terminal_text import safe_line, safe_text

LAUNCH_LOG = "launch.log"
LAUNCH_HEADER = "== "  # the line the app writes into the launch log before the run's own output


class LaunchRefused(Exception):
    """The run cannot start; ``str()`` is the one line to show."""


@dataclass
class RunOptions:
    """What the run dialog asks; None leaves a setting at the command line's default."""

    provider: str | None = None
    model: str | None = None
    strategies: int | None = None
    max_iter: int | None = None
    max_depth: int | None = None
    path_budget: int | None = None
    timeout_s: float | None = None
    gpus: list[int] = field(default_factory=list)
    budget_usd: float | None = None
    dry_run: bool = False
    single_shot: bool = False
    resume: bool = False
    phase: str | None = None  # llm | gpu: the next part of a split run (--phase; only with resume)

    def flags(self) -> list[str]:
        """The command-line flags (everything but --dir, --no-ui and --no-clean)."""
        out: list[str] = []
        pairs: list[tuple[str, object]] = [
            ("--provider", self.provider),
            ("--model", self.model),
            ("--strategies", self.strategies),
            ("--max-iter", self.max_iter),
            ("--max-depth", self.max_depth),
            ("--path-budget", self.path_budget),
            ("--timeout", self.timeout_s),
            ("--gpus", ",".join(map(str, self.gpus)) if self.gpus else None),
            ("--budget-usd", self.budget_usd),
        ]
        for flag, value in pairs:
            if value is not None:
                out += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
        for flag, on in (("--dry-run", self.dry_run), ("--single-shot", self.single_shot), ("--resume", self.resume)):
            if on:
                out.append(flag)
        if self.phase is not None:
            out += ["--phase", self.phase]
        # Unticked on a resume: on the GPU, even a dry run's rest (a split run's phase is never dry).
        if self.resume and not self.dry_run and self.phase is None:
            out.append("--no-dry-run")
        return out


@dataclass
class Started:
    pid: int
    log: Path
    argv: list[str]
    process: subprocess.Popen[bytes]

    def exit_code(self) -> int | None:
        """The child's exit status once it has ended (and is reaped), else None."""
        return self.process.poll()


def run_argv(problem_dir: Path, options: RunOptions) -> list[str]:
    """The child's command line; a fresh run writes into the output/ archived just before."""
    argv = ["--dir", str(problem_dir), "--no-ui", *options.flags()]
    if not options.resume:
        argv.append("--no-clean")
    return argv


def validate(problem_dir: Path, options: RunOptions) -> None:
    """The command line's checks of the flags and the problem, without running anything."""
    from cacao_tui.llm.errors import LLMError
    from cacao_tui.llm.selection import select_provider
    from cacao_tui.problem import ProblemError, load_problem
    from cacao_tui.run_options import UsageError, parse_args
    from cacao_tui.runs.providers import run_environment

    try:
        args = parse_args(["--dir", str(problem_dir), *options.flags()])
        problem = load_problem(problem_dir)
        if options.phase == "gpu":  # the GPU phase makes no LLM call: no provider to check
            return _check_gpu(options, options.gpus or list(problem.gpu_indices))
        choice = select_provider(args.provider, args.model, env=run_environment(problem_dir))
    except UsageError as exc:
        raise LaunchRefused(str(exc)) from None
    except ProblemError as exc:
        raise LaunchRefused(exc.line()) from None
    except LLMError as exc:  # the dialog's word for the flag: its Provider field
        raise LaunchRefused(str(exc).replace("--provider ", "Provider ", 1)) from None
    session = problem_dir / "session.jsonl"
    if choice.provider == "replay" and not session.is_file():
        raise LaunchRefused(f"{session}: no recorded session to replay (the replay provider reads it)")
    if options.phase != "llm":  # the model's phase of a split run needs no GPU
        _check_gpu(options, options.gpus or list(problem.gpu_indices))


def _check_gpu(options: RunOptions, wanted: list[int]) -> None:
    if not options.dry_run:  # before anything is archived: a run without its GPU would only die at once
        from cacao_tui.engine.gpu import detect_gpus, gpu_problem

        trouble = gpu_problem(wanted, detect_gpus())
        if trouble is not None:
            hint = {"none": "; tick Dry run to check the problem, the provider and the session without one",
                    "missing": "; set GPUs (or gpu.index in problem.yaml)"}.get(trouble.kind, "")  # fmt: skip
            raise LaunchRefused(trouble.line + hint)


def _prepare(problem_dir: Path, resume: bool) -> None:
    """Archive an earlier run (fresh) or check nobody holds the directory (resume)."""
    layout = RunLayout(problem_dir)
    try:
        if resume:
            if not layout.context.exists() and not layout.master.exists():
                raise LaunchRefused(f"{layout.output}: nothing to resume (no earlier run here)")
            acquire_run_lock(problem_dir, command="cacao (the app, checking before --resume)")
        else:
            prepare_output(problem_dir, resume=False, no_clean=False)
    except (RunLocked, ArchiveError) as exc:
        raise LaunchRefused(str(exc)) from None
    finally:
        lock = held_here(problem_dir)
        if lock is not None:
            lock.release()  # the child takes it a moment later


def _open_log(layout: RunLayout) -> int:
    """output/launch.log for appending: a regular file, never through a link, opened without blocking
    (a FIFO there blocked the open, and with it the app, for good: round 3's r11)."""
    layout.output.mkdir(parents=True, exist_ok=True)
    path = layout.output / LAUNCH_LOG
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        why = "a FIFO" if exc.errno == errno.ENXIO else exc.strerror  # a FIFO nobody reads
        raise LaunchRefused(safe_line(f"{path}: cannot open the run's log ({why}); remove it")) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise LaunchRefused(safe_line(f"{path}: is not a regular file (a FIFO, a device or a socket); remove it"))
    os.set_blocking(fd, True)
    return fd


def start_detached(problem_dir: Path, options: RunOptions, *, python: str = sys.executable) -> Started:
    """Validate, prepare output/, then start the run in a session of its own."""
    problem_dir = problem_dir.resolve()
    validate(problem_dir, options)
    _prepare(problem_dir, options.resume)
    layout = RunLayout(problem_dir)
    argv = run_argv(problem_dir, options)
    fd = _open_log(layout)
    try:
        stamp = dt.datetime.now().astimezone().isoformat(timespec="seconds")
        os.write(fd, f"{LAUNCH_HEADER}{stamp} started from the app: cacao {shlex.join(argv)}\n".encode())
        env = dict(os.environ)
        env.pop("KTT_PARENT_PID", None)  # nothing should die with the app
        # The child imports cacao_tui from where this process did (a checkout not pip-installed).
        here = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH", "")) if p)
        process = subprocess.Popen(
            [python, "-m", "cacao_tui", *argv],
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
            env=env,
        )
    except OSError as exc:
        raise LaunchRefused(f"cannot start {python}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    return Started(process.pid, layout.output / LAUNCH_LOG, argv, process)


def log_tail(path: Path, lines: int = 5, limit: int = 16 * 1024) -> list[str]:
    """The last lines of a launch log (what a run that ended at once said), terminal-safe.

    A regular file only, never through a link (a log linked to a private key is not shown),
    without blocking (a FIFO), its last ``limit`` bytes only (a link to /dev/zero is refused).
    """
    try:
        data, _ = read_tail(path, limit, follow_links=False)
    except OSError:
        return []
    text = data.decode("utf-8", errors="replace")
    return [safe_text(line) for line in text.splitlines() if line.strip()][-lines:]
