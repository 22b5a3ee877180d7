"""The ``cacao`` command: flags -> one mode.

Modes: a run (the full-screen app, or ``--no-ui``; handed to ``cacao_tui.launch`` as a ``RunRequest``),
the home screen (no ``--dir``: the problems under ``--problems``, default ./problems),
``--check``, ``--best``, ``--clone NAME`` and ``--prune-archives``. Every user mistake is
one line on stderr (``FILE: FIELD: what is wrong`` for problem files, ``cacao: error: ...``
for flags), maybe a hint line, exit status 2, no traceback, and nothing written.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from cacao_tui import __version__
from cacao_tui.llm.registry import PROVIDER_NAMES, canonical_name, names_for_help
from cacao_tui.llm.timeouts import LLM_TIMEOUT_ENV
from cacao_tui.problem import Problem, ProblemError, load_problem
from cacao_tui.problem.summary import human_bytes, render_check
from cacao_tui.run_request import RunRequest
from cacao_tui.settings import DEFAULTS
from cacao_tui.steer_flags import EPILOG_LINES as EPILOG_STEERING
from cacao_tui.steer_flags import add_steering_flags, steer, steering_mode
from cacao_tui.store.archive import ArchiveError, archived_runs
from cacao_tui.store.clone import CloneError, clone_problem
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.prune import prune_archives
from cacao_tui.store.results import load_results, render_results
from cacao_tui.ui.formatting import safe_json_line, safe_text, safe_value
from ktt.problem.errors import display_path

EXIT_OK = 0
EXIT_FAILED = 1  # the operation itself failed (a file system error)
EXIT_USAGE = 2  # a user mistake: a flag, a problem file, a name
EXIT_INTERRUPTED = 130

# The provider registry (no SDK is imported by reading it): names, aliases, --help text.
PROVIDERS = PROVIDER_NAMES
ENGINE_MODULE = "cacao_tui.launch"
MODES = ("check", "clone", "best", "prune_archives")
DEFAULT_PROBLEMS = "problems"  # the home screen's folder when --problems is not given


class UsageError(Exception):
    """A bad flag or flag value; ``str()`` is the one line to print."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message, hint="run 'cacao --help' for the flags")


def _whole(name: str, minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    parse.__name__ = name
    return parse


def _positive_number(text: str) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def _gpu_list(text: str) -> list[int]:
    """'0,1' -> [0, 1]: distinct CUDA device ordinals."""
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or any(not p for p in parts):
        raise argparse.ArgumentTypeError(f"expected device ordinals separated by commas, like 0,1; got {text!r}")
    gpus = []
    for p in parts:
        if not p.isdigit():
            raise argparse.ArgumentTypeError(f"{p!r} is not a device ordinal (0, 1, ...)")
        gpus.append(int(p))
    if len(set(gpus)) != len(gpus):
        raise argparse.ArgumentTypeError(f"a GPU is listed twice in {text!r}")
    return gpus


def _provider(text: str) -> str:
    name = canonical_name(text)
    if name is None:
        raise argparse.ArgumentTypeError(f"unknown provider {text!r}; choose one of {names_for_help()}")
    return name


def _non_empty(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text.strip()


EPILOG = """\
modes (one at a time; without one, cacao runs the optimisation):
  (no --dir)         the home screen: the problems under --problems DIR (default ./problems)
  --check            validate the problem and print what was understood
  --best             print the best result and a per-branch table
  --clone NAME       copy the problem definition to a sibling directory NAME
  --prune-archives   remove regenerable files (caches, binaries, dumps) under archive/

""" + EPILOG_STEERING + """
exit status: 0 success; 1 the run found nothing valid or an operation failed;
2 a mistake in the flags or the problem files; 130 interrupted.

examples:
  cacao
  cacao --problems ~/kernels
  cacao --dir problems/mmul --check
  cacao --dir problems/mmul
  cacao --dir problems/mmul --no-ui --max-iter 3 --max-depth 1
  cacao --dir problems/mmul --branch b2-strip --message "try 8 rows per thread"
  cacao --dir problems/mmul --provider replay --no-ui --dry-run
  cacao --dir problems/mmul --best
"""


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="cacao",
        description="An LLM agent that searches for fast CUDA kernels for a problem directory.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    p.add_argument("--version", action="version", version=f"cacao {__version__}")
    p.add_argument("--dir", metavar="DIR", help="the problem directory (without it: the home screen)")
    p.add_argument(
        "--problems",
        metavar="DIR",
        help=f"the home screen's folder of problems (default ./{DEFAULT_PROBLEMS})",
    )

    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="validate the problem, print a summary and exit")
    mode.add_argument("--best", action="store_true", help="show the results of the last run and exit")
    mode.add_argument("--clone", metavar="NAME", type=_non_empty, help="copy the problem to a sibling NAME and exit")
    mode.add_argument(
        "--prune-archives", action="store_true", help="remove regenerable files from archive/ (with --dry-run: list)"
    )

    run = p.add_argument_group("run")
    run.add_argument("--resume", action="store_true", help="continue the interrupted run in output/")
    run.add_argument("--no-clean", action="store_true", help="do not archive output/ before a fresh run")
    run.add_argument(
        "--max-iter",
        type=_whole("max-iter", 1),
        metavar="N",
        help=f"iterations per branch (default {DEFAULTS.max_iter})",
    )
    run.add_argument(
        "--max-depth",
        type=_whole("max-depth", 1),
        metavar="N",
        help=f"levels of branches: 1 = no sub-branches (default {DEFAULTS.max_depth}: roots and their children)",
    )
    run.add_argument(
        "--path-budget",
        type=_whole("path-budget", 0),
        metavar="N",
        help="iterations per root-to-leaf path (default 0: off)",
    )
    run.add_argument(
        "--strategies",
        type=_whole("strategies", 1),
        metavar="N",
        help=f"strategies the master proposes (default {DEFAULTS.n_strategies})",
    )
    run.add_argument(
        "--timeout",
        type=_positive_number,
        metavar="SECONDS",
        help="tuning budget of every case in every iteration, replacing each case's duration_s and "
        "tuning.duration_s (default: a case's duration_s, else tuning.duration_s, else 20)",
    )
    run.add_argument(
        "--gpus", type=_gpu_list, metavar="LIST", help="CUDA devices to use, e.g. 0,1 (default: gpu.index)"
    )
    run.add_argument(
        "--cluster",
        metavar="WHERE",
        help="where GPU jobs run: local (default, this machine's GPUs) or ray[://ADDRESS] (docs/CLUSTER.md)",
    )
    run.add_argument(
        "--dry-run", action="store_true", help="everything but GPU execution (kernels are compile-checked)"
    )
    run.add_argument("--no-ui", action="store_true", help="print progress lines instead of the full-screen app")
    run.add_argument("--json", action="store_true", help="print the event stream as JSON lines (with --best: results)")
    run.add_argument(
        "--export", metavar="FILE", help="with --best: write the results to FILE (.csv or .md) instead of showing them"
    )
    run.add_argument("--single-shot", action="store_true", help="author kernels with single calls, not the tool loop")

    llm = p.add_argument_group("LLM")
    llm.add_argument("--provider", type=_provider, metavar="NAME", help=f"one of {names_for_help()}")
    llm.add_argument("--model", type=_non_empty, metavar="MODEL", help="model name (default: the provider's default)")
    llm.add_argument(
        "--budget-usd", type=_positive_number, metavar="X", help="stop new LLM calls once X dollars are spent"
    )
    llm.add_argument("--from", dest="from_path", metavar="PATH", help="recorded session to replay (--provider replay)")
    llm.add_argument(
        "--llm-timeout",
        type=_positive_number,
        metavar="SECONDS",
        help=(
            f"limit of one LLM request, connect to last byte (default: {LLM_TIMEOUT_ENV}, else "
            f"{DEFAULTS.llm_timeout_s:g}); a call with its retries gets {DEFAULTS.llm_call_timeout_factor:g}x that"
        ),
    )

    add_steering_flags(p)  # --branch NAME --message/--revert/--delete/--decision (cacao_tui/steer_flags.py)
    p.add_argument("-v", "--verbose", action="store_true", help="show warnings (unknown keys, ...) and more detail")
    return p


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse and validate flags; ``args.dir`` becomes an absolute Path of an existing directory."""
    args = build_parser().parse_args(argv)
    args.mode = next((m for m in MODES if getattr(args, m)), "run")
    if steering_mode(args, UsageError):
        args.mode = "steer"
    if args.export is not None and args.mode != "best":
        raise UsageError("--export writes the results of --best; give --best --export FILE")
    if args.from_path is not None:
        if args.provider != "replay":
            raise UsageError("--from names a recorded session; it needs --provider replay")
        source = Path(args.from_path).expanduser()
        if not source.exists():
            raise UsageError(f"--from: {args.from_path}: no such file or directory")
        args.from_path = source.resolve()
    if args.cluster is not None:
        from cacao_tui.cluster.spec import ClusterError, parse_cluster, require_ray

        try:
            if parse_cluster(args.cluster).is_ray:
                require_ray()
        except ClusterError as exc:
            raise UsageError(str(exc)) from None
    if args.dir is None:
        return _home_args(args)
    if args.problems is not None:
        raise UsageError("--problems is the home screen's folder; it does not go with --dir")
    raw = Path(args.dir).expanduser()
    if not raw.exists():
        raise ProblemError(raw, "", "no such directory", hint="--dir takes a problem directory, e.g. problems/mmul")
    if not raw.is_dir():
        raise ProblemError(raw, "", "not a directory (--dir takes a problem directory)")
    args.dir = raw.resolve()
    return args


def _home_args(args: argparse.Namespace) -> argparse.Namespace:
    """No --dir: the home screen, which takes no other flag than --problems (and -v)."""
    if args.mode != "run":
        flag = "branch" if args.mode == "steer" else args.mode.replace("_", "-")
        raise UsageError(f"--{flag} needs --dir (the problem directory)")
    defaults = vars(build_parser().parse_args([]))
    given = vars(args).items()
    extra = [k for k, v in given if k in defaults and k not in ("problems", "verbose") and v != defaults[k]]
    if extra:
        raise UsageError(f"--{extra[0].replace('_', '-')} needs --dir (the home screen takes only --problems)")
    explicit = args.problems is not None
    folder = Path(args.problems if explicit else DEFAULT_PROBLEMS).expanduser()
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--problems: {folder}: not a directory")
    if explicit and not folder.exists():
        raise UsageError(f"--problems: {folder}: no such directory")
    args.problems = folder.resolve()
    args.mode = "home"
    return args


def _home(args: argparse.Namespace) -> int:
    """The home screen: a terminal app, so a pipe or a script gets one line instead."""
    if not (sys.stdout.isatty() and sys.stdin.isatty()):
        raise UsageError("the home screen needs a terminal; give --dir DIR to work on one problem")
    from cacao_tui.ui.home.loop import run_home  # textual only when the app is used

    return run_home(args.problems)


def _require_problem_yaml(directory: Path) -> None:
    if not (directory / "problem.yaml").is_file():
        raise ProblemError(directory / "problem.yaml", "", "file not found (--dir is not a problem directory)")


def _check(args: argparse.Namespace) -> int:
    """Load, then prove it will run (compile/build the reference and initialisers, import ref.py); writes nothing."""
    from ktt.problem.preflight import preflight  # NVRTC and the host compilers: only when checking

    problem = load_problem(args.dir)
    steps = preflight(problem)
    print(safe_text(render_check(problem, steps), keep_newlines=True))  # names, descriptions: problem files
    n = len(problem.warnings)
    note = f" ({n} warning{'s' if n != 1 else ''})" if n else ""
    print(f"\nOK: {display_path(problem.directory)} is a valid problem{note}")
    return EXIT_OK


def _best(args: argparse.Namespace) -> int:
    """The results table, or the app's results view when not headless and on a terminal."""
    _require_problem_yaml(args.dir)
    layout = RunLayout(args.dir)
    loaded = load_results(layout)
    if loaded.results is None:
        archived = archived_runs(layout)
        more = ""
        if archived:
            latest = archived[-1][1]
            runs = f"{len(archived)} earlier run{'s are' if len(archived) != 1 else ' is'}"
            more = f"; {runs} archived (latest: archive/{latest.name})"
        print(f"{args.dir.name} has not been run yet: no results in output/{more}")
        return EXIT_OK
    if args.export is not None:
        from cacao_tui.store.results_export import ExportError, export_results

        try:
            written = export_results(loaded, layout, Path(args.export))
        except ExportError as exc:
            raise UsageError(str(exc)) from None
        print(f"exported the results to {display_path(written)}")
        return EXIT_OK
    if args.json:
        print("\n".join(safe_json_line(line) for line in loaded.results.model_dump_json(indent=2).splitlines()))
        return EXIT_OK
    if not args.no_ui and sys.stdout.isatty() and sys.stdin.isatty():
        from cacao_tui.ui.app import ResultsApp  # textual only when the app is used
        from cacao_tui.ui.sigterm import EXIT_SIGTERM

        view = ResultsApp(layout)
        view.run()
        return EXIT_SIGTERM if view.sigterm_received else EXIT_OK
    # Names, reasons and notes come from the run's files: shown terminal-safe.
    print(safe_text(render_results(safe_value(loaded), layout), keep_newlines=True))
    return EXIT_OK


def _clone(args: argparse.Namespace) -> int:
    _require_problem_yaml(args.dir)
    cloned = clone_problem(args.dir, args.clone)
    source, target = display_path(cloned.source), display_path(cloned.target)
    print(f"cloned {source} -> {target} ({cloned.files} files; output/ and archive/ not copied)")
    if cloned.renamed:
        print(f"problem.yaml: name: set to {args.clone}")
    return EXIT_OK


def _prune(args: argparse.Namespace) -> int:
    _require_problem_yaml(args.dir)
    report = prune_archives(args.dir, dry_run=args.dry_run)
    where = display_path(report.archive)
    if not report.archive.is_dir():
        print(f"nothing to prune: {where} does not exist")
        return EXIT_OK
    if not report.removed:
        print(f"nothing to prune: {where} holds no regenerable files")
        return EXIT_OK
    verb = "would free" if args.dry_run else "freed"
    n = len(report.removed)
    files = f"{n} regenerable file{'s' if n != 1 else ''}"
    print(f"{verb} {report.bytes_freed:,} bytes ({human_bytes(report.bytes_freed)}) in {files} under {where}")
    for run, size in sorted(report.per_run.items()):
        print(f"  {run}: {size:,} bytes ({human_bytes(size)})")
    if args.verbose or args.dry_run:
        for path, size in report.removed:
            print(f"  {'would remove' if args.dry_run else 'removed'} {display_path(path)} ({size:,} bytes)")
    return EXIT_OK


def load_engine() -> Callable[[RunRequest], int] | None:
    """The engine's entry point, or None when this build has no engine (never a fake run)."""
    try:
        module = importlib.import_module(ENGINE_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name in (ENGINE_MODULE, ENGINE_MODULE.rsplit(".", 1)[0]):
            return None
        raise
    return module.main


def run_request(args: argparse.Namespace, problem: Problem) -> RunRequest:
    """The typed hand-off to the launcher: the validated flags and the problem, loaded once."""
    return RunRequest(
        problem=problem,
        front_end="json" if args.json else "lines" if args.no_ui else "app",
        verbose=args.verbose,
        resume=args.resume,
        no_clean=args.no_clean,
        dry_run=args.dry_run,
        single_shot=args.single_shot,
        max_iter=args.max_iter,
        max_depth=args.max_depth,
        path_budget=args.path_budget,
        n_strategies=args.strategies,
        timeout_s=args.timeout,
        gpus=tuple(args.gpus) if args.gpus else None,
        cluster=args.cluster,
        provider=args.provider,
        model=args.model,
        budget_usd=args.budget_usd,
        replay_from=args.from_path,
        llm_timeout_s=args.llm_timeout,
    )


def _run(args: argparse.Namespace) -> int:
    problem: Problem = load_problem(args.dir)
    if args.verbose:
        for warning in problem.warnings:
            print(f"warning: {warning}", file=sys.stderr)
    if problem.reference.type == "python":
        from ktt.problem.preflight import import_step

        import_step(problem)  # ref.py imports in its own process before any LLM call, or the run stops here
    run_main = load_engine()
    if run_main is None:
        _error(
            "cacao: the optimisation engine is not available in this build; nothing was run",
            "--check, --best, --clone and --prune-archives work without it",
        )
        return EXIT_USAGE
    return run_main(run_request(args, problem))


HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {
    "check": _check,
    "best": _best,
    "clone": _clone,
    "prune_archives": _prune,
    "steer": steer,
    "home": _home,
}


def _error(line: str, hint: str | None = None) -> None:
    print(safe_text(line, keep_newlines=True), file=sys.stderr)  # may quote a file's text (a lock's holder)
    if hint:
        print(f"hint: {hint}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if words and words[0] in ("suite", "collect"):  # cacao suite DIR... / cacao collect DIR...
        from cacao_tui.suite.cli import main as suite_main

        return suite_main(words)
    try:
        args = parse_args(argv)
        if args.mode == "run":
            return _run(args)
        return _store_mode(args)
    except UsageError as exc:
        _error(f"cacao: error: {exc}", exc.hint)
        return EXIT_USAGE
    except ProblemError as exc:
        _error(exc.line(), exc.hint)
        return EXIT_USAGE
    except CloneError as exc:
        _error(f"cacao: {exc}")
        return EXIT_USAGE
    except ArchiveError as exc:
        _error(f"cacao: {exc}")
        return EXIT_FAILED
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (cacao --check | head); stop quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FAILED


def _store_mode(args: argparse.Namespace) -> int:
    """--check, --best, --clone, --prune-archives: a file system error is one line, exit 1."""
    try:
        return HANDLERS[args.mode](args)
    except BrokenPipeError:
        raise
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        _error(f"cacao: {where}{exc.strerror or exc}")
        return EXIT_FAILED
