"""``ktt validate``: run one configuration on the GPU for correctness only, on every input set.

What an authoring step calls before it ends (the agent's ``validate`` tool): the same
checks as a tuning run (fresh inputs, canaries, input mutation, a second run for races, the
second input set), no timing, no search, one configuration, every scored shape in order
(a shape that fails stops there). It runs under the machine-wide GPU lock like a tuning,
each evaluation bounded by ``--timeout`` without progress (the caller bounds the whole
process), and writes nothing but its own work directory: no reference time is measured or
recorded. A failure reports how many elements differ and up to 8 of them (index,
expected, got).
"""

from __future__ import annotations

import contextlib
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ktt import gpu_lock
from ktt.candidates import CompileContext
from ktt.capped_read import parse_json
from ktt.case_search import CaseSearch, TuneError, death_status
from ktt.protocol import (
    EXIT_ENVIRONMENT,
    EXIT_NOTHING_VALID,
    EXIT_OK,
    ConfigResult,
    ValidateReport,
    ValidationReport,
)
from ktt.space import Key
from ktt.spec import Config
from ktt.toolkit import query_device
from ktt.tune import TuneOptions, Tuner
from ktt.worker_client import WorkerDied


@dataclass
class ValidateOptions:
    problem_dir: Path
    kernel: Path
    spec: Path
    output: Path  # its work directory
    config: Config | None = None  # None: the first configuration of the space
    device: int | None = None
    cache_dir: Path | None = None
    timeout_s: float = 10.0  # one evaluation without progress
    seed: int = 0


def choose_key(search: CaseSearch, config: Config | None) -> tuple[Key | None, str | None]:
    """The configuration to run: the one asked for (checked against the space), else the first."""
    space = search.space
    if config is not None:
        unknown = sorted(set(config) - set(space.names))
        missing = [n for n in space.names if n not in config]
        if unknown or missing:
            what = f"unknown parameter(s) {', '.join(unknown)}" if unknown else f"missing {', '.join(missing)}"
            return None, f"the configuration does not match tuning.yaml: {what} (parameters: {', '.join(space.names)})"
        key = space.key(config)
        if not space.contains(key):
            return None, "the configuration is not in the tuning space (a value not listed, or a restriction fails)"
        return key, None
    if search.keys is not None:
        return (search.keys[0], None) if search.keys else (None, "no configuration satisfies the restrictions")
    key = space.sample(random.Random(0), set())
    return (key, None) if key is not None else (None, "no configuration satisfying the restrictions was found")


class OneConfig(Tuner):
    """The tuner's setup (problem, spec, worker, references) without its search."""

    def _host_references(self) -> None:
        """cpu_c / python references: their outputs for every input set; nothing is timed."""
        for search in self.searches:
            if not all(self.work.has_reference(self.problem, search.name, s) for s in self.problem.set_indices):
                self.stage("reference", search)
                self._run_host_reference(search.shape, outputs=True, time_it=False)

    def validate_one(self, search: CaseSearch, key: Key) -> ConfigResult:
        cand = search.make_candidate(key, compile_here=True)
        why = search.finish_compile(cand)
        if why is not None:
            return search.failure_result(cand, why)
        assert self.worker is not None
        msg: dict[str, Any] = {
            "config": cand.config, "cubin": cand.cubin_path, "launches": cand.launches, "scratch": cand.scratch,
            "best_ms": None, "floor_ms": None, "confirm": True, "time": False, "race": True,
        }  # fmt: skip
        base = ConfigResult(index=0, config=cand.config, status="ok", shape=search.name)
        try:
            reply = self.worker.evaluate(msg, timeout_s=self.opts.config_timeout_s)
        except WorkerDied as exc:
            status, detail = death_status(exc, self.opts.config_timeout_s)
            return base.model_copy(update={"status": status, "error": detail})
        validation = reply.get("validation")
        status = reply.get("status", "runtime_error")
        if status == "ok" and not reply.get("confirmed"):
            status, reply = "validation_failed", {**reply, "error": "not checked on the fresh input sets"}
        return base.model_copy(
            update={
                "status": status,
                "error": reply.get("error"),
                "flags": list(reply.get("flags", [])),
                "confirmed": bool(reply.get("confirmed")),
                "validation": ValidationReport.model_validate(validation) if validation else None,
            }
        )

    def run_one(self, config: Config | None) -> ValidateReport:
        self.load()
        problem = self.problem
        hits = problem.forbid_hits(self.kernel.text)
        if hits:
            return ValidateReport(ok=False, message="forbidden by the problem's rules: " + "; ".join(map(str, hits)))
        key, why = choose_key(self.searches[0], config)
        if key is None:
            return ValidateReport(ok=False, config=config or {}, message=why)
        chosen = self.searches[0].space.config(key)
        ordinal = self.opts.device if self.opts.device is not None else problem.gpu_indices[0]
        info = query_device(ordinal)
        if info is None:
            raise TuneError(f"no CUDA device {ordinal} (no driver, or no such GPU)", EXIT_ENVIRONMENT)
        self.device_name, self.arch = info.name, info.arch
        self.ctx = CompileContext(problem, self.spec, self.kernel, self.work, self.arch)
        self.gpu_lock = gpu_lock.acquire(ordinal, f"ktt validate of problem {problem.name}", uuid=info.uuid,
                                         on_wait=self.log)  # fmt: skip
        self._start_worker(ordinal)
        if problem.reference.type != "cuda":
            self._host_references()
        results = []
        for search in self.searches:
            if not search.space.contains(key):
                results.append(ConfigResult(index=0, config=chosen, status="launch_failed", shape=search.name,
                                            error="the configuration is not in the space at this shape"))  # fmt: skip
                break
            self._shape_reply(search.shape, time_reference=False)
            result = self.validate_one(search, key)
            results.append(result)
            if result.status != "ok":
                break
        ok = len(results) == len(self.searches) and all(r.status == "ok" for r in results)
        return ValidateReport(ok=ok, config=chosen, shapes=results)


def validate(opts: ValidateOptions) -> tuple[ValidateReport, int]:
    t0 = time.monotonic()
    tune_opts = TuneOptions(
        problem_dir=opts.problem_dir, kernel=opts.kernel, spec=opts.spec, output=opts.output, seed=opts.seed,
        device=opts.device, cache_dir=opts.cache_dir, config_timeout_s=opts.timeout_s, compile_workers=0,
        problem_budget=True,
    )  # fmt: skip
    runner = OneConfig(tune_opts, lambda _line: None)
    try:
        report = runner.run_one(opts.config)
        code = EXIT_OK if report.ok else EXIT_NOTHING_VALID
    except TuneError as exc:
        report, code = ValidateReport(ok=False, config=opts.config or {}, message=str(exc)), exc.exit_code
    finally:
        with contextlib.suppress(Exception):
            runner.close()
    report.seconds = round(time.monotonic() - t0, 3)
    return report, code


def parse_config(text: str | None) -> Config | None:
    """``--config`` as JSON (an object of parameter values); ValueError with a readable message."""
    if text is None:
        return None
    value = parse_json(text, strict=True)  # deep or huge JSON: a ValueError (JSONBoundsError), not a traceback
    if not isinstance(value, dict) or not all(isinstance(v, int | float | str) for v in value.values()):
        raise ValueError("--config must be a JSON object of parameter values, like '{\"BX\": 16}'")
    return value
