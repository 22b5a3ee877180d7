"""The model-file read cache (nodes/workspace.py) never serves a file that was swapped after it was
read: a FIFO, an oversized file or a link put in its place goes through the capped reader again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cacao_tui.nodes import workspace
from cacao_tui.nodes.workspace import MAX_WRITE_BYTES, read_model_file, write_model_file


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workspace, "_read_cache", workspace._ReadCache())


def test_a_fifo_swapped_in_after_a_cached_read_is_refused_not_served(tmp_path: Path) -> None:
    path = tmp_path / "kernels.cu"
    write_model_file(path, "__global__ void k() {}\n")
    assert read_model_file(path).startswith("__global__")
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(OSError, match=r"FIFO|not a regular file"):
        read_model_file(path)  # refused at once: no hang, no cached text


def test_a_file_grown_over_the_cap_after_a_cached_read_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tuning.yaml"
    write_model_file(path, "P: [1]\n")
    read_model_file(path)
    with open(path, "ab") as f:  # another writer, outside write_model_file
        f.write(b"#" * (MAX_WRITE_BYTES["tuning.yaml"] + 1))
    with pytest.raises(OSError, match="larger than the limit"):
        read_model_file(path)


def test_a_link_swapped_in_is_read_through_the_capped_reader_each_time(tmp_path: Path) -> None:
    path = tmp_path / "kernels.cu"
    write_model_file(path, "mine\n")
    read_model_file(path)
    secret = tmp_path / "elsewhere"
    secret.write_text("x" * (MAX_WRITE_BYTES["kernels.cu"] + 10))
    path.unlink()
    path.symlink_to(secret)
    with pytest.raises(OSError, match="larger than the limit"):
        read_model_file(path)  # the cap holds for whatever the link reaches; nothing cached is returned
