"""``--gpu-submit TEMPLATE``: the GPU phase of a run, started through a batch system and waited for.

A run on a machine without a GPU (a cluster's login node) does the model's steps itself; whenever
every live branch waits for the GPU it runs ``TEMPLATE`` with ``{cmd}`` replaced by the GPU
phase's command (one shell word), waits for it to end and goes on from what it wrote:

    --gpu-submit 'sbatch --wait --gres=gpu:1 --wrap {cmd}'
    --gpu-submit 'qsub -W block=true -l select=1:ngpus=1 -V -- /bin/sh -c {cmd}'

The template is the user's own command (trusted like the command line): it runs with this
process's environment minus the LLM keys (the GPU phase needs none), in its own process
group, killed as a group when the run stops. Its output lines go to the run log. The GPU
phase runs under this run's lock: the lock's note names a token the command carries
(``--lock-token``), so nobody else can start a run on the directory meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from cacao_tui.llm.registry import PROVIDERS

PLACEHOLDER = "{cmd}"
GRACE_S = 5.0
MAX_LINE = 2000


def template_problem(template: str) -> str | None:
    """Why ``template`` cannot be used (one line), or None."""
    if not template.strip():
        return "--gpu-submit: the template is empty"
    if PLACEHOLDER not in template:
        return f"--gpu-submit: the template has no {PLACEHOLDER} (where the GPU phase's command goes)"
    return None


def gpu_phase_argv(
    problem_dir: Path,
    *,
    token: str,
    timeout_s: float | None = None,
    gpus: tuple[int, ...] | None = None,
    verbose: bool = False,
    python: str | None = None,
) -> list[str]:
    """The GPU phase's command line (this Python, this package: the batch job shares the file system)."""
    argv = [python or sys.executable, "-m", "cacao_tui", "--dir", str(problem_dir), "--resume", "--phase", "gpu"]
    argv += ["--no-ui", "--lock-token", token]
    if timeout_s is not None:
        argv += ["--timeout", f"{timeout_s:g}"]
    if gpus:
        argv += ["--gpus", ",".join(map(str, gpus))]
    if verbose:
        argv.append("--verbose")
    return argv


def expand(template: str, argv: list[str]) -> str:
    """``template`` with ``{cmd}`` replaced by ``argv`` as one shell word."""
    return template.replace(PLACEHOLDER, shlex.quote(shlex.join(argv)))


def submit_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without the LLM providers' key variables."""
    keys = {name for entry in PROVIDERS for name in entry.key_vars}
    return {k: v for k, v in (os.environ if base is None else base).items() if k not in keys}


async def run_submission(command: str, *, cwd: Path, on_line: Callable[[str], None]) -> int:
    """Run ``command`` with /bin/sh, its output line by line to ``on_line``; its exit status.
    A cancel (the run stops) kills its process group (TERM, a grace period, KILL)."""
    proc = await asyncio.create_subprocess_exec(
        "/bin/sh", "-c", command,
        cwd=str(cwd), env=submit_env(), stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, start_new_session=True,
        limit=16 * 1024 * 1024,
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        while raw := await proc.stdout.readline():
            line = raw.decode("utf-8", errors="replace").rstrip("\n")
            on_line(line[:MAX_LINE])
        return await proc.wait()
    except BaseException:
        await asyncio.shield(_kill_group(proc))
        raise


async def _kill_group(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), GRACE_S)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
