"""``cacao --dir X --branch NAME --message TEXT | --revert N | --delete | --decision ACTION``.

Steering from the command line, while a run is live (in another terminal) or between runs.
It only writes one command file into the branch's inbox (and, for a revert or a changed
decision that needs room, raises the branch's max_iter in branch_config.json) and never
touches a worker's files. A live run applies the command at the branch's next step;
otherwise the next ``--resume`` does. The exception is ``--delete`` on a run that is not
live: nothing would ever run it before a ``--resume``, so it is done at once, under the run's
lock (the branch and its sub-branches move to output/trash/, final_results.json is rebuilt
without them).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, NoReturn

from cacao_tui.flag_bounds import OutOfBounds, bound
from cacao_tui.store.state import ACTIONS

if TYPE_CHECKING:
    from cacao_tui.store.layout import RunLayout

STEERING = ("message", "revert", "delete", "decision")
EPILOG_LINES = """\
steering (a live run applies it at the branch's next step, else the next --resume does):
  --branch NAME --message TEXT   tell a branch something; it reaches the branch's next prompts
  --branch NAME --revert N       continue the branch from iteration N's kernel (later ones are kept)
  --branch NAME --delete         move the branch (and its sub-branches) to output/trash/
  --branch NAME --decision A     A = continue | retry | branch | stop, instead of the model's choice
"""


def _action(text: str) -> str:
    name = text.strip().lower()
    if name not in ACTIONS:
        raise argparse.ArgumentTypeError(f"unknown decision {text!r}; choose one of {', '.join(ACTIONS)}")
    return name


def _iteration(text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an iteration number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"iterations are numbered from 1, got {value}")
    try:
        return int(bound("--revert").parse(text))  # its high end
    except OutOfBounds as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _text(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def add_steering_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("steering a branch (with --branch)")
    group.add_argument("--branch", metavar="NAME", help="the branch to steer (names: cacao --dir X --best)")
    action = group.add_mutually_exclusive_group()
    action.add_argument("--message", metavar="TEXT", type=_text, help="a message for the branch's next prompts")
    action.add_argument("--revert", metavar="N", type=_iteration, help="continue the branch from iteration N")
    action.add_argument("--delete", action="store_true", help="move the branch to output/trash/")
    action.add_argument(
        "--decision", metavar="ACTION", type=_action, help=f"override its next decision: {' | '.join(ACTIONS)}"
    )


def steering_mode(args: argparse.Namespace, fail: type[Exception]) -> bool:
    """Whether the flags ask for steering; raises ``fail(line)`` when they are incomplete."""
    chosen = [name for name in STEERING if getattr(args, name, None) not in (None, False)]
    if args.branch is None and not chosen:
        return False

    def refuse(line: str) -> NoReturn:
        raise fail(line)

    if args.branch is None:
        refuse(f"--{chosen[0]} steers a branch: add --branch NAME")
    if not chosen:
        refuse("--branch needs what to do: --message TEXT, --revert N, --delete or --decision ACTION")
    if args.mode != "run":
        refuse(f"--branch steers a run; it does not go with --{args.mode.replace('_', '-')}")
    if args.resume:
        refuse("--branch only queues a command; run 'cacao --dir X --resume' separately to continue the run")
    return True


def steer(args: argparse.Namespace) -> int:
    """Queue the command; one line on success (exit 0), one line naming what is wrong (exit 2)."""
    import sys

    from cacao_tui.engine.control import (
        SteeringError,
        queue_decision,
        queue_delete,
        queue_message,
        queue_revert,
    )
    from cacao_tui.settings import DEFAULTS
    from cacao_tui.store.atomic import StateFileError, read_model_or_none
    from cacao_tui.store.layout import RunLayout
    from cacao_tui.store.original_run import is_original_output, refusal
    from cacao_tui.store.state import Context

    layout = RunLayout(args.dir)
    if is_original_output(layout.output):
        print(f"cacao: {refusal(layout.output, layout.problem_dir, 'steer')}", file=sys.stderr)
        return 2
    if not layout.branches.is_dir():
        print(f"cacao: {layout.output}: no run to steer here (no branches yet)", file=sys.stderr)
        return 2
    max_iter = DEFAULTS.max_iter
    try:
        context = read_model_or_none(layout.context, Context)
        if context is not None:
            max_iter = context.settings.max_iter
    except StateFileError:
        pass
    if args.delete:
        done = _delete_now(layout, args.branch)
        if done is not None:
            return done
    try:
        if args.message is not None:
            queued = queue_message(layout, args.branch, args.message)
        elif args.revert is not None:
            queued = queue_revert(layout, args.branch, args.revert, default_max_iter=max_iter)
        elif args.delete:
            queued = queue_delete(layout, args.branch)
        else:
            queued = queue_decision(layout, args.branch, args.decision, default_max_iter=max_iter)
    except SteeringError as exc:
        print(f"cacao: {exc}", file=sys.stderr)
        return 2
    print(queued.line)
    print(f"a running cacao on {args.dir.name} applies it at the branch's next step; otherwise: cacao --dir "
          f"{args.dir} --resume")  # fmt: skip
    return 0


def _delete_now(layout: RunLayout, name: str) -> int | None:
    """``--delete`` on a run no process holds: move the branches now; None when a run is live
    (then the delete is queued for its workers, like every other command)."""
    import sys

    from cacao_tui.engine.control import SteeringError, branch_of, descendants, trash_branches, trash_dir
    from cacao_tui.store.results import refresh_final_results
    from cacao_tui.store.run_lock import RunLocked, acquire_run_lock

    try:
        branch_of(layout, name)
    except SteeringError as exc:
        print(f"cacao: {exc}", file=sys.stderr)
        return 2
    try:
        lock = acquire_run_lock(layout.problem_dir, command=f"cacao --branch {name} --delete")
    except RunLocked:
        return None  # a run is live: its workers apply the queued command
    try:
        moved = trash_branches(layout, [name, *descendants(layout, name)])
        refresh_final_results(layout)
    finally:
        lock.release()
    names = ", ".join(n for n, _ in moved)
    print(f"{name}: deleted (no run is live): {names} moved to {trash_dir(layout)} (nothing is lost)")
    return 0
