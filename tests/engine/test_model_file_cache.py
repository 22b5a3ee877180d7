"""read_model_file keeps what it read while the file is the same one; every writer is seen."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cacao_tui.nodes import workspace
from cacao_tui.nodes.workspace import forget_model_file, read_model_file, remove_model_file, write_model_file


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workspace, "_read_cache", workspace._ReadCache())


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    reads: list[str] = []
    real = workspace.read_text_capped

    def counted(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        reads.append(str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(workspace, "read_text_capped", counted)
    return reads


def test_a_second_read_of_an_unchanged_file_opens_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reads = _count_reads(monkeypatch)
    path = tmp_path / "kernels.cu"
    write_model_file(path, "A" * 100)
    assert read_model_file(path) == "A" * 100
    assert read_model_file(path) == "A" * 100
    assert len(reads) == 1


def test_a_rewrite_of_the_same_size_in_the_same_instant_is_seen(tmp_path: Path) -> None:
    path = tmp_path / "iter1" / "tuning.yaml"  # the folder is made by the first write
    write_model_file(path, "P: [16]\n")
    assert read_model_file(path) == "P: [16]\n"
    st = path.stat()
    write_model_file(path, "P: [32]\n")  # same inode, same size
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # even with the old modification time
    assert read_model_file(path) == "P: [32]\n"


def test_a_writer_outside_is_seen_by_size_inode_or_change_time(tmp_path: Path) -> None:
    path = tmp_path / "kernels.cu"
    path.write_text("one")
    assert read_model_file(path) == "one"
    path.write_text("three")  # another size
    assert read_model_file(path) == "three"
    other = tmp_path / "new"
    other.write_text("fiver")
    os.replace(other, path)  # another inode, the same size
    assert read_model_file(path) == "fiver"
    st = path.stat()
    with open(path, "r+") as f:  # in place, same size, the modification time put back
        f.write("FIVER")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    if path.stat().st_ctime_ns == st.st_ctime_ns:
        pytest.skip("this file system's change time did not move within the test")
    assert read_model_file(path) == "FIVER"


def test_a_link_is_never_served_from_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reads = _count_reads(monkeypatch)
    target = tmp_path / "elsewhere.cu"
    target.write_text("x")
    link = tmp_path / "kernels.cu"
    link.symlink_to(target)
    read_model_file(link)
    read_model_file(link)
    assert len(reads) == 2  # each read goes through the capped reader, whatever it decides


def test_removal_and_forget_drop_the_entry(tmp_path: Path) -> None:
    path = tmp_path / "kernels.cu"
    write_model_file(path, "abc")
    assert read_model_file(path) == "abc"
    remove_model_file(path)
    with pytest.raises(FileNotFoundError):
        read_model_file(path)
    path.write_text("abd")  # a writer that says so afterwards
    forget_model_file(path)
    assert read_model_file(path) == "abd"


def test_the_cache_is_bounded_in_files_and_characters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = workspace._ReadCache()
    cache.FILES, cache.CHARS = 3, 250
    monkeypatch.setattr(workspace, "_read_cache", cache)
    for i in range(6):
        p = tmp_path / f"f{i}" / "kernels.cu"
        write_model_file(p, str(i) * 100)
        read_model_file(p)
    assert len(cache._texts) <= 3 and cache._chars <= 250
    assert cache._chars == sum(len(t) for _, t in cache._texts.values())
