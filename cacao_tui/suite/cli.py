"""``cacao suite DIR... [flags]`` and ``cacao collect DIR... [--output PREFIX]``.

Every mistake (a flag, a directory that is not a problem, a cluster that cannot be used)
is one line on stderr and exit 2, before any run starts or any file is written.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from cacao_tui.cluster.spec import ClusterError, parse_cluster, require_ray
from cacao_tui.flag_bounds import BY_FLAG, GPU_ORDINAL
from cacao_tui.suite import fast_p
from cacao_tui.suite.collect import collect_row, render_table, write_tables
from cacao_tui.suite.collect_runs import experiment_runs, is_problem
from cacao_tui.suite.models import MODELS_DIR, model_list, model_runs
from cacao_tui.suite.runner import run_suite
from cacao_tui.suite.slots import SlotPool, cluster_slots, dry_run_slots, local_gpu_slots
from cacao_tui.ui.formatting import safe_text
from ktt.problem import ProblemError, load_problem

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
DEFAULT_OUT = "suite_results"
DRY_RUN_PARALLEL = 2  # runs at once in a dry run without --jobs: no GPU bounds them


class SuiteUsage(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise SuiteUsage(message)


def _bounded(flag: str) -> Callable[[str], int | float]:
    return BY_FLAG[flag].argparse_type()


def suite_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="cacao suite", description="Run many problems, each a normal run in its own output/.")
    p.add_argument("dirs", nargs="+", metavar="DIR", help="problem directories")
    p.add_argument("--cluster", metavar="WHERE", help="local (default: one local GPU per run) or ray[://ADDRESS]")
    p.add_argument("--gpus", metavar="LIST", help="local GPUs to spread the runs over, e.g. 0,1 (default: all)")
    p.add_argument("--jobs", type=_bounded("--jobs"), metavar="N", help="runs at once (default: the GPUs there are)")
    p.add_argument("--output", metavar="DIR", default=DEFAULT_OUT, help=f"logs and tables (default ./{DEFAULT_OUT})")
    for flag in ("--provider", "--model", "--max-iter", "--max-depth", "--path-budget", "--strategies", "--timeout",
                 "--budget-usd"):  # fmt: skip
        kind = _bounded(flag) if flag in BY_FLAG else str  # numbers: the bounds of a run's own flags
        p.add_argument(flag, type=kind, help="passed to each run")
    p.add_argument("--models", metavar="A,B", help="run every problem once per model, each in a copy under "
                   f"OUTPUT/{MODELS_DIR}/MODEL/ (an experiments folder for cacao collect)")  # fmt: skip
    p.add_argument("--dry-run", action="store_true", help="passed to each run")
    p.add_argument("--resume", action="store_true", help="passed to each run")
    fast_p.add_flag(p)
    return p


def collect_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="cacao collect", description="Table the results of problems' runs (CSV and Markdown).")
    p.add_argument("dirs", nargs="+", metavar="DIR", help="problem directories, or experiments folders")
    p.add_argument("--output", metavar="PREFIX",
                   help=f"write PREFIX.csv and PREFIX.md (default {DEFAULT_OUT}/summary, made if missing)")  # fmt: skip
    fast_p.add_flag(p)
    return p


def _problems(dirs: list[str]) -> list[Path]:
    found: list[Path] = []
    for d in dirs:
        path = Path(d).expanduser()
        if not path.is_dir():
            raise SuiteUsage(f"{d}: no such problem directory")
        if not (path / "problem.yaml").is_file():
            raise SuiteUsage(f"{d}: not a problem directory (no problem.yaml)")
        resolved = path.resolve()
        if resolved in found:
            raise SuiteUsage(f"{d}: given twice (one run per problem directory)")
        found.append(resolved)
    return found


def _gpu_list(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise SuiteUsage(f"--gpus: expected a list like 0,1, got {text!r}") from None
    if not values or any(not 0 <= v <= GPU_ORDINAL.high for v in values) or len(set(values)) != len(values):
        raise SuiteUsage(f"--gpus: expected distinct GPU numbers like 0,1, got {text!r}")
    return values


def _pool(args: argparse.Namespace) -> SlotPool:
    cluster = parse_cluster(args.cluster)
    if cluster.is_ray:
        if args.gpus:
            raise SuiteUsage("--gpus picks local GPUs; with --cluster ray the cluster places each job")
        require_ray()
        from cacao_tui.cluster.ray_backend import connect

        gpus = int(connect(cluster).get("GPU", 0))
        count = args.jobs or max(gpus, 1 if args.dry_run else 0)
        if count < 1:
            raise ClusterError(f"--cluster: {cluster.describe()} has no GPU; use --dry-run to check without one")
        return SlotPool(cluster_slots(args.cluster, count))
    if args.gpus:
        indices = _gpu_list(args.gpus)
    else:
        from cacao_tui.engine.gpu import detect_gpus

        indices = [g.index for g in detect_gpus()]
    if args.dry_run and not indices:
        return SlotPool(dry_run_slots(args.jobs or DRY_RUN_PARALLEL))
    if not indices:
        raise SuiteUsage("no NVIDIA GPU found (nvidia-smi lists none); use --dry-run or --cluster ray")
    if args.jobs:
        indices = indices[: args.jobs]
    return SlotPool(local_gpu_slots(indices))


def _run_flags(args: argparse.Namespace) -> list[str]:
    flags: list[str] = []
    for name in ("provider", "model", "max_iter", "max_depth", "path_budget", "strategies", "timeout", "budget_usd"):
        value = getattr(args, name)
        if value is not None:
            flags += [f"--{name.replace('_', '-')}", f"{value:g}" if isinstance(value, float) else str(value)]
    flags += ["--dry-run"] if args.dry_run else []
    flags += ["--resume"] if args.resume else []
    return flags


def _check_problems(problems: list[Path]) -> None:
    for p in problems:
        load_problem(p)  # ProblemError: one line naming the file and field


def suite_main(argv: Sequence[str]) -> int:
    args = suite_parser().parse_args(list(argv))
    if (why := fast_p.flag_error(args.fast_p)) is not None:
        raise SuiteUsage(why)
    problems = _problems(args.dirs)
    parse_cluster(args.cluster)  # every flag is checked before any problem is read
    if args.gpus:
        _gpu_list(args.gpus)
    if args.provider is not None:
        from cacao_tui.llm.registry import PROVIDER_NAMES, canonical_name

        name = canonical_name(args.provider)
        if name not in PROVIDER_NAMES:
            raise SuiteUsage(f"--provider: unknown provider {args.provider!r}")
        args.provider = name
    models = None
    if args.models is not None:
        if args.model is not None:
            raise SuiteUsage("--model and --models: give one (--models runs each problem once per model)")
        try:
            models = model_list(args.models)
        except ValueError as exc:
            raise SuiteUsage(str(exc)) from None
    _check_problems(problems)
    pool = _pool(args)
    out = Path(args.output).expanduser()
    if out.exists() and not out.is_dir():
        raise SuiteUsage(f"--output: {out}: not a directory")
    print(f"suite: {len(problems)} problem(s), {pool.size} at a time ({', '.join(s.label for s in pool.slots)})")
    if models is not None:
        sweep = model_runs(problems, models, out)
        print(f"suite: {len(models)} model(s): each problem runs in a copy under {out / MODELS_DIR}/")
        runs = asyncio.run(run_suite([s.problem for s in sweep], pool, _run_flags(args), out,
                                     names=[s.name for s in sweep], own_flags=[["--model", s.model] for s in sweep]))
        rows = [collect_row(s.problem, experiment=s.model) for s in sweep]
    else:
        runs = asyncio.run(run_suite(problems, pool, _run_flags(args), out))
        rows = [collect_row(r.problem) for r in runs]
    print(render_table(rows))
    replaced = _replaces(out / "summary")
    csv_path, md_path = write_tables(rows, out / "summary")
    print(f"suite: wrote {csv_path} and {md_path}{replaced}")
    fast_p.report(args.fast_p, [r.problem for r in runs], out / "summary")
    failed = [r.name for r in runs if r.exit_code != 0]
    if failed:
        print(safe_text(f"suite: {len(failed)} run(s) did not succeed: {', '.join(failed)} (see {out / 'logs'})"))
    return EXIT_FAILED if failed else EXIT_OK


def _collect_targets(dirs: list[str]) -> list[tuple[Path, str]]:
    """(problem directory, experiment) for each argument: a problem directory, or every run of an
    experiments folder (suite/collect_runs.py)."""
    found: list[tuple[Path, str]] = []
    for d in dirs:
        path = Path(d).expanduser()
        if path.is_dir() and not is_problem(path):
            runs = experiment_runs(path)
            if not runs:
                raise SuiteUsage(f"{d}: neither a problem directory nor an experiments folder (no problem.yaml "
                                 "in it or in its folders)")  # fmt: skip
        else:
            runs = [(p, "") for p in _problems([d])]
        for run in runs:
            if any(run[0] == f[0] for f in found):
                raise SuiteUsage(f"{run[0]}: given twice (one row per problem directory)")
            found.append(run)
    return found


def _replaces(prefix: Path) -> str:
    """What writing PREFIX.csv / .md replaces, said rather than done silently (a suite's summary)."""
    there = [p.name for p in (prefix.with_name(prefix.name + ".csv"), prefix.with_name(prefix.name + ".md"))
             if p.exists()]  # fmt: skip
    return f" (replacing the earlier {' and '.join(there)}; --output PREFIX writes elsewhere)" if there else ""


def collect_main(argv: Sequence[str]) -> int:
    args = collect_parser().parse_args(list(argv))
    if (why := fast_p.flag_error(args.fast_p)) is not None:
        raise SuiteUsage(why)
    targets = _collect_targets(args.dirs)
    if args.output is None:  # the default folder is made (as cacao suite does); a named one must exist
        prefix = Path(DEFAULT_OUT) / "summary"
        if prefix.parent.exists() and not prefix.parent.is_dir():
            raise SuiteUsage(f"{prefix.parent}: not a directory (give --output PREFIX)")
        prefix.parent.mkdir(exist_ok=True)
    else:
        prefix = Path(args.output).expanduser()
        if not prefix.parent.is_dir():
            raise SuiteUsage(f"--output: {prefix.parent}: no such directory")
    rows = [collect_row(p, experiment) for p, experiment in targets]
    print(render_table(rows))
    replaced = _replaces(prefix)
    csv_path, md_path = write_tables(rows, prefix)
    print(f"collect: wrote {csv_path} and {md_path}{replaced}")
    fast_p.report(args.fast_p, [p for p, _ in targets], prefix)
    return EXIT_OK


def main(words: Sequence[str]) -> int:
    """``words[0]`` is "suite" or "collect"."""
    command, rest = words[0], list(words[1:])
    try:
        return suite_main(rest) if command == "suite" else collect_main(rest)
    except SuiteUsage as exc:
        print(safe_text(f"cacao {command}: error: {exc}"), file=sys.stderr)
        return EXIT_USAGE
    except ProblemError as exc:
        print(safe_text(exc.line()), file=sys.stderr)
        return EXIT_USAGE
    except ClusterError as exc:
        print(safe_text(f"cacao {command}: {exc}"), file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        print(safe_text(f"cacao {command}: {where}{exc.strerror or exc}"), file=sys.stderr)
        return EXIT_FAILED
