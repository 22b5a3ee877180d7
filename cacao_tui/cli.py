"""The ``cacao`` command: flags -> one mode.

Modes: a run (the full-screen app, or ``--no-ui``; handed to ``cacao_tui.launch`` as a ``RunRequest``),
the home screen (no ``--dir``: the problems under ``--problems``, default ./problems),
``--check``, ``--best``, ``--clone NAME`` and ``--prune-archives``. Every user mistake is
one line on stderr (``FILE: FIELD: what is wrong`` for problem files, ``cacao: error: ...``
for flags), a hint on the same line, exit status 2, no traceback, and nothing written.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from cacao_tui.llm.registry import PROVIDER_NAMES
from cacao_tui.problem import Problem, ProblemError, load_problem
from cacao_tui.problem.check_warnings import STUB_WHAT, check_warnings, stub_reference
from cacao_tui.problem.summary import human_bytes, render_check
from cacao_tui.run_options import UsageError, build_parser, flag_warnings, parse_args, run_request
from cacao_tui.run_request import RunRequest
from cacao_tui.steer_flags import steer
from cacao_tui.store.archive import ArchiveError, archived_runs
from cacao_tui.store.atomic import StateFileError
from cacao_tui.store.clone import CloneError, clone_problem
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.prune import prune_archives
from cacao_tui.store.results import load_results, render_results
from cacao_tui.ui.formatting import safe_json_line, safe_text, safe_value
from ktt.problem.errors import display_path
from ktt.reference_times import ReferenceTimeError, read_reference_times

EXIT_OK = 0
EXIT_FAILED = 1  # the operation itself failed (a file system error)
EXIT_USAGE = 2  # a user mistake: a flag, a problem file, a name
EXIT_INTERRUPTED = 130

# The provider registry (no SDK is imported by reading it): names, aliases, --help text.
PROVIDERS = PROVIDER_NAMES
ENGINE_MODULE = "cacao_tui.launch"
__all__ = ["ENGINE_MODULE", "PROVIDERS", "UsageError", "build_parser", "main", "parse_args"]


def _home(args: argparse.Namespace) -> int:
    """The home screen: a terminal app, so a pipe or a script gets one line instead."""
    web = os.environ.get("TEXTUAL_DRIVER", "").endswith("WebDriver")  # a browser tab of `cacao serve`
    if not web and not (sys.stdout.isatty() and sys.stdin.isatty()):
        raise UsageError("the home screen needs a terminal; give --dir DIR to work on one problem")
    from cacao_tui.ui.home.loop import run_home  # textual only when the app is used

    code = run_home(args.problems)
    if web:
        from cacao_tui.ui.web_driver import end_session

        end_session()  # the tab's session ends with the last view (cacao_tui/ui/web_driver.py)
    return code


def _require_problem_yaml(directory: Path) -> None:
    if not (directory / "problem.yaml").is_file():
        raise ProblemError(directory / "problem.yaml", "", "file not found (--dir is not a problem directory)")


def _check(args: argparse.Namespace) -> int:
    """Load, then prove it will run (compile/build the reference and initialisers, import ref.py); writes nothing."""
    from ktt.problem.preflight import preflight  # NVRTC and the host compilers: only when checking

    problem = load_problem(args.dir)
    seeds = RunLayout(args.dir).reference_time
    try:  # a seed, a null (no baseline) or a file that cannot be used is said here, not at the first tuning
        times = read_reference_times(seeds, problem.primary.name)
    except ReferenceTimeError as exc:
        line = str(exc).replace(str(seeds), display_path(seeds), 1)
        _error(line, "fix the file or move it away (without it, every shape is timed on its first tuning)")
        return EXIT_USAGE
    steps = preflight(problem)
    problem.warnings.extend(check_warnings(problem, times))  # a stub reference, a widely spread baseline
    print(safe_text(render_check(problem, steps, times), keep_newlines=True))  # names, descriptions: problem files
    n = len(problem.warnings)
    note = f" ({n} warning{'s' if n != 1 else ''})" if n else ""
    print(f"\nOK: {safe_text(display_path(problem.directory))} is a valid problem{note}")
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
        return EXIT_OK  # as the original's --best: nothing to show is said, not an error (docs/compatibility.md)
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
    generated = f", {cloned.generated} generated file left out" if cloned.generated else ""
    print(f"cloned {source} -> {target} ({cloned.files} files; output/ and archive/ not copied{generated})")
    return EXIT_OK


def _prune(args: argparse.Namespace) -> int:
    _require_problem_yaml(args.dir)
    report = prune_archives(args.dir, dry_run=bool(args.dry_run))
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


def _run(args: argparse.Namespace) -> int:
    problem: Problem = load_problem(args.dir)
    if stub_reference(problem):  # before anything is written or any model is asked
        raise ProblemError(problem.reference.file, "", STUB_WHAT, "--check lists what else it finds")
    if args.verbose:
        for warning in problem.warnings:
            print(f"warning: {warning}", file=sys.stderr)
    for warning in flag_warnings(args):
        print(f"cacao: warning: {warning}", file=sys.stderr)
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
    request = run_request(args, problem)
    if request.front_end == "app" and not (sys.stdout.isatty() and sys.stdin.isatty()):
        # A pipe, a file or a script: the full-screen app would write escape codes into it and
        # wait for keys that never come. The progress lines instead, as --no-ui prints them.
        print("cacao: no terminal (stdin or stdout is not one): running headless, as --no-ui", file=sys.stderr)
        request = dataclasses.replace(request, front_end="lines")
    return run_main(request)


HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {
    "check": _check,
    "best": _best,
    "clone": _clone,
    "prune_archives": _prune,
    "steer": steer,
    "home": _home,
}


def _error(line: str, hint: str | None = None) -> None:
    """One line per mistake: a hint goes on the same line, after a semicolon."""
    text = f"{line}; {hint}" if hint else line
    print(safe_text(text, keep_newlines=True), file=sys.stderr)  # may quote a file's text (a lock's holder)


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if words and words[0] in ("suite", "collect"):  # cacao suite DIR... / cacao collect DIR...
        from cacao_tui.suite.cli import main as suite_main

        return suite_main(words)
    if words and words[0] == "import":  # cacao import FILE.py|DIR (KernelBench's modules)
        from cacao_tui.kernelbench.cli import main as import_main

        return import_main(words[1:])
    if words and words[0] == "serve":  # cacao serve [--problems DIR] [--host H] [--port P]
        from cacao_tui.ui.serve import main as serve_main

        return serve_main(words[1:])
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
    except StateFileError as exc:  # a run's file that is not what the run wrote: one line naming it
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
