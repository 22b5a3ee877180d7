"""Atomic JSON writes: temp file in the same directory, fsync, rename. A reader never sees half a file.

The file's data is fsynced before the rename, so a crash (SIGKILL, or power loss after the
rename reached the disk) leaves either the old or the new content, never a torn file.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


def write_text_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # Each state file has one writer, so a temp name unique to this process and thread is enough
    # (and much cheaper than mkstemp's random names).
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def write_model(path: Path, model: BaseModel) -> None:
    write_text_atomic(path, model.model_dump_json(indent=2) + "\n")


class StateFileError(Exception):
    """A state file that exists but cannot be read as its model."""

    def __init__(self, path: Path, message: str) -> None:
        self.path = path
        super().__init__(f"{path}: {message}")


def read_model(path: Path, model: type[M]) -> M:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise StateFileError(path, f"cannot read ({exc.strerror})") from None
    try:
        return model.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise StateFileError(path, f"{where}: {first['msg']}") from None


def read_model_or_none(path: Path, model: type[M]) -> M | None:
    return read_model(path, model) if path.exists() else None
