"""``ktt profile``: Nsight Compute on one configuration, and the small runner ncu launches.

The runner (``python -m ktt run-config``) sets up the problem's inputs exactly as the tuner
does and runs the launch sequence ``warmup`` times, then ``runs`` times; ncu is told to
skip the warm-up launches (``--launch-skip``) and to profile only the pipeline's kernels
(``--kernel-name``), with ``--clock-control none`` so clocks are left as the tuner saw
them. The profiled configuration is compiled with ``-lineinfo`` (the code is the same; the
source view can name kernels.cu's lines). The report is imported three times: the raw page
(the metrics), the details page (the rules' findings with their estimated speedups) and the
source page (the lines with the most warp stall samples); ``ktt.diagnosis`` condenses them.
A profile whose sections ncu refuses is taken again with the metrics alone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ktt import gpu_lock, procs
from ktt.candidates import CompileContext, KernelSource, geometry_problems, launch_plan, target_arch
from ktt.compile_cache import compile_cached, default_cache_dir
from ktt.diagnosis import diagnose
from ktt.expressions import ExpressionError
from ktt.launch_program import has_until, launches_per_run, program_kernels
from ktt.ncu import (
    CATALOGUE,
    DURATION,
    RULE_SECTIONS,
    details_command,
    find_ncu,
    import_command,
    parse_details_csv,
    parse_raw_csv,
    parse_source_csv,
    permission_error,
    profile_command,
    source_command,
    unknown_metrics,
)
from ktt.problem import ProblemError, load_problem
from ktt.protocol import (
    EXIT_BAD_INPUT,
    EXIT_ENVIRONMENT,
    EXIT_NOTHING_VALID,
    EXIT_OK,
    KernelProfile,
    ProfileReport,
    TuneSummary,
)
from ktt.results import write_json_atomic
from ktt.spec import Config, load_spec
from ktt.target import sm_count_for, with_sm_count
from ktt.toolkit import query_device
from ktt.workdir import WorkDir

NCU_TIMEOUT_S = 600.0


@dataclass
class ProfileOptions:
    problem_dir: Path
    kernel: Path
    spec: Path
    output: Path
    config: Config | None = None
    from_summary: Path | None = None
    shape: str | None = None
    device: int | None = None
    cache_dir: Path | None = None
    metrics: list[str] | None = None


def _config_from(opts: ProfileOptions) -> Config:
    if opts.config is not None:
        return opts.config
    if opts.from_summary is None:
        raise ValueError("give --config or --from-summary")
    summary = TuneSummary.model_validate_json(opts.from_summary.read_text(encoding="utf-8"))
    if summary.best is None:
        raise ValueError(f"{opts.from_summary}: the run found no valid configuration to profile")
    return dict(summary.best.config)


@dataclass
class NcuOutput:
    raw: str  # the raw page: every metric
    details: str = ""  # the details page: sections and rule results ("" when not imported)
    source: str = ""  # the source page (CUDA lines; "" when not imported)


def runner_command(opts: ProfileOptions, config: Config, shape: str, warmup: int, runs: int, work: Path) -> list[str]:
    cmd = [
        sys.executable,
        "-m",
        "ktt",
        "run-config",
        "--problem",
        str(opts.problem_dir),
        "--kernel",
        str(opts.kernel),
        "--spec",
        str(opts.spec),
        "--config",
        json.dumps(config),
        "--shape",
        shape,
        "--warmup",
        str(warmup),
        "--runs",
        str(runs),
        "--work",
        str(work),
        "--cache-dir",
        str(opts.cache_dir or default_cache_dir()),
        "--lineinfo",
    ]
    if opts.device is not None:
        cmd += ["--device", str(opts.device)]
    return cmd


def run_ncu(
    opts: ProfileOptions,
    config: Config,
    kernels: list[str],
    metrics: list[str],
    warmup: int,
    runs: int,
    launches_per_run: int,
    export: Path,
    sections: tuple[str, ...] = (),
) -> tuple[NcuOutput, ProfileReport | None, list[str]]:
    """Run ncu (dropping metrics it does not know, up to twice; without ``sections`` when it
    refuses them); returns (its output, failure report, command)."""
    ncu = find_ncu()
    assert ncu is not None
    shape = opts.shape or "default"
    app = runner_command(opts, config, shape, warmup, runs, opts.output / "work")
    metrics = list(metrics)
    for _attempt in range(4):
        cmd = profile_command(
            ncu, app, kernels, warmup * launches_per_run, runs * launches_per_run, metrics, str(export), sections
        )
        res = procs.run(cmd, timeout_s=NCU_TIMEOUT_S)
        text = res.stdout + "\n" + res.stderr
        if permission_error(text):
            return (
                NcuOutput(""),
                ProfileReport(
                    ok=False,
                    config=config,
                    command=cmd,
                    error_kind="no_permission",
                    error="ncu lacks permission to read GPU performance counters (ERR_NVGPUCTRPERM); "
                    "run as root or set NVreg_RestrictProfilingToAdminUsers=0",
                ),
                cmd,
            )
        bad = [m for m in unknown_metrics(text) if m in metrics]
        if bad:
            metrics = [m for m in metrics if m not in bad]
            continue
        if res.returncode != 0 and not res.timed_out and sections:
            sections = ()  # a section this ncu does not know: the metrics alone
            continue
        if res.timed_out or res.returncode != 0:
            kind = "no_gpu" if ("no CUDA device" in text or "CUDA_ERROR_NO_DEVICE" in text) else "failed"
            tail = "\n".join(text.strip().splitlines()[-15:])
            return (
                NcuOutput(""),
                ProfileReport(
                    ok=False,
                    config=config,
                    command=cmd,
                    error_kind=kind,  # type: ignore[arg-type]
                    error=f"ncu failed (exit {res.returncode}): {tail}",
                ),
                cmd,
            )
        report = str(export) + ".ncu-rep"
        imp = procs.run(import_command(ncu, report), timeout_s=300.0)
        if imp.returncode != 0:
            return (
                NcuOutput(""),
                ProfileReport(
                    ok=False,
                    config=config,
                    command=cmd,
                    error_kind="failed",
                    error=f"ncu --import failed: {imp.stderr.strip()[-2000:]}",
                ),
                cmd,
            )
        out = NcuOutput(imp.stdout)
        if sections:  # the findings and the source view; a failed import leaves them out
            details = procs.run(details_command(ncu, report), timeout_s=300.0)
            out.details = details.stdout if details.returncode == 0 else ""
            source = procs.run(source_command(ncu, report), timeout_s=300.0)
            out.source = source.stdout if source.returncode == 0 else ""
        return out, None, cmd
    failure = ProfileReport(ok=False, config=config, error_kind="failed", error="ncu rejected the metric list")
    return NcuOutput(""), failure, []


def ncu_version() -> str | None:
    ncu = find_ncu()
    if ncu is None:
        return None
    res = procs.run([ncu, "--version"], timeout_s=60)
    lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
    return lines[-1].strip() if lines else None


def _setup(opts: ProfileOptions) -> tuple[Any, Any, KernelSource, Config, list[dict]]:
    problem = load_problem(opts.problem_dir)
    ordinal = opts.device if opts.device is not None else problem.gpu_indices[0]
    problem = with_sm_count(problem, sm_count_for(None, ordinal, problem.compute_capability))
    spec = load_spec(opts.spec, problem)
    kernel = KernelSource.read(opts.kernel)
    config = _config_from(opts)
    shape = problem.shape(opts.shape or problem.primary.name)
    launches, _ = launch_plan(spec, config, shape)
    return problem, spec, kernel, config, launches


def profile(opts: ProfileOptions) -> tuple[ProfileReport, int]:
    opts.output.mkdir(parents=True, exist_ok=True)
    try:
        problem, _, _, config, launches = _setup(opts)
    except (ProblemError, OSError, ValueError, KeyError, ExpressionError) as exc:
        return ProfileReport(ok=False, error=str(exc), error_kind="failed"), EXIT_BAD_INPUT
    opts.shape = opts.shape or problem.primary.name  # the ncu runner needs the name
    if find_ncu() is None:
        report = ProfileReport(
            ok=False,
            config=config,
            error_kind="ncu_missing",
            error="Nsight Compute (ncu) was not found on PATH, in /usr/local/cuda/bin or "
            "/opt/nvidia/nsight-compute; install it or set NCU=/path/to/ncu",
        )
        write_json_atomic(opts.output / "profile.json", report)
        return report, EXIT_ENVIRONMENT
    kernels = program_kernels(launches)
    metrics = opts.metrics or [m.name for m in CATALOGUE]
    ordinal = opts.device if opts.device is not None else problem.gpu_indices[0]
    info = query_device(ordinal)
    # One GPU job per device across processes (ktt.gpu_lock): a tuning elsewhere would skew the counters.
    with gpu_lock.hold(ordinal, f"ktt profile of problem {problem.name}", uuid=info.uuid if info else None):
        output, failure, cmd = run_ncu(
            opts, config, kernels, metrics, warmup=0 if has_until(launches) else 1, runs=1,
            launches_per_run=launches_per_run(launches),
            export=opts.output / "profile", sections=RULE_SECTIONS,
        )  # fmt: skip
    text = output.raw
    if failure is not None:
        failure.ncu_version = ncu_version()
        write_json_atomic(opts.output / "profile.json", failure)
        code = (
            EXIT_ENVIRONMENT if failure.error_kind in ("no_permission", "no_gpu", "ncu_missing") else EXIT_NOTHING_VALID
        )
        return failure, code
    (opts.output / "profile_raw.csv").write_text(text, encoding="utf-8")
    profiles = parse_raw_csv(text)
    add_diagnosis(profiles, output, opts.kernel)
    if not profiles:
        report = ProfileReport(
            ok=False,
            config=config,
            command=cmd,
            error_kind="failed",
            error=f"ncu profiled no launch of {', '.join(sorted(set(kernels)))}",
        )
        write_json_atomic(opts.output / "profile.json", report)
        return report, EXIT_NOTHING_VALID
    report = ProfileReport(ok=True, config=config, kernels=profiles, ncu_version=ncu_version(), command=cmd)
    write_json_atomic(opts.output / "profile.json", report)
    return report, EXIT_OK


def add_diagnosis(profiles: list[KernelProfile], output: NcuOutput, kernel: Path) -> None:
    """Each launch's rule findings, source hotspots (the first launch's) and diagnosis."""
    findings = parse_details_csv(output.details) if output.details else []
    try:
        source = kernel.read_text(encoding="utf-8", errors="replace")
    except OSError:
        source = ""
    hotspots = parse_source_csv(output.source, source, kernel.name) if output.source else []
    for i, p in enumerate(profiles):
        if i < len(findings):
            p.findings = findings[i]
        if i == 0:
            p.hotspots = hotspots
        p.diagnosis = diagnose(p)


def ncu_durations(opts: ProfileOptions, config: Config, runs: int = 5, warmup: int = 2) -> list[float]:
    """ncu's gpu__time_duration of the whole launch sequence, one value (ms) per run."""
    launches = _setup(ProfileOptions(**{**opts.__dict__, "config": config}))[4]
    n = launches_per_run(launches)
    output, failure, _ = run_ncu(
        opts,
        config,
        program_kernels(launches),
        [DURATION],
        warmup,
        runs,
        n,
        opts.output / f"durations_{abs(hash(json.dumps(config, sort_keys=True))) % 10**8}",
    )
    if failure is not None:
        raise RuntimeError(failure.error)
    profiles = parse_raw_csv(output.raw)
    per_run = [sum(p.duration_ms or 0.0 for p in profiles[i * n : (i + 1) * n]) for i in range(len(profiles) // n)]
    return per_run


# -- the runner ncu launches ------------------------------------------------------------


def run_config(
    problem_dir: Path,
    kernel_path: Path,
    spec_path: Path,
    config: Config,
    shape_name: str,
    warmup: int,
    runs: int,
    work_dir: Path,
    cache_dir: str | None,
    device: int | None,
    lineinfo: bool = False,
) -> int:
    """Set up the shape's inputs and run the launch sequence warmup + runs times. Exit code as the CLI.

    ``lineinfo``: compile with -lineinfo (the source view of the profile), and leave the source
    where the line information says it is, so ncu can import it."""
    problem = load_problem(problem_dir)
    ordinal = device if device is not None else problem.gpu_indices[0]
    problem = with_sm_count(problem, sm_count_for(None, ordinal, problem.compute_capability))
    spec = load_spec(spec_path, problem)
    kernel = KernelSource.read(kernel_path)
    shape = problem.shape(shape_name)
    info = query_device(ordinal)
    if info is None:
        print(f"no CUDA device {ordinal}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    from ktt.buffers import ShapeBuffers
    from ktt.device import Gpu
    from ktt.sequence import prepare

    work = WorkDir(work_dir)
    try:
        arch = target_arch(info.arch, spec, problem)
    except ProblemError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_BAD_INPUT
    ctx = CompileContext(problem, spec, kernel, work, arch)
    launches, scratch = launch_plan(spec, config, shape)
    problem_text = geometry_problems(launches)
    if problem_text:
        print(problem_text, file=sys.stderr)
        return EXIT_NOTHING_VALID
    request = ctx.request(config, shape)
    if lineinfo:
        request = dataclasses.replace(request, options=(*request.options, "-lineinfo"))
        with contextlib.suppress(OSError):
            Path(request.program_path).write_text(kernel.text, encoding="utf-8")
    out, _ = compile_cached(request, cache_dir)
    if not out.ok or out.cubin is None:
        print(out.first_error() or out.log, file=sys.stderr)
        return EXIT_NOTHING_VALID
    gpu = Gpu(ordinal)
    bufs = ShapeBuffers.create(gpu, problem, shape, (0,), 0, work.root)
    seq = prepare(gpu, bufs, out.cubin, launches, scratch)
    for _ in range(warmup + runs):
        bufs.restore(0)
        seq.reset_scratch()
        gpu.sync()
        seq.run(None)
        gpu.sync()
    seq.free()
    print(json.dumps({"ok": True, "runs": runs}))
    return EXIT_OK
