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
        # a comparison with the technique is no call for it (a trial's one-launch branch was sent these notes)
        "Single launch with a last-block-done ticket. Does less work than the multi-pass variant.",
        "One fused launch, faster versus a two-pass kernel.",
        # a parenthesis elaborates what the clause before it negates (a trial's softmax branch)
        "One block per row; removes the analysis's main bottleneck (multiple passes over X).",
        # a GEMM's consumer warpgroups that ping-pong over tiles are no multi-pass launch sequence
        "Persistent ping-pong Hopper kernel: the two consumer warpgroups alternate whole tiles.",
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
        ("Jacobi sweeps over ping-pong buffers, a fixed count of them.", "multipass"),
        ("Each sweep swaps the buffers; a flag ends the loop.", "multipass"),
        ("A block reduction of the row max (warp shuffles, then one warp).", "reductions"),
        ("Stream rows with cp.async.bulk into shared memory; no scratch.", "hopper_bulk"),
        ("A ring of 16 KB row stages filled by bulk copies, one mbarrier per stage.", "hopper_bulk"),
        ("wmma fragments on the tensor cores.", "tensor_cores"),
    ],
)
def test_words_that_name_a_topic_call_for_it(words: str, topic: str) -> None:
    assert topic in strategy_topics(words, "sm_90", [])


def test_hopper_notes_only_where_the_target_has_them() -> None:
    assert strategy_topics("TMA tensor maps and wgmma", "sm_80", []) == []


def _branch_topics(problem: str, words: str) -> list[str]:
    from cacao_tui.nodes.notes import branch_topics
    from ktt.problem import load_problem
    from tests.engine.conftest import ROOT

    shared, own = branch_topics(load_problem(ROOT / "problems" / problem), "sm_90a", words)
    return [*shared, *own]


def test_a_branch_gets_an_optional_technique_of_its_problem_only_where_its_words_call_for_it() -> None:
    # trials: the one-launch branch of multipass_sum got the repeat notes, gemm_bf16's mma.sync branch
    # the Hopper TMA/wgmma notes (docs/agent_trials.md, 2026-12-02 evening)
    mma = _branch_topics("gemm_bf16", "mma.sync with a cp.async ring, swizzled tiles and ldmatrix")
    assert "tensor_cores" in mma and "hopper_tma" not in mma
    assert "hopper_tma" in _branch_topics("gemm_bf16", "warp-specialised wgmma with TMA loads")
    one = _branch_topics("multipass_sum", "One launch: per-block partials combined by int atomics and a ticket")
    assert "multipass" not in one and "reductions" in one
    split = "Split each row over many blocks; int4 streaming pass 1, then fixed-count repeat over the partials"
    assert "multipass" in _branch_topics("multipass_sum", split)


def test_a_wgmma_branch_is_not_sent_the_mma_sync_tables() -> None:
    # trial of 2026-12-02 late: gemm_bf16's persistent wgmma branch ("ping-pong" consumers) was sent
    # the wmma / mma.sync shape tables and the repeat notes
    pingpong = "Persistent ping-pong wgmma kernel on the tensor cores: TMA ring, consumers alternate whole tiles"
    assert _branch_topics("gemm_bf16", pingpong) == ["hopper_tma"]
    both = _branch_topics("gemm_bf16", "wgmma for the main loop, an mma.sync fallback for the K tail")
    assert "tensor_cores" in both and "hopper_tma" in both
    plain = _branch_topics("gemm_bf16", "Shared-memory tiles, double-buffered, 8x8 outputs per thread")
    assert plain == ["tensor_cores"]  # no technique named: the portable tensor-core notes
    # an fp16 problem without the Hopper notes keeps them for every branch (a pre-Hopper target)
    from cacao_tui.nodes.notes import branch_topics
    from ktt.problem import load_problem
    from tests.engine.conftest import ROOT

    shared, own = branch_topics(load_problem(ROOT / "problems" / "gemm_bf16"), "sm_80", pingpong)
    assert shared == ["tensor_cores"] and own == []


def test_a_topic_ruled_out_outright_is_not_called_for_by_a_comparison() -> None:
    # trial of 2026-12-03: gemm_bf16's mma.sync branch, "(no TMA, no wgmma)", was sent the Hopper notes
    # for naming the other branch's wgmma ("a hedge if the wgmma branch is wrong", "at wgmma's rate")
    hedge = ("Multistage cp.async + ldmatrix + mma.sync m16n8k16 kernel (no TMA, no wgmma). A robust hedge if "
             "the descriptor/mbarrier machinery of the wgmma branch is wrong; mma.sync cannot issue at wgmma's rate.")
    assert _branch_topics("gemm_bf16", hedge) == ["tensor_cores"]
    # a negation that narrows the word leaves the topic in: TMA loads, plain stores
    assert "hopper_tma" in _branch_topics("gemm_bf16", "wgmma fed by TMA loads; no TMA stores, st.global instead")


def test_a_bulk_copy_branch_gets_the_bulk_notes_not_the_tensor_map_ones() -> None:
    # trial of 2026-12-03: softmax's cp.async.bulk ring was sent the ~7 KB TMA / wgmma / cluster notes
    ring = "Persistent blocks stream rows through a ring of stages filled by cp.async.bulk, one mbarrier each"
    assert _branch_topics("softmax", ring) == ["reductions", "hopper_bulk"]
    # trial of 2026-12-03 (r5): a bulk copy called a "TMA" copy is still a plain bulk copy
    loose = "Rows streamed into shared memory with cp.async/TMA bulk copies, or a single cp.async.bulk TMA copy"
    assert _branch_topics("softmax", loose) == ["reductions", "hopper_bulk"]
    wgmma = _branch_topics("gemm_bf16", "wgmma fed by TMA through an mbarrier ring; bulk stores of C")
    assert "hopper_tma" in wgmma and "hopper_bulk" not in wgmma  # the TMA notes hold the bulk copies too
