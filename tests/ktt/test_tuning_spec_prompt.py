"""The tuning.yaml prompt (cacao_tui/prompts/tuning_spec.txt) teaches what ktt's parser accepts.

Each YAML block of the prompt is loaded by ``ktt.spec`` against the tiny test problem
(buffers X, Y of N floats), with the tune parameters the block leaves to the model; the
launch-program rules the prompt states (``until`` needs ``max_passes``, a read-only input
cannot be swapped) are checked against the parser too.
"""

from __future__ import annotations

import re

import pytest
import yaml
from ktt_paths import DATA

from cacao_tui import prompts
from ktt.problem import load_problem
from ktt.spec import Repeat, SpecError, load_spec_text

FENCE = re.compile(r"^```yaml\n(.*?)^```", re.MULTILINE | re.DOTALL)
PARAMS = {"BLOCK_X": [32, 64], "TILE": [1, 2], "STEPS": [4, 8]}


def blocks() -> list[dict]:
    return [yaml.safe_load(b) for b in FENCE.findall(prompts.load("tuning_spec"))]


def load(doc: dict):  # type: ignore[no-untyped-def]
    doc = {"tune_params": {k: v for k, v in PARAMS.items() if k != "TILE"}, **doc}
    return load_spec_text(yaml.safe_dump(doc, sort_keys=False), load_problem(DATA / "tiny"))


def program() -> dict:
    found = [b for b in blocks() if any("repeat" in item for item in b.get("launches", []))]
    assert len(found) == 1, "the prompt shows one launch-program example"
    return found[0]


def test_the_basic_example_loads() -> None:
    doc = blocks()[0]  # its grid reads a scalar M the tiny problem lacks: stood in for by a parameter
    assert load({**doc, "tune_params": {**doc["tune_params"], "M": [64]}}).launches


def test_the_launch_program_example_loads() -> None:
    spec = load(program())
    loop = spec.launches[0]
    assert isinstance(loop, Repeat)
    assert (loop.var, loop.swaps, loop.until) == ("it", (("Y", "Y_tmp"),), None)
    assert loop.count is not None and loop.count.text == "STEPS"


def test_the_until_form_the_prompt_describes_loads_and_needs_max_passes() -> None:
    doc = program()
    loop = doc["launches"][0]["repeat"]
    del loop["count"]
    loop["until"] = "done"
    loop["body"][0]["args"].append("done")
    with pytest.raises(SpecError, match="max_passes"):
        load(doc)
    loop["max_passes"] = 20
    spec = load(doc)
    assert isinstance(spec.launches[0], Repeat) and spec.launches[0].until == "done"


def test_a_read_only_input_cannot_be_swapped_as_the_prompt_says() -> None:
    doc = program()
    doc["scratch"][0]["name"] = "X_tmp"
    doc["launches"][0]["repeat"]["swap"] = ["X", "X_tmp"]
    with pytest.raises(SpecError):
        load(doc)
