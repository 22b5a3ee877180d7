"""prepare_output / archive_output: earlier runs move to archive/output_N and nothing is lost."""

from __future__ import annotations

from pathlib import Path

from store_fixtures import snapshot as _snapshot

from cacao_tui.store.archive import archive_output, archived_runs, next_archive_path, prepare_output
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.run_lock import LOCK_NAME


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every file, but the run lock that preparing a run takes (tests/security/test_run_lock.py)."""
    return {k: v for k, v in _snapshot(root).items() if k != LOCK_NAME}


def _a_run(problem: Path, marker: str) -> dict[str, bytes | None]:
    out = problem / "output"
    (out / "branches" / "b1" / "iter1").mkdir(parents=True)
    (out / "branches" / "b1" / "iter1" / "kernels.cu").write_text(f"// {marker}\n")
    (out / "context.json").write_text(f'{{"marker": "{marker}"}}\n')
    return snapshot(out)


def test_first_run_creates_output(tmp_path: Path) -> None:
    prepared = prepare_output(tmp_path, resume=False, no_clean=False)
    assert (tmp_path / "output").is_dir()
    assert prepared.archived_to is None and not (tmp_path / "archive").exists()


def test_fresh_run_archives_the_previous_one_byte_for_byte(tmp_path: Path) -> None:
    first = _a_run(tmp_path, "one")
    prepared = prepare_output(tmp_path, resume=False, no_clean=False)
    assert prepared.archived_to == tmp_path / "archive" / "output_1"
    assert snapshot(tmp_path / "archive" / "output_1") == first
    assert list((tmp_path / "output").iterdir()) == []
    second = _a_run(tmp_path, "two")
    prepare_output(tmp_path, resume=False, no_clean=False)
    assert snapshot(tmp_path / "archive" / "output_2") == second
    assert snapshot(tmp_path / "archive" / "output_1") == first
    assert [n for n, _ in archived_runs(RunLayout(tmp_path))] == [1, 2]


def test_reference_time_survives_archiving(tmp_path: Path) -> None:
    _a_run(tmp_path, "one")
    seeded = '{"time_ms": 1.25, "source": "seeded"}\n'
    (tmp_path / "output" / "reference_time.json").write_text(seeded)
    prepared = prepare_output(tmp_path, resume=False, no_clean=False)
    assert prepared.reference_time_carried
    assert (tmp_path / "output" / "reference_time.json").read_text() == seeded
    assert (tmp_path / "archive" / "output_1" / "reference_time.json").read_text() == seeded
    assert [p.name for p in (tmp_path / "output").iterdir()] == ["reference_time.json"]


def test_a_seed_alone_is_not_archived(tmp_path: Path) -> None:
    (tmp_path / "output").mkdir()
    (tmp_path / "output" / "reference_time.json").write_text('{"time_ms": 2}\n')
    before = snapshot(tmp_path)
    prepared = prepare_output(tmp_path, resume=False, no_clean=False)
    assert prepared.archived_to is None
    assert snapshot(tmp_path) == before


def test_resume_keeps_output(tmp_path: Path) -> None:
    _a_run(tmp_path, "one")
    before = snapshot(tmp_path)
    for resume, no_clean in ((True, False), (True, True)):
        prepared = prepare_output(tmp_path, resume=resume, no_clean=no_clean)
        assert prepared.kept and prepared.archived_to is None
        assert snapshot(tmp_path) == before


def test_no_clean_keeps_output_and_the_earlier_run_beside_the_new(tmp_path: Path) -> None:
    """The original's --no-clean reuses output/; here nothing of the earlier run is lost either:
    its files move, byte for byte, into output/earlier_N/, and the seed stays in place."""
    first = _a_run(tmp_path, "one")
    seed = '{"reference_time_us": 1772.56}\n'
    (tmp_path / "output" / "reference_time.json").write_text(seed)
    (tmp_path / "output" / "notes.txt").write_text("mine\n")
    first["notes.txt"] = b"mine\n"
    prepared = prepare_output(tmp_path, resume=False, no_clean=True)
    assert prepared.kept and prepared.archived_to == tmp_path / "output" / "earlier_1"
    assert snapshot(tmp_path / "output" / "earlier_1") == first
    assert sorted(p.name for p in (tmp_path / "output").iterdir()) == ["earlier_1", "reference_time.json"]
    assert (tmp_path / "output" / "reference_time.json").read_text() == seed
    assert not (tmp_path / "archive").exists()
    second = {k: v for k, v in _a_run(tmp_path, "two").items() if k.startswith(("branches", "context"))}
    assert prepare_output(tmp_path, resume=False, no_clean=True).archived_to == tmp_path / "output" / "earlier_2"
    assert snapshot(tmp_path / "output" / "earlier_2") == second
    assert snapshot(tmp_path / "output" / "earlier_1") == first
    # Only seeds or a launch log (the app's launcher writes it before its --no-clean child): nothing to move.
    (tmp_path / "output" / "launch.log").write_text("== started\n")
    assert prepare_output(tmp_path, resume=False, no_clean=True).archived_to is None
    assert (tmp_path / "output" / "launch.log").exists()


def test_next_number_follows_the_largest(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path)
    (tmp_path / "archive" / "output_1").mkdir(parents=True)
    (tmp_path / "archive" / "output_7").mkdir()
    (tmp_path / "archive" / "output_9").write_text("a stray file takes its number too")
    (tmp_path / "archive" / "notes").mkdir()
    assert next_archive_path(layout) == tmp_path / "archive" / "output_10"
    _a_run(tmp_path, "x")
    assert archive_output(layout) == tmp_path / "archive" / "output_10"
    assert (tmp_path / "archive" / "output_9").read_text() == "a stray file takes its number too"


def test_nothing_to_archive(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path)
    assert archive_output(layout) is None
    (tmp_path / "output").mkdir()
    assert archive_output(layout) is None
    assert not (tmp_path / "archive").exists()


def test_an_earlier_runs_llm_records_are_not_this_runs(tmp_path: Path) -> None:
    """The totals a --resume restores, and a replay's records, leave output/earlier_N/ alone."""
    from cacao_tui.engine.totals import record_paths
    from cacao_tui.llm.recording import record_files

    out = tmp_path / "output"
    for folder in ("llm", "branches/b1/iter1/llm", "earlier_1/llm", "earlier_1/branches/b1/iter1/llm"):
        (out / folder).mkdir(parents=True)
        (out / folder / "analyze_000.json").write_text("{}")
    mine = {"llm/analyze_000.json", "branches/b1/iter1/llm/analyze_000.json"}
    assert {str(p.relative_to(out)) for p in record_paths(out)} == mine
    assert {str(p.relative_to(out)) for p in record_files(out)} == mine
