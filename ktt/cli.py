"""``python -m ktt check | tune | profile | validate | device``: the command line of the kernel tuning toolkit.

Exit codes (all commands): 0 success; 1 ran, but nothing valid (no valid configuration,
a compile check failed, a profile failed); 2 bad input (problem, spec, kernel or flags);
3 the environment cannot do it (no GPU, ncu missing or without counter permission);
4 an internal error in ktt. With ``--json`` every line on stdout is one JSON object of
``ktt.protocol``; without it the same information is printed for people.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ktt import strategies
from ktt.capped_read import parse_json
from ktt.protocol import (
    EXIT_BAD_INPUT,
    EXIT_ENVIRONMENT,
    EXIT_INTERNAL,
    CheckReport,
    DeviceReport,
    ErrorLine,
    LogLine,
    ProfileReport,
    Progress,
    TuneSummary,
    ValidateReport,
)
from ktt.reference_times import NO_BASELINE


def _emitter(as_json: bool) -> Any:
    def emit(obj: BaseModel) -> None:
        if as_json:
            print(obj.model_dump_json(), flush=True)
            return
        print(_human(obj), flush=True)

    return emit


def _human(obj: BaseModel) -> str:
    if isinstance(obj, Progress):
        best = f"best {obj.best_ms:.4g} ms {json.dumps(obj.best_config)}" if obj.best_ms is not None else "no valid yet"
        budget = f"/{obj.budget_s:g}s" if obj.budget_s else ""
        counts = f"{obj.evaluated}/{obj.space_size} evaluated, {obj.valid} valid"
        case = f" [{obj.case} {obj.case_index + 1}/{obj.cases_total}]" if obj.cases_total > 1 and obj.case else ""
        return f"[{obj.elapsed_s:7.1f}s{budget}] {obj.phase:9s}{case} {counts}, {best}"
    if isinstance(obj, LogLine):
        return f"{obj.level}: {obj.message}"
    if isinstance(obj, ErrorLine):
        return f"error: {obj.message}"
    if isinstance(obj, TuneSummary):
        return _tune_summary(obj)
    if isinstance(obj, CheckReport):
        head = "ok" if obj.ok else "FAILED"
        size = f"{obj.restricted_size} of {obj.space_size}" if obj.restricted_size is not None else str(obj.space_size)
        lines = [f"check {head}: {obj.sampled} sampled of {size} configurations, arch {obj.arch}"]
        if obj.case_sizes:
            lines.append("  other cases' restricted spaces: " + ", ".join(
                f"{name} {n}" if n is not None else f"{name} (too many to list)" for name, n in obj.case_sizes.items()
            ))  # fmt: skip
        for hit in obj.forbid:
            lines.append(f"  {obj.kernel_file}: {hit}")
        for c in obj.configs:
            mark = "ok  " if c.ok else "FAIL"
            roles = f" ({', '.join(c.roles)})" if c.roles else ""
            lines.append(f"  {mark} [{c.shape}] {json.dumps(c.config)}{roles}" + (f": {c.error}" if c.error else ""))
            for m in c.instruction_mix:
                counts = ", ".join(f"{k} {v}" for k, v in m.mix.counts.items())
                lines.append(f"       {m.kernel} ({m.isa}): {m.mix.total} instructions: {counts}")
            if c.mix_note and not c.instruction_mix:
                lines.append(f"       {c.mix_note}")
            for d in c.diagnostics[:5]:
                where = f"{d.file}:{d.line}" + (f":{d.column}" if d.column else "") if d.line else d.file
                lines.append(f"       {where}: {d.severity}: {d.message}")
        if obj.missing_kernels:
            lines.append(f"  missing kernels: {', '.join(obj.missing_kernels)}")
        lines += [f"  not checked: {e}" for e in obj.requested_errors]
        if obj.message:
            lines.append(obj.message)
        return "\n".join(lines)
    if isinstance(obj, ValidateReport):
        head = "valid" if obj.ok else "NOT valid"
        lines = [f"validate {json.dumps(obj.config)}: {head}" + (f" ({obj.seconds:.1f} s)" if obj.seconds else "")]
        for r in obj.shapes:
            v = r.validation
            detail = r.error or ""
            if v is not None and v.samples:
                from ktt.mismatch import describe

                detail += f" [{v.bad_count}/{v.checked} wrong; {describe(v.samples)}]"
            lines.append(f"  [{r.shape}] {r.status}" + (f": {detail}" if detail else ""))
        if obj.message:
            lines.append(obj.message)
        return "\n".join(lines)
    if isinstance(obj, DeviceReport):
        from ktt.device_table import device_lines

        return "\n".join(device_lines(obj))
    if isinstance(obj, ProfileReport):
        if not obj.ok:
            return f"profile failed ({obj.error_kind}): {obj.error}"
        lines = [f"profile of {json.dumps(obj.config)} ({obj.ncu_version})"]
        for k in obj.kernels:
            lines.append(f"kernel {k.kernel} (launch {k.launch_index}): {k.roofline}, {k.duration_ms} ms")
            if k.diagnosis is not None:
                from ktt.diagnosis import diagnosis_lines

                lines += [f"  {line}" for line in diagnosis_lines(k.diagnosis)]
            lines += [f"  rule {f.rule}: {f.text}" + (f" (est. {f.speedup_pct:.0f}%)" if f.speedup_pct else "")
                      for f in k.findings]  # fmt: skip
            lines += [f"  hotspot {h.file}:{h.line} {h.share:.0%}: {h.source}" for h in k.hotspots]
            for m in k.metrics:
                lines.append(f"  {m.section:15s} {m.label:36s} {m.value} {m.unit}")
        return "\n".join(lines)
    return obj.model_dump_json()


def _case_table(obj: TuneSummary) -> list[str]:
    """One row per scored shape: its best, its reference (and where that came from), its speedup."""
    rows = [("case", "status", "best", "reference", "speedup", "budget", "valid/evaluated")]
    for c in obj.cases:
        ref = f"{c.reference_ms:.4g} ms ({c.reference_source})" if c.reference_ms is not None else "-"
        if c.reference_source == NO_BASELINE:
            ref = NO_BASELINE
        rows.append(
            (
                c.name,
                c.status,
                f"{c.time_ms:.4g} ms" if c.time_ms is not None else "-",
                ref,
                f"{c.speedup:.3g}x" if c.speedup else "-",
                f"{c.budget_s:g} s" if c.budget_s is not None else "-",
                f"{c.valid}/{c.evaluated}",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = ["  " + "  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    out += [f"  {c.name}: {c.error}" for c in obj.cases if c.error and c.status != "ok"]
    return out


def _tune_summary(obj: TuneSummary) -> str:
    lines = [
        f"problem {obj.problem}: {obj.evaluated} configurations evaluated in {obj.wall_s:.1f} s "
        f"({obj.strategy}), {obj.valid} valid; by status {obj.by_status}"
    ]
    if obj.best:
        shape = f" [{obj.best.shape}]" if len(obj.cases) > 1 else ""
        lines.append(
            f"best{shape}: {obj.best.time_ms:.4g} ms (min {obj.best.min_ms:.4g}, max {obj.best.max_ms:.4g}, "
            f"{obj.best.repeats} repeats) {json.dumps(obj.best.config)}"
        )
    if obj.speedup:
        lines.append(
            f"speedup over the reference ({obj.reference_ms:.4g} ms, {obj.reference_source}): {obj.speedup:.3g}x"
        )
    elif obj.reference_source == NO_BASELINE:
        lines.append("speedup: none (no baseline: null in reference_time.json)")
    if len(obj.cases) > 1:
        lines += _case_table(obj)
        if obj.score is not None:
            lines.append(f"score (geometric mean of the per-case speedups): {obj.score:.3g}")
        elif any(c.reference_source == NO_BASELINE for c in obj.cases):
            lines.append("score: none (a case has no baseline: null in reference_time.json)")
    lines += [f"warning: {w}" for w in obj.warnings]
    if obj.message:
        lines.append(obj.message)
    lines.append(f"results: {obj.results_file}")
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m ktt", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--problem", required=True, type=Path, help="problem directory (problem.yaml, inputs.yaml)")
        p.add_argument("--kernel", required=True, type=Path, help="the kernel source (kernels.cu)")
        p.add_argument("--spec", required=True, type=Path, help="the tuning spec (tuning.yaml)")
        p.add_argument("--json", action="store_true", help="print JSON lines (ktt.protocol) instead of text")
        p.add_argument(
            "--cache-dir", type=Path, default=None, help="compile cache (default $KTT_CACHE_DIR or ~/.cache/ktt)"
        )

    c = sub.add_parser("check", help="compile-check a sample of configurations (no GPU needed)")
    common(c)
    c.add_argument("--sample", type=int, default=4, help="configurations to compile (default 4)")
    c.add_argument(
        "--arch",
        default=None,
        help="the GPU's arch, e.g. sm_90 (default: the GPU, else the problem, else sm_90); "
        "the target is its arch-specific variant (sm_90a) unless tuning.yaml or problem.yaml names one",
    )
    c.add_argument("--seed", type=int, default=0)
    c.add_argument(
        "--configs",
        type=_config_list,
        default=None,
        help='configurations to check besides the sample, as JSON: [{"BX": 16, "TILE": 4}, ...] (at most 6)',
    )
    c.add_argument(
        "--sm-count",
        type=int,
        default=None,
        help="the value of SM_COUNT for kernels and expressions (default: the GPU, else the arch's GPU)",
    )

    t = sub.add_parser("tune", help="search the space on the GPU; write results.jsonl and summary.json")
    common(t)
    t.add_argument("--output", required=True, type=Path, help="output directory")
    t.add_argument(
        "--duration",
        type=float,
        default=None,
        help="wall-clock budget in seconds for every case (default: spec duration_s, else the case's duration_s, "
        "else problem tuning.duration_s; 0 = none)",
    )
    t.add_argument(
        "--problem-budget",
        action="store_true",
        help="budgets from problem.yaml only (a case's duration_s, else tuning.duration_s): the spec's duration_s "
        "is ignored and its max_configs only caps the count",
    )
    t.add_argument("--timeout", dest="duration", type=float, help=argparse.SUPPRESS)
    t.add_argument("--max-configs", type=int, default=None, help="stop after this many configurations")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--device", type=int, default=None, help="CUDA device ordinal (default: problem gpu.index)")
    t.add_argument(
        "--reference-time",
        type=Path,
        default=None,
        help="reference_time.json: its values are used, a null means no baseline (never timed, no speedup); "
        "the shapes it does not name are measured and filled in (default PROBLEM/output/)",
    )
    t.add_argument(
        "--strategy",
        choices=strategies.names(),
        default=strategies.DEFAULT,
        metavar="NAME",
        help=f"search strategy (default {strategies.DEFAULT}); {strategies.help_text()}",
    )
    t.add_argument(
        "--config-timeout",
        type=float,
        default=10.0,
        help="seconds a configuration may go without progress before it is killed (default 10)",
    )
    t.add_argument("--compile-workers", type=int, default=None, help="compiler processes (default: CPU cores - 1)")
    t.add_argument("--keep-work", action="store_true", help="keep reference arrays and cubins under OUTPUT/work")

    p = sub.add_parser("profile", help="Nsight Compute on one configuration")
    common(p)
    p.add_argument("--output", required=True, type=Path)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--config", type=str, help="the configuration as JSON, e.g. '{\"BX\": 16}'")
    g.add_argument("--from-summary", type=Path, help="profile the best configuration of a tune summary.json")
    p.add_argument("--shape", default=None, help="problem shape (default: the primary one, the first case)")
    p.add_argument("--device", type=int, default=None)

    v = sub.add_parser("validate", help="run one configuration for correctness only (both input sets, no timing)")
    common(v)
    v.add_argument("--output", required=True, type=Path, help="work directory")
    v.add_argument("--config", type=str, default=None, help="the configuration as JSON (default: the first)")
    v.add_argument("--device", type=int, default=None)
    v.add_argument("--timeout", type=float, default=10.0, help="seconds one run may go without progress")

    d = sub.add_parser("device", help="the device table: limits, measured copy bandwidth, peak rates")
    d.add_argument("--device", type=int, default=0)
    d.add_argument("--json", action="store_true")

    r = sub.add_parser("run-config")  # the program ncu profiles; not for people
    common(r)
    r.add_argument("--config", required=True)
    r.add_argument("--shape", default="default")
    r.add_argument("--warmup", type=int, default=1)
    r.add_argument("--runs", type=int, default=1)
    r.add_argument("--work", type=Path, required=True)
    r.add_argument("--device", type=int, default=None)
    r.add_argument("--lineinfo", action="store_true")
    return ap


def _config_list(text: str) -> list[dict]:
    """--configs: a JSON list of objects (or one object)."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    value = [value] if isinstance(value, dict) else value
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise argparse.ArgumentTypeError('a JSON list of objects, e.g. [{"BX": 16}]')
    return value


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    emit = _emitter(args.json)
    try:
        if args.command == "check":
            from ktt.check import check_files, exit_code

            report, code = check_files(
                args.problem,
                args.kernel,
                args.spec,
                sample=args.sample,
                arch=args.arch,
                seed=args.seed,
                cache_dir=args.cache_dir,
                configs=args.configs,
                sm_count=args.sm_count,
            )
            emit(report)
            return exit_code(code)  # ends the process at once when a cut-off compile still runs
        if args.command == "tune":
            from ktt.tune import TuneOptions, tune

            missing = strategies.unavailable(args.strategy)
            if missing:
                emit(ErrorLine(message=missing, exit_code=EXIT_ENVIRONMENT))
                return EXIT_ENVIRONMENT

            opts = TuneOptions(
                problem_dir=args.problem,
                kernel=args.kernel,
                spec=args.spec,
                output=args.output,
                duration_s=args.duration,
                max_configs=args.max_configs,
                seed=args.seed,
                device=args.device,
                reference_time=args.reference_time,
                strategy=args.strategy,
                config_timeout_s=args.config_timeout,
                cache_dir=args.cache_dir,
                compile_workers=args.compile_workers,
                keep_work=args.keep_work,
                problem_budget=args.problem_budget,
            )
            return tune(opts, emit)
        if args.command == "profile":
            from ktt.profile import ProfileOptions, profile

            try:
                config = parse_json(args.config, strict=True) if args.config else None
            except ValueError as exc:
                emit(ProfileReport(ok=False, error=f"--config: not JSON ({exc})", error_kind="failed"))
                return EXIT_BAD_INPUT
            report, code = profile(
                ProfileOptions(
                    problem_dir=args.problem,
                    kernel=args.kernel,
                    spec=args.spec,
                    output=args.output,
                    config=config,
                    from_summary=args.from_summary,
                    shape=args.shape,
                    device=args.device,
                    cache_dir=args.cache_dir,
                )
            )
            emit(report)
            return code
        if args.command == "validate":
            from ktt.validate_one import ValidateOptions, parse_config, validate

            try:
                config = parse_config(args.config)
            except ValueError as exc:
                emit(ValidateReport(ok=False, message=f"--config: {exc}"))
                return EXIT_BAD_INPUT
            report, code = validate(
                ValidateOptions(
                    problem_dir=args.problem, kernel=args.kernel, spec=args.spec, output=args.output,
                    config=config, device=args.device, cache_dir=args.cache_dir, timeout_s=args.timeout,
                )
            )  # fmt: skip
            emit(report)
            return code
        if args.command == "device":
            from ktt.device_table import describe
            from ktt.gpu_lock import hold
            from ktt.toolkit import query_device

            info = query_device(args.device)
            if info is None:
                emit(ErrorLine(message=f"no CUDA device {args.device} (no driver, or no such GPU)",
                               exit_code=EXIT_ENVIRONMENT))  # fmt: skip
                return EXIT_ENVIRONMENT
            with hold(args.device, "ktt device (the device table)", uuid=info.uuid):
                emit(describe(args.device))
            return 0
        if args.command == "run-config":
            from ktt.profile import run_config

            try:
                run_values = parse_json(args.config, strict=True)
            except ValueError as exc:
                emit(ErrorLine(message=f"--config: not JSON within bounds ({exc})", exit_code=EXIT_BAD_INPUT))
                return EXIT_BAD_INPUT
            return run_config(
                args.problem,
                args.kernel,
                args.spec,
                run_values,
                args.shape,
                args.warmup,
                args.runs,
                args.work,
                str(args.cache_dir) if args.cache_dir else None,
                args.device,
                lineinfo=args.lineinfo,
            )
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # an internal error: say so, with the trace on stderr
        traceback.print_exc(file=sys.stderr)
        emit(ErrorLine(message=f"internal error: {type(exc).__name__}: {exc}", exit_code=EXIT_INTERNAL))
        return EXIT_INTERNAL
    return EXIT_BAD_INPUT
