"""``cacao import FILE.py|DIR [--to DIR] [--level N] [--timeout S] [--memory-gb G]``.

One module becomes one problem directory under ``--to`` (default ./problems); a folder (a
KernelBench level) imports every ``*.py`` in it, in the order of their numbers (``1_...``,
``2_...``, ``10_...``), and ends with a summary of what was imported and what was refused and
why. A refused module is one line naming the file and what is wrong, and writes nothing. Exit
status: 0 when every module was imported, 2 when none was (or a flag is wrong), 1 when some were.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from cacao_tui.kernelbench.importer import MEMORY_GB, TIMEOUT_S, Imported, ImportRefused, import_module
from cacao_tui.ui.formatting import safe_text

EXIT_OK, EXIT_PARTIAL, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
MAX_MODULES = 1000


class ImportUsage(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ImportUsage(message)


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value < 1e7:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def _level(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 100:
        raise argparse.ArgumentTypeError(f"expected a level like 1, 2 or 3, got {text!r}")
    return int(text)


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="cacao import", description="Turn PyTorch modules in KernelBench's form into problem directories.")
    p.add_argument("source", metavar="FILE.py|DIR", help="a module, or a folder of modules (a KernelBench level)")
    p.add_argument("--to", metavar="DIR", default="problems", help="where the problems go (default ./problems)")
    p.add_argument("--level", type=_level, metavar="N", help="the KernelBench level: recorded, and names start levelN_")
    p.add_argument("--timeout", type=_positive, default=TIMEOUT_S, metavar="S",
                   help=f"seconds one module's import may take (default {TIMEOUT_S:g})")  # fmt: skip
    p.add_argument("--memory-gb", type=_positive, default=MEMORY_GB, metavar="G",
                   help=f"memory one module's import may map (default {MEMORY_GB:g})")  # fmt: skip
    return p


def _natural(path: Path) -> tuple:
    """KernelBench's order: 1_..., 2_..., 10_... (numbers compared as numbers)."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", path.stem))


def _modules(source: Path) -> list[Path]:
    if source.is_file():
        if source.suffix != ".py":
            raise ImportUsage(f"{source}: not a Python file (a module in KernelBench's form ends in .py)")
        return [source]
    if not source.is_dir():
        raise ImportUsage(f"{source}: no such file or folder")
    found = sorted((p for p in source.iterdir() if p.suffix == ".py" and p.is_file() and not p.name.startswith("_")),
                   key=_natural)  # fmt: skip
    if not found:
        raise ImportUsage(f"{source}: no .py modules in this folder")
    if len(found) > MAX_MODULES:
        raise ImportUsage(f"{source}: {len(found)} modules, more than {MAX_MODULES} in one import")
    return found


def _line(done: Imported) -> str:
    what = f"{done.inputs} input(s), {done.params} weight(s), {done.outputs} output(s)"
    return f"imported {done.source.name} -> {done.directory} ({what})"


def run(argv: Sequence[str]) -> int:
    args = parser().parse_args(list(argv))
    modules = _modules(Path(args.source).expanduser())
    to = Path(args.to).expanduser()
    if to.exists() and not to.is_dir():
        raise ImportUsage(f"--to: {to}: not a folder")
    imported: list[Imported] = []
    refused: list[str] = []
    for file in modules:
        try:
            done = import_module(file, to, args.level, timeout_s=args.timeout, memory_gb=args.memory_gb)
        except ImportRefused as exc:
            refused.append(str(exc))
            print(safe_text(f"refused {exc}"), file=sys.stderr if len(modules) == 1 else sys.stdout, flush=True)
            continue
        imported.append(done)
        print(safe_text(_line(done)), flush=True)
        for note in done.notes:
            print(safe_text(f"  note: {note}"), flush=True)
    if len(modules) > 1:
        print(f"import: {len(imported)} imported, {len(refused)} refused, of {len(modules)} modules in {args.source}")
        for line in refused:
            print(safe_text(f"  refused {line}"))
    if imported and len(modules) == 1:
        print(f"next: cacao --dir {imported[0].directory} --check")
    if not imported:
        return EXIT_USAGE
    return EXIT_PARTIAL if refused else EXIT_OK


def main(argv: Sequence[str]) -> int:
    """``argv``: the words after ``cacao import``."""
    try:
        return run(argv)
    except ImportUsage as exc:
        print(safe_text(f"cacao import: error: {exc}"), file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        print(safe_text(f"cacao import: {where}{exc.strerror or exc}"), file=sys.stderr)
        return 1
