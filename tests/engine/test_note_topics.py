"""Which note sets a strategy's own words call for (nodes/notes.py): a word that names a topic
calls for it unless its clause rules it out. The two model-in-the-loop trials of 2026-12-02 were
sent the multipass notes for "one launch, no scratch, no passes" and "Removes the 3x re-read of a
multi-pass kernel", and the reductions notes for a stencil's halo shuffles."""

from __future__ import annotations

import pytest

from cacao_tui.nodes.notes import strategy_topics


@pytest.mark.parametrize(
    "words",
    [
        "One kernel, one launch, no scratch, no passes.",
        "Removes the 3x re-read of a multi-pass kernel (exactly 134 MB moved).",
        "W/E halo: __shfl_up/down_sync of the neighbouring lane's float4; take part in the shuffles.",
        "A single sweep, without atomics or partial sums.",
        "Keeps each row on chip instead of a two-pass scheme.",
    ],
)
def test_words_that_rule_a_topic_out_call_for_none(words: str) -> None:
    assert strategy_topics(words, "sm_90", []) == []


@pytest.mark.parametrize(
    ("words", "topic"),
    [
        ("A two-pass kernel: pass 1 writes partial sums per block, pass 2 adds them.", "reductions"),
        ("A two-pass kernel: pass 1 writes partial sums per block, pass 2 adds them.", "multipass"),
        ("Iterative: several passes until a flag says it converged.", "multipass"),
        ("A block reduction of the row max (warp shuffles, then one warp).", "reductions"),
        ("Stream rows with cp.async.bulk into shared memory; no scratch.", "hopper_tma"),
        ("wmma fragments on the tensor cores.", "tensor_cores"),
    ],
)
def test_words_that_name_a_topic_call_for_it(words: str, topic: str) -> None:
    assert topic in strategy_topics(words, "sm_90", [])


def test_hopper_notes_only_where_the_target_has_them() -> None:
    assert strategy_topics("TMA tensor maps and wgmma", "sm_80", []) == []
