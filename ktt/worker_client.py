"""The tuner's side of the GPU worker: start it, talk to it, watch it, replace it.

Each request gets a deadline that every ``beat`` from the worker renews; past it the
worker's process group is killed (TERM, grace, KILL) and the configuration is a
``timeout``. A worker that exits (sticky CUDA error) or is killed is started again on the
next request, with the same init and shape, so the search goes on.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ktt import procs


class WorkerDied(RuntimeError):
    def __init__(self, message: str, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


class WorkerClient:
    def __init__(self, init: dict[str, Any], log_path: Path | None = None, command: list[str] | None = None) -> None:
        self.init_request = {"cmd": "init", **init}
        self.shape_request: dict[str, Any] | None = None
        self.command = command or [sys.executable, "-m", "ktt.worker"]
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None
        self.replies: queue.Queue[str | None] = queue.Queue()
        self.stderr: procs.PipeReader | None = None
        self.restarts = 0
        self.started = False
        self.info: dict[str, Any] = {}
        self._log = open(log_path, "a", buffering=1) if log_path else None  # noqa: SIM115

    # -- process -------------------------------------------------------------------

    def _start(self) -> None:
        self.proc = procs.spawn(self.command, stdin=subprocess.PIPE)
        self.replies = queue.Queue()
        replies = self.replies

        def sink(line: str) -> None:
            replies.put(line)

        out = procs.PipeReader(self.proc.stdout, keep=50, sink=sink).start()
        err_sink = (lambda line: self._log.write(line + "\n")) if self._log else None
        self.stderr = procs.PipeReader(self.proc.stderr, keep=200, sink=err_sink).start()

        def closer() -> None:
            out.join(timeout=None)  # type: ignore[arg-type]
            replies.put(None)

        threading.Thread(target=closer, daemon=True).start()

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            if self.proc.poll() is None and self.proc.stdin:
                self.proc.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired, ValueError):
            pass
        procs.kill_group(self.proc, grace_s=1.0)
        self.proc = None

    def kill(self) -> None:
        if self.proc is not None:
            procs.kill_group(self.proc, grace_s=0.5)
            self.proc = None

    def close(self) -> None:
        self.stop()
        if self._log:
            self._log.close()
            self._log = None

    def stderr_tail(self, lines: int = 20) -> str:
        if self.stderr is None:
            return ""
        return "\n".join(list(self.stderr.lines)[-lines:])

    # -- requests ------------------------------------------------------------------

    def _send(self, msg: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(msg) + "\n")
            self.proc.stdin.flush()
        except (OSError, ValueError) as exc:
            raise WorkerDied(f"the GPU worker is gone ({exc})") from None

    def _wait(self, timeout_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise WorkerDied(f"no answer from the GPU worker within {timeout_s:g} s", timed_out=True)
            try:
                line = self.replies.get(timeout=min(left, 0.5))
            except queue.Empty:
                continue
            if line is None:
                if self.proc is not None:
                    self.proc.wait()
                code = self.proc.returncode if self.proc is not None else None
                tail = self.stderr_tail()
                self.kill()
                raise WorkerDied(f"the GPU worker exited (code {code})" + (f": {tail}" if tail else ""))
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if msg.get("type") == "beat":
                deadline = time.monotonic() + timeout_s
                continue
            return msg

    def ensure_started(self, timeout_s: float = 120.0) -> dict[str, Any]:
        """Start (or restart) the worker and bring it to the current shape."""
        if self.proc is not None and self.proc.poll() is None:
            return self.info
        if self.proc is not None:
            self.kill()
        if self.started:
            self.restarts += 1
        self.started = True
        self._start()
        self._send(self.init_request)
        info = self._wait(timeout_s)
        if not info.get("ok"):
            self.kill()
            raise WorkerDied(info.get("error", "the GPU worker failed to start"))
        self.info = info
        if self.shape_request is not None:
            reply = self.request({**self.shape_request, "time_reference": False}, timeout_s=600.0)
            if not reply.get("ok"):
                raise WorkerDied(reply.get("error", "the GPU worker failed to prepare the shape"))
        return info

    def request(self, msg: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        self._send(msg)
        reply = self._wait(timeout_s)
        if reply.get("fatal"):
            # The worker exits after a fatal error; reap it now.
            self.kill()
        return reply

    def use_shape(self, msg: dict[str, Any], timeout_s: float = 600.0) -> dict[str, Any]:
        self.ensure_started()
        self.shape_request = {"cmd": "shape", **msg}
        return self.request(self.shape_request, timeout_s)

    def evaluate(self, msg: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        self.ensure_started()
        return self.request({"cmd": "eval", **msg}, timeout_s)
