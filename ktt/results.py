"""Results on disk: results.jsonl (one ConfigResult a line, appended as each finishes), summary.json.

Each line is flushed and fsync'ed before the next configuration runs, so a crash loses at
most the configuration in flight. Readers skip a torn last line.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from ktt.protocol import ConfigResult

M = TypeVar("M", bound=BaseModel)


class ResultsWriter:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._f = open(path, "a", encoding="utf-8")  # noqa: SIM115

    def append(self, result: ConfigResult) -> None:
        self._f.write(result.model_dump_json() + "\n")
        self._f.flush()
        with contextlib.suppress(OSError):
            os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> ResultsWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_results(path: Path) -> list[ConfigResult]:
    out: list[ConfigResult] = []
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return out
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            out.append(ConfigResult.model_validate_json(line))
        except ValidationError:
            continue  # a torn last line after a crash
    return out


def write_json_atomic(path: Path, data: BaseModel | dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = data.model_dump_json(indent=2) if isinstance(data, BaseModel) else json.dumps(data, indent=2)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_model(path: Path, model: type[M]) -> M:
    return model.model_validate_json(path.read_text(encoding="utf-8"))
