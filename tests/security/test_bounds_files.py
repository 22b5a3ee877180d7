"""Class 2 and 6 of issue 10: files from a problem directory or a model are read as regular files,
size-capped and contained. A header or reference linked to /dev/zero or a FIFO is one line, not a
hang or an out-of-memory kill; a default-named reference linked out of the directory is refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from bounds_problem import make_problem, one_line

from ktt.capped_read import ReadRefused, read_bytes_capped, read_text_capped
from ktt.problem import ProblemError, load_problem
from ktt.problem.yaml_io import read_yaml_mapping
from ktt.spec import SpecError, load_spec


def set_reference_file(root: Path, name: str | None) -> None:
    """Point reference.file at ``name``, or drop the key (the default name is then looked up)."""
    lines = (root / "problem.yaml").read_text().splitlines()
    out = [ln for ln in lines if not ln.strip().startswith("file:")]
    if name is not None:
        at = next(i for i, ln in enumerate(out) if ln.startswith("reference:"))
        out.insert(at + 1, f"  file: {name}")
    (root / "problem.yaml").write_text("\n".join(out) + "\n")


def test_capped_read_refuses_devices_fifos_and_large_files(tmp_path: Path) -> None:
    with pytest.raises(ReadRefused, match="character device"):
        read_bytes_capped("/dev/zero", 1024)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ReadRefused, match="FIFO"):
        read_bytes_capped(fifo, 1024)
    big = tmp_path / "big"
    big.write_bytes(b"x" * 2048)
    with pytest.raises(ReadRefused, match="larger than the limit of 1,024"):
        read_text_capped(big, 1024)
    assert read_text_capped(big, 4096) == "x" * 2048
    with pytest.raises(ReadRefused):
        read_bytes_capped(tmp_path, 1024)


@pytest.mark.timeout(30)
def test_a_reference_that_is_a_fifo_does_not_hang(tmp_path: Path) -> None:
    root = make_problem(tmp_path)
    (root / "ref_kernel.cu").unlink()
    os.mkfifo(root / "ref_kernel.cu")
    with pytest.raises(ProblemError) as info:
        load_problem(root)
    assert "not a regular file" in str(info.value) and one_line(str(info.value))


@pytest.mark.timeout(30)
@pytest.mark.parametrize("name", ["inputs.yaml", "problem.yaml"])
def test_problem_files_that_are_fifos_or_devices_do_not_hang(name: str, tmp_path: Path) -> None:
    root = make_problem(tmp_path)
    (root / name).unlink()
    os.mkfifo(root / name)
    with pytest.raises(ProblemError) as info:
        load_problem(root)
    assert one_line(str(info.value))
    with pytest.raises(ProblemError, match="FIFO, not a regular file"):
        read_yaml_mapping(root / name)  # the reader itself, past the loader's is_file() check


@pytest.mark.timeout(30)
def test_a_tuning_yaml_linked_to_dev_zero(tmp_path: Path) -> None:
    problem = load_problem(make_problem(tmp_path))
    spec = tmp_path / "tuning.yaml"
    spec.symlink_to("/dev/zero")
    with pytest.raises(SpecError, match="not a regular file"):
        load_spec(spec, problem)


def test_a_default_named_reference_linked_out_of_the_directory_is_refused(tmp_path: Path) -> None:
    root = make_problem(tmp_path)
    outside = tmp_path / "elsewhere.cu"
    outside.write_text((root / "ref_kernel.cu").read_text())
    (root / "ref_kernel.cu").unlink()
    (root / "ref_kernel.cu").symlink_to(outside)
    set_reference_file(root, None)
    with pytest.raises(ProblemError) as info:
        load_problem(root)
    assert "leaves the problem directory" in str(info.value) and one_line(str(info.value))
    # named: inside is fine, outside is refused
    (root / "ref_kernel.cu").unlink()
    (root / "sub").mkdir()
    (root / "sub" / "ref.cu").write_text(outside.read_text())
    set_reference_file(root, "sub/ref.cu")
    assert load_problem(root).reference.file == (root / "sub" / "ref.cu").resolve()
    set_reference_file(root, "../elsewhere.cu")
    with pytest.raises(ProblemError, match="leaves the problem directory"):
        load_problem(root)


def test_a_reference_over_the_size_cap(tmp_path: Path) -> None:
    root = make_problem(tmp_path)
    with (root / "ref_kernel.cu").open("a") as f:
        f.write("// " + "x" * (5 * 1024 * 1024) + "\n")
    with pytest.raises(ProblemError, match="larger than the limit"):
        load_problem(root)
