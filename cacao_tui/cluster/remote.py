"""What a Ray task runs on a node: unpack the job into a private temp dir, run the tuner
there, and stream back what it produces as it produces it.

The job runs through the same ``Tuner`` as on one machine (``KttTuner``: ``python -m ktt``
in its own process group, with the allow-listed child environment and ktt's sandbox),
so a node adds no new way for a kernel to reach anything. The stream is a sequence of
small dicts: ``placed`` (host, node, GPU), ``progress``, ``lines`` (new complete lines of
a results.jsonl), ``alive`` (a heartbeat while nothing else happens), then one ``done``
(the result and the remaining output files) or ``error`` (the tuner's own failure,
which is not retried). A stream that ends without either means the node or worker was lost.
"""

from __future__ import annotations

import asyncio
import os
import queue
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cacao_tui.cluster.bundle import collect, unpack
from cacao_tui.ktt_client import CheckOptions, Tuner, TuneRequest, TunerError, ValidateRequest

POLL_S = 0.2
HEARTBEAT_S = 5.0
MAX_LINES_CHUNK = 1 << 20  # bytes of results lines in one message
WORK_DIRS = frozenset({"work"})  # ktt's --keep-work scratch: never sent back

Message = dict[str, Any]


@dataclass(frozen=True)
class Job:
    """One unit of GPU (or compile) work: its kind, its own files and its arguments."""

    kind: str  # "tune" | "profile" | "check" | "validate" | "device"
    files: dict[str, bytes]  # kernels.cu, tuning.yaml, and reference_time.json / summary.json
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Paths:
    """Where the job's pieces lie on the node (the head rewrites them to its own in results)."""

    root: Path

    @property
    def problem(self) -> Path:
        return self.root / "problem"

    @property
    def job(self) -> Path:
        return self.root / "job"

    @property
    def out(self) -> Path:
        return self.root / "out"

    def rewrites(self) -> dict[str, str]:
        return {
            "out": str(self.out),
            "kernel": str(self.job / "kernels.cu"),
            "spec": str(self.job / "tuning.yaml"),
            "problem": str(self.problem),
            "job": str(self.job),
        }


def where_am_i() -> Message:
    """The host, Ray node and GPU this task was given (Ray sets CUDA_VISIBLE_DEVICES to it)."""
    node_id, gpu = "", ""
    try:
        import ray

        node_id = ray.get_runtime_context().get_node_id() or ""
        gpus = ray.get_gpu_ids()
        gpu = ",".join(str(g) for g in gpus)
    except Exception:  # outside a Ray worker (unit tests): no node id, no GPU id
        pass
    return {"kind": "placed", "host": socket.gethostname(), "node_id": node_id, "gpu": gpu, "pid": os.getpid()}


class _Tail:
    """Complete new lines of every results.jsonl under the output dir, from where it left off."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.offsets: dict[str, int] = {}

    def files(self) -> list[Path]:
        if not self.out.is_dir():
            return []
        found = [self.out / "results.jsonl", *sorted(self.out.glob("case_*/results.jsonl"))]
        return [p for p in found if p.is_file()]

    def read(self) -> Iterator[Message]:
        for path in self.files():
            rel = path.relative_to(self.out).as_posix()
            start = self.offsets.get(rel, 0)
            with open(path, "rb") as f:
                f.seek(start)
                data = f.read(MAX_LINES_CHUNK)
            end = data.rfind(b"\n")
            if end < 0:
                continue
            chunk = data[: end + 1]
            self.offsets[rel] = start + len(chunk)
            yield {"kind": "lines", "path": rel, "text": chunk.decode("utf-8", errors="replace")}


def _start(coro_factory: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}

    def main() -> None:
        try:
            box["result"] = asyncio.run(coro_factory())
        except BaseException as exc:  # handed to the stream as an error message
            box["error"] = exc

    thread = threading.Thread(target=main, name="cacao-job", daemon=True)
    thread.start()
    return thread, box


def run_job(problem: dict[str, bytes], job: Job, tuner_factory: Callable[[], Tuner]) -> Iterator[Message]:
    """The body of the Ray task (a generator: each yield travels to the head as it happens)."""
    root = Path(tempfile.mkdtemp(prefix="cacao-job-"))
    try:
        paths = Paths(root)
        unpack(problem, paths.problem)
        unpack(job.files, paths.job)
        paths.out.mkdir()
        placed = where_am_i()
        placed["rewrites"] = paths.rewrites()
        yield placed
        yield from _run(paths, job, tuner_factory)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _run(paths: Paths, job: Job, tuner_factory: Callable[[], Tuner]) -> Iterator[Message]:
    tuner = tuner_factory()
    progress: queue.Queue[str] = queue.Queue()
    kernel, spec, a = paths.job / "kernels.cu", paths.job / "tuning.yaml", job.args
    if job.kind == "tune":
        request = TuneRequest(
            problem_dir=paths.problem,
            kernel=kernel,
            spec=spec,
            out_dir=paths.out,
            device=0,  # the GPU Ray gave this task is the only one it sees
            duration_s=a.get("duration_s"),
            watchdog_s=float(a["watchdog_s"]),
            reference_time=paths.job / "reference_time.json",
            seed=int(a.get("seed", 0)),
            compile_workers=a.get("compile_workers"),
            problem_budget=bool(a.get("problem_budget", False)),
        )

        def factory() -> Any:
            return tuner.tune(request, lambda p: progress.put(p.model_dump_json()))
    elif job.kind == "profile":

        def factory() -> Any:
            return tuner.profile(paths.problem, kernel, spec, paths.job / "summary.json", paths.out, device=0)
    elif job.kind == "check":

        def factory() -> Any:
            options = CheckOptions(tuple(a.get("configs") or ()), a.get("sm_count"))
            sample, arch = int(a["sample"]), str(a["arch"])
            return tuner.check(paths.problem, kernel, spec, sample=sample, arch=arch, options=options)
    elif job.kind == "validate":
        validate = ValidateRequest(
            problem_dir=paths.problem, kernel=kernel, spec=spec, out_dir=paths.out, device=0,
            config=a.get("config"), timeout_s=float(a["timeout_s"]), run_timeout_s=float(a["run_timeout_s"]),
        )  # fmt: skip

        def factory() -> Any:
            return tuner.validate(validate)
    elif job.kind == "device":

        def factory() -> Any:
            return tuner.describe_device(device=0)
    else:
        yield {"kind": "error", "message": f"unknown job kind {job.kind!r}"}
        return
    thread, box = _start(factory)
    tail = _Tail(paths.out)
    last = time.monotonic()
    while thread.is_alive():
        thread.join(POLL_S)
        sent = False
        while True:
            try:
                yield {"kind": "progress", "json": progress.get_nowait()}
                sent = True
            except queue.Empty:
                break
        for message in tail.read():
            yield message
            sent = True
        if sent:
            last = time.monotonic()
        elif time.monotonic() - last > HEARTBEAT_S:
            yield {"kind": "alive"}
            last = time.monotonic()
    while not progress.empty():
        yield {"kind": "progress", "json": progress.get_nowait()}
    while True:  # every complete line, before the files that summarise them
        chunk = list(tail.read())
        if not chunk:
            break
        yield from chunk
    error = box.get("error")
    if isinstance(error, TunerError):
        yield {"kind": "error", "message": str(error), "exit_code": error.exit_code, "environment": error.environment}
        return
    if error is not None:
        yield {"kind": "error", "message": f"{type(error).__name__}: {error}"[:2000]}
        return
    skip = frozenset(tail.offsets)  # the results lines went as lines; a partial last line is dropped
    files = collect(paths.out, skip=skip, skip_dirs=WORK_DIRS).files
    ref = paths.job / "reference_time.json"
    yield {
        "kind": "done",
        "result": box["result"].model_dump_json(),
        "files": files,
        "reference_time": ref.read_bytes() if ref.is_file() else None,
    }
