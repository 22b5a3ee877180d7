"""The ``cacao`` command's flags: the parser, their validation and the typed run request they make.

Below both front ends: ``cacao_tui.cli`` dispatches the parsed flags to a mode, and the home
screen's launcher (``cacao_tui.runs.launcher``) validates a run's flags with the same parser
before it starts the run as a process of its own, so neither imports the other.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from cacao_tui import __version__
from cacao_tui.flag_bounds import BY_FLAG, GPU_ORDINAL
from cacao_tui.llm.models import EFFORTS
from cacao_tui.llm.registry import canonical_name, names_for_help
from cacao_tui.llm.timeouts import LLM_TIMEOUT_ENV
from cacao_tui.problem import Problem
from cacao_tui.run_request import RunRequest
from cacao_tui.settings import DEFAULTS
from cacao_tui.steer_flags import EPILOG_LINES as EPILOG_STEERING
from cacao_tui.steer_flags import add_steering_flags, steering_mode
from ktt import gpu_catalog
from ktt.problem.files import DEFAULT_DURATION_S

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


def _gpu_list(text: str) -> list[int]:
    """'0,1' -> [0, 1]: distinct CUDA device ordinals."""
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or any(not p for p in parts):
        raise argparse.ArgumentTypeError(f"expected device ordinals separated by commas, like 0,1; got {text!r}")
    gpus = []
    for p in parts:
        if not p.isdigit():
            raise argparse.ArgumentTypeError(f"{p!r} is not a device ordinal (0, 1, ...)")
        if int(p) > GPU_ORDINAL.high:
            raise argparse.ArgumentTypeError(f"{p!r}: a device ordinal must be at most {GPU_ORDINAL.high:g}")
        gpus.append(int(p))
    if len(set(gpus)) != len(gpus):
        raise argparse.ArgumentTypeError(f"a GPU is listed twice in {text!r}")
    return gpus


def _provider(text: str) -> str:
    name = canonical_name(text)
    if name is None:
        raise argparse.ArgumentTypeError(f"unknown provider {text!r}; choose one of {names_for_help()}")
    return name


def _target(text: str) -> str:
    """--target: a GPU of the built-in datasheet table (ktt.gpu_catalog), by its key or name."""
    spec = gpu_catalog.find(text)
    if spec is None:
        raise argparse.ArgumentTypeError(f"unknown GPU {text!r}; choose one of {', '.join(gpu_catalog.names())}")
    return spec.key


def _non_empty(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text.strip()


def step_model(text: str) -> tuple[str | None, str]:
    """'MODEL' or 'PROVIDER:MODEL' -> (provider or None for the run's own, model).

    The part before the first ':' is a provider only when the registry knows it, so a model
    name with a colon (an Ollama tag, 'llama3:8b') stays whole."""
    text = text.strip()
    if not text:
        raise argparse.ArgumentTypeError("must not be empty (MODEL or PROVIDER:MODEL)")
    head, sep, tail = text.partition(":")
    provider = canonical_name(head) if sep else None
    if provider is not None:
        if not tail.strip():
            raise argparse.ArgumentTypeError(f"{text!r} names no model after the provider (PROVIDER:MODEL)")
        return provider, tail.strip()
    return None, text


EPILOG = """\
modes (one at a time; without one, cacao runs the optimisation):
  (no --dir)         the working directory's problem when it has a problem.yaml (as --dir .);
                     otherwise the home screen: the problems under --problems DIR (default ./problems)
  --check            validate the problem and print what was understood
  --best             print the best result and a per-branch table
  --clone NAME       copy the problem definition to a sibling directory NAME
  --prune-archives   remove regenerable files (caches, binaries, dumps) under archive/

other commands:
  cacao suite DIR... [flags]   run many problems, each a normal run; then their table (cacao suite --help)
  cacao collect DIR...         the table of problems' last runs, as CSV and Markdown (cacao collect --help)

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
    p.add_argument(
        "--dir",
        metavar="DIR",
        help="the problem directory (without it: the working directory when it holds a problem.yaml, "
        "else the home screen)",
    )
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
        metavar="N",
        help=f"iterations per branch (default {DEFAULTS.max_iter})",
    )
    run.add_argument(
        "--max-depth",
        metavar="N",
        help=f"levels of branches: 1 = no sub-branches (default {DEFAULTS.max_depth}: roots and their children)",
    )
    run.add_argument(
        "--path-budget",
        metavar="N",
        help="iterations per root-to-leaf path (default 0: off)",
    )
    run.add_argument(
        "--budget-iters",
        metavar="N",
        help="the run's iteration pool, shared by every branch and spent where branches improve "
        "(default: strategies x max-iter; with --resume: the earlier run's)",
    )
    run.add_argument(
        "--samples",
        metavar="K",
        help="authoring attempts per iteration, in parallel from the same prompt; the fastest valid one by "
        "a short probe is tuned (default 1)",
    )
    run.add_argument(
        "--strategies",
        metavar="N",
        help=f"strategies the master proposes (default {DEFAULTS.n_strategies})",
    )
    run.add_argument(
        "--timeout",
        metavar="SECONDS",
        help="tuning budget of every case in every iteration, replacing each case's duration_s and "
        f"tuning.duration_s (default: a case's duration_s, else tuning.duration_s, else {DEFAULT_DURATION_S:g})",
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
        "--dry-run",
        action=argparse.BooleanOptionalAction,  # --no-dry-run: a dry run's --resume times the rest on the GPU
        help="everything but GPU execution (kernels are compile-checked); --resume keeps the run's own setting",
    )
    run.add_argument(
        "--phase",
        choices=("llm", "gpu"),
        help="a split run: llm does only the model's steps (no GPU needed), gpu only tuning and profiling "
        "(no LLM call, no key; with --resume); each ends naming the command for the other (docs/CLUSTER.md)",
    )
    run.add_argument(
        "--gpu-submit",
        metavar="TEMPLATE",
        help="without a GPU here: whenever every branch waits for the GPU, run TEMPLATE with {cmd} replaced "
        "by the GPU phase's command and wait for it, e.g. 'sbatch --wait --gres=gpu:1 --wrap {cmd}'",
    )
    run.add_argument("--lock-token", help=argparse.SUPPRESS)  # the GPU phase --gpu-submit starts
    run.add_argument("--no-ui", action="store_true", help="print progress lines instead of the full-screen app")
    run.add_argument("--json", action="store_true", help="print the event stream as JSON lines (with --best: results)")
    run.add_argument(
        "--export", metavar="FILE", help="with --best: write the results to FILE (.csv or .md) instead of showing them"
    )
    run.add_argument("--single-shot", action="store_true", help="author kernels with single calls, not the tool loop")
    run.add_argument(
        "--target",
        type=_target,
        metavar="GPU",
        help="with --dry-run: the GPU the prompts describe and kernels are compiled for (default: the GPU here, "
        f"else the problem's; one of {', '.join(gpu_catalog.names())})",
    )

    llm = p.add_argument_group("LLM")
    llm.add_argument("--provider", type=_provider, metavar="NAME", help=f"one of {names_for_help()}")
    llm.add_argument("--model", type=_non_empty, metavar="MODEL", help="model name (default: the provider's default)")
    llm.add_argument(
        "--model-plan",
        type=step_model,
        metavar="[PROVIDER:]MODEL",
        help="the model of the plan step (default: --model), e.g. a cheaper one; any registry provider",
    )
    llm.add_argument(
        "--model-decide",
        type=step_model,
        metavar="[PROVIDER:]MODEL",
        help="the model of the decide step (default: --model)",
    )
    llm.add_argument("--budget-usd", metavar="X", help="stop new LLM calls once X dollars are spent")
    llm.add_argument("--from", dest="from_path", metavar="PATH", help="recorded session to replay (--provider replay)")
    llm.add_argument(
        "--budget-tokens",
        metavar="N",
        help="stop new LLM calls once N tokens (in + out) are used; works for models without a price",
    )
    llm.add_argument(
        "--reasoning",
        choices=EFFORTS,
        metavar="LEVEL",
        help="reasoning effort of every step: low, medium or high (default: the model's own; "
        "per step in ~/.config/cacao_tui/llm.toml)",
    )
    llm.add_argument(
        "--max-tokens",
        metavar="N",
        help=f"visible output of one LLM call (default {DEFAULTS.llm_max_tokens}); reasoning models get room on top",
    )
    llm.add_argument(
        "--llm-concurrency",
        metavar="N",
        help=f"LLM calls in flight at once (default {DEFAULTS.llm_concurrency})",
    )
    llm.add_argument(
        "--llm-timeout",
        metavar="SECONDS",
        help=(
            f"limit of one LLM request, connect to last byte (default: {LLM_TIMEOUT_ENV}, else "
            f"{DEFAULTS.llm_timeout_s:g}); a call with its retries gets {DEFAULTS.llm_call_timeout_factor:g}x that"
        ),
    )

    add_steering_flags(p)  # --branch NAME --message/--revert/--delete/--decision (cacao_tui/steer_flags.py)
    p.add_argument("-v", "--verbose", action="store_true", help="show warnings (unknown keys, ...) and more detail")
    _bound_numbers(p)
    return p


def _bound_numbers(p: argparse.ArgumentParser) -> None:
    """Every number flag is bounded by its entry of cacao_tui.flag_bounds, which --help shows; one
    without a parser of its own (--gpus, --revert have one, which reads the table) parses with it."""
    for action in p._actions:
        found = next((BY_FLAG[o] for o in action.option_strings if o in BY_FLAG), None)
        if found is None:
            continue
        if action.type is None:
            action.type = found.argparse_type()
        shown = f"each {found.span()}" if found is GPU_ORDINAL else found.span()
        action.help = f"{action.help} [{shown}]"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse and validate flags; ``args.dir`` becomes an absolute Path of an existing directory."""
    args = build_parser().parse_args(argv)
    args.mode = next((m for m in MODES if getattr(args, m)), "run")
    if steering_mode(args, UsageError):
        args.mode = "steer"
    if args.target is not None and not args.dry_run:
        raise UsageError("--target chooses the GPU of a dry run; a run on a GPU measures its own (add --dry-run)")
    _check_phase_flags(args)
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
    if args.dir is None and args.problems is None and (Path.cwd() / "problem.yaml").is_file():
        args.dir = "."  # cacao inside a problem directory works on it, as the original's --dir defaults to .
    if args.dir is None:
        return _home_args(args)
    if args.problems is not None:
        raise UsageError("--problems is the home screen's folder; it does not go with --dir")
    raw = Path(args.dir).expanduser()
    if not raw.exists():  # a mistake in the flag, so a flag's line (cacao: error:), not a problem file's
        raise UsageError(f"--dir {raw}: no such directory (--dir takes a problem directory, e.g. problems/mmul)")
    if not raw.is_dir():
        raise UsageError(f"--dir {raw}: not a directory (--dir takes a problem directory)")
    args.dir = raw.resolve()
    return args


def _check_phase_flags(args: argparse.Namespace) -> None:
    """--phase, --gpu-submit and --lock-token: what they need and what they do not go with."""
    from cacao_tui.cluster.submit import template_problem

    split = "--phase" if args.phase else "--gpu-submit" if args.gpu_submit is not None else None
    if split is not None and args.mode != "run":
        flag = "branch" if args.mode == "steer" else args.mode.replace("_", "-")
        raise UsageError(f"{split} belongs to a run; it does not go with --{flag}")
    if args.phase and args.gpu_submit is not None:
        raise UsageError("--gpu-submit runs both phases itself; it does not go with --phase")
    if split is not None and args.dry_run:
        raise UsageError(f"{split} splits a run that times kernels; a --dry-run times nothing")
    if split is not None and args.samples is not None and args.samples > 1:
        raise UsageError(f"--samples probes each attempt on the GPU while authoring; it does not go with {split}")
    if args.phase == "gpu" and not args.resume:
        raise UsageError("--phase gpu continues a run: give --resume (the model's phase, --phase llm, starts one)")
    if (args.phase == "llm" or args.gpu_submit is not None) and args.cluster is not None:
        raise UsageError(f"--cluster places GPU jobs; {split} runs none here (give --cluster to the GPU phase)")
    if args.gpu_submit is not None:
        problem = template_problem(args.gpu_submit)
        if problem is not None:
            raise UsageError(problem)
    if args.lock_token is not None and args.phase != "gpu":
        raise UsageError("--lock-token is the GPU phase's (--gpu-submit gives it)")


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


def flag_warnings(args: argparse.Namespace) -> list[str]:
    """Flags a run accepts but does not use, each one line (the original warns of the same)."""
    warnings = []
    if args.path_budget and args.max_iter is not None:
        warnings.append(
            f"--max-iter {args.max_iter} is ignored with --path-budget {args.path_budget}: each root-to-leaf path "
            f"has {args.path_budget} iterations, however its branches share them"
        )
    return warnings


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
        phase=args.phase,
        gpu_submit=args.gpu_submit,
        lock_token=args.lock_token,
        provider=args.provider,
        model=args.model,
        model_plan=args.model_plan,
        model_decide=args.model_decide,
        budget_iters=args.budget_iters,
        samples=args.samples,
        budget_usd=args.budget_usd,
        budget_tokens=args.budget_tokens,
        reasoning=args.reasoning,
        max_tokens=args.max_tokens,
        llm_concurrency=args.llm_concurrency,
        replay_from=args.from_path,
        llm_timeout_s=args.llm_timeout,
        target=args.target,
    )
