"""The engine's GPU scheduler on a Ray cluster: each tuning and profiling job is a Ray
task that needs one GPU, on any node; compile checks are CPU tasks.

The head (the process running the engine) keeps every file of the run: a task carries
the problem's files and the job's own (``bundle``), runs on its node (``remote``), and
streams back its progress and results lines as they come; this module writes them into
the iteration's directory, as the only writer of those files, exactly where a local
``ktt tune`` would have written them. A node or worker lost mid-job is retried elsewhere
(``MAX_ATTEMPTS`` in all); the lines it had sent stay in results.jsonl. Every wait is
bounded (a GPU to come free, a silent node, the tuner's own watchdog), so a run never hangs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from cacao_tui.cluster.bundle import BundleError, problem_bundle, read_capped, safe_relative
from cacao_tui.cluster.native_stderr import native_stderr_captured
from cacao_tui.cluster.placement import OnPlaced, Placement
from cacao_tui.cluster.remote import Job, Message, run_job
from cacao_tui.cluster.spec import ClusterChoice, ClusterError, require_ray
from cacao_tui.ktt_client import (
    DEVICE_TIMEOUT_S,
    PROFILE_TIMEOUT_S,
    CheckOptions,
    KttTuner,
    Tuner,
    TuneRequest,
    TunerError,
    ValidateRequest,
)
from cacao_tui.store.atomic import write_text_atomic
from cacao_tui.store.state import GpuInfo
from ktt.protocol import CheckReport, DeviceReport, ProfileReport, Progress, TuneSummary, ValidateReport

MAX_ATTEMPTS = 3  # a job whose node or worker is lost runs again elsewhere, this many times in all
PLACEMENT_TIMEOUT_S = 900.0  # waiting for a GPU of the cluster to come free
SILENCE_TIMEOUT_S = 60.0  # a placed job sends at least a heartbeat every few seconds
AFTER_WATCHDOG_S = 120.0  # a job's own watchdog, plus this, bounds it on the head
CONNECT_TIMEOUT_S = 10.0
DRAIN_S = 10.0  # after a job's result, the wait for its task to clean up and end
PROFILE_BOUND_S = PROFILE_TIMEOUT_S + AFTER_WATCHDOG_S


class JobLost(Exception):
    """The node or worker running a job went away (or fell silent): the job may run again."""


def _probe(address: str) -> None:
    """A HOST:PORT that nothing answers on makes ray.init retry for minutes: ask TCP first."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise ClusterError(
            f"--cluster: cannot reach the Ray cluster at {address} ({exc.strerror or exc}); "
            "start it with 'ray start --head' (docs/CLUSTER.md)"
        ) from None


def _join_hint(ray_log: str) -> str:
    """What Ray's own log says about a refused join, as advice for the one line."""
    if "InvalidAuthToken" in ray_log or "Unauthenticated" in ray_log:
        return (
            "; the cluster wants its token: set RAY_AUTH_MODE=token, with the head's ~/.ray/auth_token on this "
            "host or RAY_AUTH_TOKEN (docs/CLUSTER.md)"
        )
    return ""


def connect(choice: ClusterChoice) -> dict[str, float]:
    """Join the cluster as a driver (once per process); its total resources. One line on failure."""
    require_ray()
    import ray

    if not ray.is_initialized():
        address = choice.address or os.environ.get("RAY_ADDRESS") or "auto"
        if not address.startswith("ray://") and address != "auto":
            _probe(address)
        failure: str | None = None
        with native_stderr_captured() as noise:
            try:
                ray.init(
                    address=address, log_to_driver=False, logging_level="ERROR", include_dashboard=False,
                    namespace="cacao",
                )  # fmt: skip
            except (ConnectionError, RuntimeError, ValueError, OSError) as exc:
                failure = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if failure is not None:
            raise ClusterError(
                f"--cluster: cannot join the Ray cluster at {address}: {failure[:300]}{_join_hint(noise.text)}"
            )
    return {k: float(v) for k, v in ray.cluster_resources().items()}


class RaySlots:
    """The engine's lease on a cluster: at most one job per cluster GPU in flight; the
    number it hands out is a slot, not a device (Ray picks the node and GPU)."""

    def __init__(self, total: int) -> None:
        if total < 1:
            raise ValueError("a cluster lease needs at least one GPU")
        self.total = total
        self._free: asyncio.Queue[int] = asyncio.Queue()
        for i in range(total):
            self._free.put_nowait(i)

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[int]:
        slot = await self._free.get()
        try:
            yield slot
        finally:
            self._free.put_nowait(slot)


_REMOTE: Any = None


def _remote_job() -> Any:
    """``run_job`` as a Ray remote function, made once per process (Ray exports it once)."""
    global _REMOTE
    if _REMOTE is None:
        import ray

        _REMOTE = ray.remote(run_job)
    return _REMOTE


def _json_path(path: str) -> str:
    return json.dumps(path)[1:-1]


@dataclass
class _Receiver:
    """The head's side of one attempt: writes streamed lines and the final files into out_dir."""

    out_dir: Path | None
    rewrites: dict[str, str] = field(default_factory=dict)  # node path -> head path
    lines: int = 0

    def rewrite(self, text: str) -> str:
        for node_path in sorted(self.rewrites, key=len, reverse=True):
            text = text.replace(_json_path(node_path), _json_path(self.rewrites[node_path]))
        return text

    def append(self, rel: str, text: str) -> None:
        assert self.out_dir is not None
        path = self.out_dir.joinpath(*safe_relative(rel).parts)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            f.write(text)
            f.flush()
        self.lines += text.count("\n")

    def write_files(self, files: dict[str, bytes], streamed: set[str]) -> None:
        assert self.out_dir is not None
        for rel, data in files.items():
            if rel in streamed:
                continue
            path = self.out_dir.joinpath(*safe_relative(rel).parts)
            path.parent.mkdir(parents=True, exist_ok=True)
            text = data.decode("utf-8", errors="surrogateescape")
            if rel.endswith(".json"):
                text = self.rewrite(text)
            if rel.endswith((".json", ".jsonl", ".txt", ".yaml", ".md", ".csv", ".log")):
                write_text_atomic(path, text)
            else:
                tmp = path.with_name(f".{path.name}.tmp")
                tmp.write_bytes(data)
                os.replace(tmp, path)


class RayTuner:
    """``Tuner`` whose jobs run as Ray tasks; ``tuner_factory`` builds the tuner on the node
    (``KttTuner``; the tests pass a fake)."""

    def __init__(
        self,
        problem_dir: Path,
        *,
        on_placed: OnPlaced | None = None,
        on_log: Callable[[str], None] | None = None,
        tuner_factory: Callable[[], Tuner] = KttTuner,
        max_attempts: int = MAX_ATTEMPTS,
        placement_timeout_s: float = PLACEMENT_TIMEOUT_S,
        silence_timeout_s: float = SILENCE_TIMEOUT_S,
    ) -> None:
        self.problem_dir = problem_dir
        self.on_placed = on_placed
        self.on_log = on_log
        self.tuner_factory = tuner_factory
        self.max_attempts = max_attempts
        self.placement_timeout_s = placement_timeout_s
        self.silence_timeout_s = silence_timeout_s
        self._problem_ref: Any = None
        self._lock = threading.Lock()
        self.placements: list[Placement] = []

    # ---- what travels ----------------------------------------------------------
    def _problem(self) -> Any:
        """The problem's files, put in Ray's object store once per run (every task reads that copy)."""
        with self._lock:
            if self._problem_ref is None:
                import ray

                try:
                    self._problem_ref = ray.put(problem_bundle(self.problem_dir).files)
                except (BundleError, OSError) as exc:
                    raise TunerError(f"cannot send the problem to the cluster: {exc}", environment=True) from None
            return self._problem_ref

    @staticmethod
    def _files(**paths: Path | None) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        for name, path in paths.items():
            if path is None or not path.exists():
                continue
            try:
                out[name] = read_capped(path)
            except (BundleError, OSError) as exc:
                raise TunerError(f"cannot send {path} to the cluster: {exc}") from None
        return out

    # ---- one job, with its retries ---------------------------------------------
    async def _submit(
        self,
        job: Job,
        kernel: Path,
        *,
        gpu: bool,
        out_dir: Path | None,
        head_paths: dict[str, str],
        bound_s: float,
        on_progress: Callable[[Progress], None] | None = None,
    ) -> tuple[Message, _Receiver]:
        import ray

        remote = _remote_job()
        problem = await asyncio.to_thread(self._problem)
        lost: list[str] = []
        receiver = _Receiver(out_dir)
        for attempt in range(1, self.max_attempts + 1):
            options: dict[str, Any] = {"num_returns": "streaming", "max_retries": 0}
            options.update({"num_gpus": 1, "num_cpus": 0} if gpu else {"num_gpus": 0, "num_cpus": 1})
            stream = remote.options(**options).remote(problem, job, self.tuner_factory)
            try:
                message = await self._follow(stream, job, kernel, attempt, receiver, head_paths, bound_s, on_progress)
                return message, receiver
            except JobLost as exc:
                with contextlib.suppress(Exception):
                    ray.cancel(stream, force=True)  # a silent worker is killed, not left holding its GPU
                lost.append(str(exc))
                kept = f"; {receiver.lines} measured configurations kept" if receiver.lines else ""
                if attempt < self.max_attempts:
                    self._log(f"{job.kind}: {exc}{kept}; running it again elsewhere (attempt {attempt + 1} "
                              f"of {self.max_attempts})")  # fmt: skip
            except BaseException:  # cancelled (branch killed, run stopped) or a tuner error: stop the task
                with contextlib.suppress(Exception):
                    ray.cancel(stream, force=True)
                raise
        kept = f" ({receiver.lines} measured configurations kept in results.jsonl)" if receiver.lines else ""
        raise TunerError(f"{job.kind} was lost {len(lost)} times on the cluster{kept}: {lost[-1]}")

    async def _follow(
        self,
        stream: Any,
        job: Job,
        kernel: Path,
        attempt: int,
        receiver: _Receiver,
        head_paths: dict[str, str],
        bound_s: float,
        on_progress: Callable[[Progress], None] | None,
    ) -> Message:
        loop = asyncio.get_running_loop()
        deadline: float | None = None
        placement: Placement | None = None
        it = stream.__aiter__()
        while True:
            if placement is None:
                wait = self.placement_timeout_s
            else:
                assert deadline is not None
                wait = min(self.silence_timeout_s, deadline - loop.time())
                if wait <= 0:
                    raise JobLost(f"ran past its limit of {bound_s:.0f} s on {placement.describe()}")
            try:
                ref = await asyncio.wait_for(it.__anext__(), wait)
                message: Message = await asyncio.wait_for(ref, self.silence_timeout_s)
            except StopAsyncIteration:
                break
            except TimeoutError:
                if placement is None:
                    raise TunerError(
                        f"{job.kind}: no GPU of the cluster came free within {self.placement_timeout_s:.0f} s"
                    ) from None
                raise JobLost(f"{placement.describe()} fell silent for {self.silence_timeout_s:.0f} s") from None
            except Exception as exc:  # Ray's worker/node/object-lost errors: the job never finished
                where = placement.describe() if placement else "an unplaced task"
                raise JobLost(f"{where} was lost ({type(exc).__name__})") from None
            kind = message.get("kind")
            if kind == "placed":
                pid = message.get("pid")
                placement = Placement(
                    job.kind, kernel, str(message.get("host", "?")), str(message.get("node_id", "")),
                    str(message.get("gpu", "")), attempt, pid if isinstance(pid, int) else None,
                )  # fmt: skip
                deadline = loop.time() + bound_s
                receiver.rewrites = {
                    v: head_paths[k] for k, v in message.get("rewrites", {}).items() if k in head_paths
                }
                self.placements.append(placement)
                if self.on_placed is not None and job.kind != "check":  # checks are many and short: not shown
                    self.on_placed(placement)
            elif kind == "progress" and on_progress is not None:
                on_progress(Progress.model_validate_json(message["json"]))
            elif kind == "lines" and receiver.out_dir is not None:
                receiver.append(str(message["path"]), str(message["text"]))
            elif kind == "error":
                raise TunerError(
                    str(message.get("message", "failed on the node")),
                    exit_code=message.get("exit_code"),
                    environment=bool(message.get("environment")),
                )
            elif kind == "done":
                await self._drain(it)
                return message
        where = placement.describe() if placement else "an unplaced task"
        raise JobLost(f"{where} ended without a result (node or worker lost)")

    async def _drain(self, it: Any) -> None:
        """Let the task end by itself (it removes its temp dir after the last message), briefly."""
        with contextlib.suppress(Exception):
            while True:
                await asyncio.wait_for(it.__anext__(), DRAIN_S)

    def _log(self, text: str) -> None:
        if self.on_log is not None:
            self.on_log(text)

    @staticmethod
    def _result(message: Message, model: type[BaseModel], receiver: _Receiver) -> Any:
        return model.model_validate_json(receiver.rewrite(str(message["result"])))

    # ---- the Tuner protocol ----------------------------------------------------
    async def check(
        self,
        problem_dir: Path,
        kernel: Path,
        spec: Path,
        *,
        sample: int,
        arch: str,
        options: CheckOptions | None = None,
    ) -> CheckReport:
        extra = {"configs": list(options.configs), "sm_count": options.sm_count} if options is not None else {}
        args = {"sample": sample, "arch": arch, **extra}
        job = Job("check", self._files(**{"kernels.cu": kernel, "tuning.yaml": spec}), args)
        heads = {"kernel": str(kernel), "spec": str(spec), "problem": str(problem_dir)}
        message, _ = await self._submit(job, kernel, gpu=False, out_dir=None, head_paths=heads, bound_s=300.0)
        report = CheckReport.model_validate_json(str(message["result"]))
        return report.model_copy(update={"kernel_file": str(kernel), "spec_file": str(spec)})

    async def tune(self, request: TuneRequest, on_progress: Callable[[Progress], None]) -> TuneSummary:
        files = self._files(
            **{"kernels.cu": request.kernel, "tuning.yaml": request.spec, "reference_time.json": request.reference_time}
        )
        sent_reference = files.get("reference_time.json")
        job = Job(
            "tune",
            files,
            {
                "duration_s": request.duration_s, "watchdog_s": request.watchdog_s, "seed": request.seed,
                "compile_workers": request.compile_workers, "problem_budget": request.problem_budget,
            },
        )  # fmt: skip
        request.out_dir.mkdir(parents=True, exist_ok=True)
        for stale in [request.out_dir / "results.jsonl", *request.out_dir.glob("case_*/results.jsonl")]:
            stale.unlink(missing_ok=True)  # a redone step starts its lines afresh, as ktt tune does
        heads = {
            "out": str(request.out_dir), "kernel": str(request.kernel), "spec": str(request.spec),
            "problem": str(request.problem_dir), "job": str(request.reference_time.parent),
        }  # fmt: skip
        message, receiver = await self._submit(
            job, request.kernel, gpu=True, out_dir=request.out_dir, head_paths=heads,
            bound_s=request.watchdog_s + AFTER_WATCHDOG_S, on_progress=on_progress,
        )  # fmt: skip
        streamed = {p.relative_to(request.out_dir).as_posix() for p in request.out_dir.rglob("results.jsonl")}
        receiver.write_files(message.get("files") or {}, streamed)
        self._reference_back(request.reference_time, sent_reference, message.get("reference_time"))
        return self._result(message, TuneSummary, receiver)

    async def profile(
        self, problem_dir: Path, kernel: Path, spec: Path, summary: Path, out_dir: Path, *, device: int
    ) -> ProfileReport:
        try:
            files = self._files(**{"kernels.cu": kernel, "tuning.yaml": spec, "summary.json": summary})
            heads = {"out": str(out_dir), "kernel": str(kernel), "spec": str(spec), "problem": str(problem_dir)}
            message, receiver = await self._submit(
                Job("profile", files), kernel, gpu=True, out_dir=out_dir, head_paths=heads,
                bound_s=PROFILE_BOUND_S,
            )  # fmt: skip
        except TunerError as exc:
            kind = "no_gpu" if exc.environment else "failed"
            return ProfileReport(ok=False, error=str(exc), error_kind=kind)  # type: ignore[arg-type]
        receiver.write_files(message.get("files") or {}, set())
        return self._result(message, ProfileReport, receiver)

    async def validate(self, request: ValidateRequest) -> ValidateReport:
        files = self._files(**{"kernels.cu": request.kernel, "tuning.yaml": request.spec})
        args = {"config": request.config, "timeout_s": request.timeout_s, "run_timeout_s": request.run_timeout_s}
        heads = {"kernel": str(request.kernel), "spec": str(request.spec), "problem": str(request.problem_dir)}
        message, receiver = await self._submit(
            Job("validate", files, args), request.kernel, gpu=True, out_dir=None, head_paths=heads,
            bound_s=request.timeout_s + AFTER_WATCHDOG_S,
        )  # fmt: skip
        return self._result(message, ValidateReport, receiver)

    async def describe_device(self, *, device: int) -> DeviceReport:
        """The table of a GPU the cluster hands out (the run uses GPUs of one architecture)."""
        anchor = self.problem_dir / "problem.yaml"
        bound = DEVICE_TIMEOUT_S + AFTER_WATCHDOG_S
        message, receiver = await self._submit(
            Job("device", {}), anchor, gpu=True, out_dir=None, head_paths={}, bound_s=bound
        )
        return self._result(message, DeviceReport, receiver)

    # ---- helpers -----------------------------------------------------------------
    @staticmethod
    def _reference_back(head: Path, sent: bytes | None, returned: bytes | None) -> None:
        """Reference times the node measured come back, unless another job wrote the file meanwhile."""
        if returned is None or returned == sent:
            return
        try:  # a regular file of the head's output/, never through a link
            now = read_capped(head) if head.exists() or head.is_symlink() else None
        except (OSError, BundleError):
            return
        if now == sent:
            write_text_atomic(head, returned.decode("utf-8", errors="replace"))


@dataclass
class RayBackend:
    """What the launcher needs of a cluster: the GPU description, the lease and the tuner."""

    gpu: GpuInfo
    devices: RaySlots
    tuner: RayTuner
    resources: dict[str, float]


def open_ray_backend(
    choice: ClusterChoice,
    problem_dir: Path,
    *,
    arch: str,
    dry_run: bool,
    on_placed: OnPlaced | None = None,
    on_log: Callable[[str], None] | None = None,
    tuner_factory: Callable[[], Tuner] = KttTuner,
) -> RayBackend:
    """Join the cluster and check it can take the run; ClusterError is one line (exit 2)."""
    try:
        problem_bundle(problem_dir)  # a problem that cannot travel stops the run before anything is written
    except (BundleError, OSError) as exc:
        raise ClusterError(f"--cluster: cannot send the problem to the cluster: {exc}") from None
    resources = connect(choice)
    gpus = int(resources.get("GPU", 0))
    if gpus < 1 and not dry_run:
        raise ClusterError(
            f"--cluster: {choice.describe()} has no GPU (ray start --num-gpus N on each GPU host); "
            "use --dry-run to check without one"
        )
    import ray

    nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
    gpu = GpuInfo(
        name=f"Ray cluster: {gpus} GPU(s) on {nodes} node(s)", arch=arch, indices=list(range(max(gpus, 1))),
        detected=False,
    )  # fmt: skip
    tuner = RayTuner(problem_dir, on_placed=on_placed, on_log=on_log, tuner_factory=tuner_factory)
    return RayBackend(gpu=gpu, devices=RaySlots(max(gpus, 1)), tuner=tuner, resources=resources)
