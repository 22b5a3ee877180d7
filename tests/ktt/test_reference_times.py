"""reference_time.json: both forms read, seeds never overwritten nor relabelled, unusable files named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ktt.reference_times import Measurement, ReferenceTimeError, read_reference_times, record_measurements

M = Measurement(ms=0.25, device="NVIDIA H200", method="CUDA events", reference_type="cuda")


def write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "reference_time.json"
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def test_the_originals_form_is_microseconds_with_null_cases(tmp_path: Path) -> None:
    path = write(tmp_path, {"reference_time_us": 411.28, "cases": {"t100": None, "t500": 90.0}})
    times = read_reference_times(path, "t512")
    assert times.get("t512").ms == pytest.approx(0.41128) and times.get("t512").source == "seeded"
    assert times.get("t100").ms is None and times.get("t100").no_baseline  # null: no baseline
    assert times.get("t500").ms == pytest.approx(0.09)
    assert times.get("unknown").ms is None and times.get("unknown").to_measure  # not named: measure it
    assert read_reference_times(write(tmp_path, {"reference_time_us": None}), "p").get("p").no_baseline


def test_the_earlier_form_is_milliseconds_with_a_file_level_source(tmp_path: Path) -> None:
    path = write(tmp_path, {"ms": 3.0, "source": "measured", "device": "H200", "cases": {"small": 0.5}})
    times = read_reference_times(path, "default")
    assert (times.get("default").ms, times.get("default").source, times.get("default").device) == (
        3.0,
        "measured",
        "H200",
    )
    assert times.get("small").ms == 0.5
    assert read_reference_times(write(tmp_path, {"ms": 3.0}), "default").get("default").source == "seeded"


def test_a_missing_file_reads_as_empty_and_is_created_in_the_originals_form(tmp_path: Path) -> None:
    path = tmp_path / "out" / "reference_time.json"
    assert not read_reference_times(path, "default").exists
    record_measurements(path, "default", {"default": M})
    data = json.loads(path.read_text())
    assert data["reference_time_us"] == 250.0 and "cases" not in data
    prov = data["provenance"]["reference_time_us"]
    assert prov["source"] == "measured" and prov["device"] == "NVIDIA H200" and prov["measured_at"]
    assert read_reference_times(path, "default").get("default").source == "measured"


def test_only_missing_values_are_filled_in_and_a_null_stays_null(tmp_path: Path) -> None:
    seed = {"reference_time_us": 411.28, "cases": {"t100": None}, "comment": "llama.cpp, 152 runs"}
    path = write(tmp_path, seed)
    record_measurements(path, "t512", {"t512": M, "t100": M, "t1000": M})
    data = json.loads(path.read_text())
    assert data["reference_time_us"] == 411.28 and data["comment"] == "llama.cpp, 152 runs"
    assert data["cases"] == {"t100": None, "t1000": 250.0}
    assert "reference_time_us" not in data["provenance"] and "t100" not in data["provenance"]["cases"]
    times = read_reference_times(path, "t512")
    assert times.get("t512").source == "seeded" and times.get("t1000").source == "measured"
    assert times.get("t100").no_baseline
    before = path.read_text()
    record_measurements(path, "t512", {"t512": M, "t100": M})  # nothing new: the file is not touched
    assert path.read_text() == before


def test_a_null_primary_has_no_baseline_and_is_never_filled_in(tmp_path: Path) -> None:
    path = write(tmp_path, {"reference_time_us": None})
    before = path.read_text()
    record_measurements(path, "default", {"default": M})
    assert path.read_text() == before
    got = read_reference_times(path, "default").get("default")
    assert got.no_baseline and got.describe().startswith("no baseline")


def test_the_earlier_form_is_filled_in_milliseconds(tmp_path: Path) -> None:
    path = write(tmp_path, {"ms": 3.0, "source": "seeded"})
    record_measurements(path, "default", {"half": M})
    data = json.loads(path.read_text())
    assert data["ms"] == 3.0 and data["source"] == "seeded" and data["cases"] == {"half": 0.25}
    times = read_reference_times(path, "default")
    assert times.get("default").source == "seeded" and times.get("half").source == "measured"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "not valid JSON"),
        ('"fast"', "expected a JSON object"),
        ('{"reference_time_us": 0}', "reference_time_us: 0 is not a positive number of microseconds"),
        ('{"reference_time_us": true}', "reference_time_us: true is not a positive number"),
        ('{"ms": "3"}', 'ms: "3" is not a positive number of milliseconds'),
        ('{"cases": [1]}', "cases: expected an object"),
        ('{"cases": {"a": -1}}', "cases.a: -1 is not a positive number"),
        ('{"reference_time_us": 1, "source": "guessed"}', 'source: "guessed" is neither measured nor seeded'),
    ],
)
def test_an_unusable_file_is_one_line_naming_it_and_the_field(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ReferenceTimeError) as info:
        read_reference_times(path, "default")
    assert str(info.value).startswith(f"{path}: ") and expected in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(ReferenceTimeError):
        record_measurements(path, "default", {"default": M})
    assert path.read_text() == text


def test_a_directory_in_its_place_is_an_error_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "reference_time.json"
    path.mkdir()
    with pytest.raises(ReferenceTimeError, match="cannot be read"):
        read_reference_times(path, "default")
