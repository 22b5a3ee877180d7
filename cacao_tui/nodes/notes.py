"""Optimisation notes by relevance: each set is sent only where the problem or the strategy can use it.

The note sets are text files under cacao_tui/prompts/notes/. A set is *relevant to the
problem* when the problem itself calls for it (16-bit inputs: the tensor-core notes, and on
sm_90 and newer the TMA / wgmma / cluster notes; an output much smaller than the inputs or a
description that says so: the reduction notes; a problem that says it runs in passes: the
multi-pass syntax). Those go into the run's stable prompt prefix, except the optional techniques
(multi-pass, Hopper; and where the Hopper notes apply, wmma / mma.sync), which go by the branch:
see ``branch_topics``. A set is *relevant to a
strategy* when its title, description or plan names what the set is about (TMA, wgmma,
shuffles, passes ...): those go with that branch's prompts. Every set, relevant or not, is
listed and returned by the authoring step's ``read_notes(topic)`` tool.

The general levers (memory, compute) go to the analysis, which turns them into the levers
that matter for this problem; the authoring step can read them on request.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cacao_tui import prompts
from ktt.half_types import HALF_DTYPES
from ktt.problem import Problem


@dataclass(frozen=True)
class Topic:
    name: str
    summary: str  # one line, for read_notes' list
    words: re.Pattern[str]  # what in a strategy's or plan's text makes it relevant
    min_arch: int = 0  # the compute capability it needs (90: Hopper)


def _words(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


TOPICS: tuple[Topic, ...] = (
    Topic("memory", "coalescing, vector loads, shared-memory tiles, bank conflicts, cp.async", _words(r"$^")),
    Topic("compute", "ILP, unrolling, the special-function unit (MUFU), occupancy, waves", _words(r"$^")),
    Topic(
        "reductions",
        "warp shuffles, block reductions, partial sums across blocks, atomics and ordering",
        # Not shuffles alone: a stencil's halo exchange uses them too (its trial was sent these notes).
        _words(r"reduc|atomic|partial sums?|\btree\b|softmax|row max|prefix sum|\bscan\b"),
    ),
    Topic(
        "multipass",
        "tuning.yaml `repeat` blocks: a launch sequence run several passes, ping-pong swaps, an until flag",
        _words(
            # not "ping-pong" alone: a GEMM's consumer warpgroups ping-pong (its trial was sent these notes)
            r"multi-?pass|two[- ]pass|several passes|\bpasses\b|\brepeat\b|\biterative\b|"
            r"ping[- ]?pong(ed)?[- ](buffers?|swaps?|arrays?|copy|copies)|swap(ped|s|ping)? (the )?buffers|"
            r"converge|several launches|until a flag|\b(first|second|final|last) pass\b|\bpass [0-9]\b"
        ),
    ),
    Topic(
        "tensor_cores",
        "wmma and mma.sync: the shapes per type, mma.sync fragment layouts, ldmatrix",
        _words(r"tensor[- ]?cores?|\bwmma\b|\bmma\b|mma\.sync|hmma|ldmatrix|\btf32\b"),
    ),
    Topic(
        "hopper_tma",
        "Hopper: TMA tensor maps and their tuning.yaml syntax, mbarriers, wgmma, warp specialisation, clusters",
        _words(
            r"\btma\b|tensor memory accelerator|wgmma|\bclusters?\b|cp\.async\.bulk\.tensor|tensor[- ]maps?|"
            r"warp[- ]speciali[sz]|setmaxnreg"
        ),
        min_arch=90,
    ),
    Topic(
        "hopper_bulk",
        "Hopper bulk copies without tensor maps: cp.async.bulk loads and stores, mbarrier rings",
        _words(r"cp\.async\.bulk(?!\.tensor)|bulk[- ]cop(y|ies)|\bbulk (loads?|stores?)\b"),
        min_arch=90,
    ),
)
BY_NAME = {t.name: t for t in TOPICS}
TOPICS_ORDER = tuple(t.name for t in TOPICS)
ANALYSIS_TOPICS = ("memory", "compute")
REDUCING = re.compile(r"\b(sum|sums|reduc\w*|softmax|norm|mean|max(imum)?|histogram|dot product|scan)\b", re.I)
PASSES = re.compile(r"multi-?pass|\bpasses\b|iterations|iterative|until|converge", re.IGNORECASE)


def arch_number(arch: str) -> int:
    digits = "".join(c for c in arch if c.isdigit())
    return int(digits) if digits else 0


def text(name: str) -> str:
    return prompts.load(f"notes/{name}").strip()


def _available(name: str, arch: str) -> bool:
    return arch_number(arch) >= BY_NAME[name].min_arch


def problem_topics(problem: Problem, arch: str) -> list[str]:
    """The note sets the problem itself calls for (the run's stable prefix)."""
    out = []
    low_precision = any(b.dtype in HALF_DTYPES for b in problem.buffers)
    low_precision = low_precision or problem.floor_flops_dtype in ("tf32", "bf16", "fp16", "fp8")
    words = f"{problem.name} {problem.description}"
    shape = problem.primary
    inputs = sum(shape.sizes[b.name] for b in problem.buffers if b.access != "write")
    outputs = sum(shape.sizes[b.name] for b in problem.validated)
    if REDUCING.search(words) or (inputs and outputs * 4 <= inputs):
        out.append("reductions")
    if PASSES.search(words):
        out.append("multipass")
    if low_precision:
        out.append("tensor_cores")
        if _available("hopper_tma", arch):
            out.append("hopper_tma")
    return out


# Techniques a problem can use but a branch need not: a branch's prompts carry them only where its
# own words (strategy, plan) call for them (a one-launch branch of a multi-pass problem, an mma.sync
# branch of a Hopper GEMM were sent them in trials); read_notes returns them on request.
OPTIONAL_TOPICS = ("multipass", "hopper_tma", "hopper_bulk")
SPEC_TOPICS = ("multipass", "hopper_tma")  # the optional techniques with tuning.yaml syntax of their own


# The words that ask for the pre-Hopper tensor-core instructions by name (not "tensor cores", which a
# wgmma branch says too).
MMA_SYNC = Topic("mma", "", _words(r"\bwmma\b|mma\.sync|\bmma\b|hmma|ldmatrix"))


# What the Hopper notes hold beyond plain bulk copies (the bare word "TMA" is said of those too).
HOPPER_BEYOND_BULK = Topic(
    "tma",
    "",
    _words(
        r"tensor memory accelerator|wgmma|\bclusters?\b|cp\.async\.bulk\.tensor|tensor[- ]maps?|warp[- ]speciali[sz]|"
        r"setmaxnreg|swizzl"
    ),
)


def branch_topics(problem: Problem, arch: str, words: str) -> tuple[list[str], list[str]]:
    """A branch's note sets: (the problem's, shared by every branch; its own words' beyond those).

    Every branch shares the problem's sets but the optional techniques, which go by its words. Where
    the Hopper notes apply, the wmma / mma.sync notes go by the branch too (a trial's wgmma branch was
    sent their fragment tables): a branch whose words ask for wgmma / TMA gets them only where it names
    wmma or mma.sync too; a branch that names neither technique gets them (the portable one)."""
    problem_wide = problem_topics(problem, arch)
    by_branch_mma = "tensor_cores" in problem_wide and "hopper_tma" in problem_wide
    per_branch = (*OPTIONAL_TOPICS, "tensor_cores") if "hopper_tma" in problem_wide else OPTIONAL_TOPICS
    shared = [t for t in problem_wide if t not in per_branch]
    own = strategy_topics(words, arch, shared)
    if by_branch_mma:
        hopper = "hopper_tma" in own
        wants_mma = _called_for(MMA_SYNC, words or "")
        if hopper and not wants_mma:
            own = [t for t in own if t != "tensor_cores"]
        elif not hopper and "tensor_cores" not in own:
            own = ["tensor_cores", *own]
    if "hopper_tma" in own and "hopper_bulk" in own and not _called_for(HOPPER_BEYOND_BULK, words):
        own = [t for t in own if t != "hopper_tma"]  # "a cp.async.bulk TMA copy": the bulk notes suffice
    if "hopper_tma" in own:  # it holds the bulk copies too
        own = [t for t in own if t != "hopper_bulk"]
    return shared, [t for t in TOPICS_ORDER if t in own]


# A word that rules its topic out: "no passes", "removes the re-read of a multi-pass kernel",
# "instead of atomics". Looked for in the same clause, shortly before the topic's word.
NEGATION = re.compile(
    r"\b(no|not|nor|without|avoid\w*|instead of|rather than|remov\w*|eliminat\w*|unlike|never|"
    r"drops?|skips?|saves?|than|versus|vs|compared)\b",
    re.IGNORECASE,
)
NEGATION_REACH = 64  # characters before the word, within its clause
_CLAUSE_END = re.compile(r"[.;:!?\n)]")  # not "(": "removes the bottleneck (multiple passes)" negates it


# A topic's word ruled out outright: "(no TMA, no wgmma)", "without clusters." -- the negation right before
# it and nothing after it that narrows it ("no TMA stores" still leaves TMA loads).
_DIRECT_NEGATION = re.compile(r"\b(no|not|without|never)\s+(any\s+)?$", re.IGNORECASE)
_NOTHING_NARROWS = re.compile(r"\s*([,;.)/]|$|\s(or|and|nor)\b)", re.IGNORECASE)


def _ruled_out(topic: Topic, words: str) -> bool:
    """Whether ``words`` rule ``topic`` out outright ("no TMA, no wgmma"): then a mention elsewhere (a
    comparison with another branch's wgmma) does not call for it."""
    for found in topic.words.finditer(words):
        if _DIRECT_NEGATION.search(words[max(0, found.start() - 12) : found.start()]) and _NOTHING_NARROWS.match(
            words, found.end()
        ):
            return True
    return False


def _called_for(topic: Topic, words: str) -> bool:
    """Whether ``words`` ask for ``topic``: one of its words used, not negated within its clause, and the
    topic not ruled out outright anywhere in them."""
    if _ruled_out(topic, words):
        return False
    for found in topic.words.finditer(words):
        before = words[max(0, found.start() - NEGATION_REACH) : found.start()]
        clause = _CLAUSE_END.split(before)[-1]
        if not NEGATION.search(clause):
            return True
    return False


def strategy_topics(words: str, arch: str, exclude: list[str]) -> list[str]:
    """The note sets a strategy's (or a plan's) own words call for, beyond ``exclude``."""
    words = words or ""
    return [t.name for t in TOPICS if t.name not in exclude and _called_for(t, words) and _available(t.name, arch)]


def notes_block(names: list[str], head: str = "Notes") -> str:
    if not names:
        return ""
    body = "\n\n".join(text(n) for n in names)
    return f"{head} ({', '.join(names)}):\n{body}\n"


def topic_index(arch: str, shown: list[str]) -> str:
    """The note topics, one line each: what read_notes(topic) returns."""
    return "\n".join(
        f"- {t.name}: {t.summary}" + (" (already in your prompt)" if t.name in shown else "")
        + ("" if _available(t.name, arch) else f" (needs sm_{t.min_arch} or newer; the target is {arch})")
        for t in TOPICS
    )  # fmt: skip


def read_notes(topic: str | None, arch: str, shown: list[str]) -> tuple[str, bool]:
    """The read_notes tool: (its answer, whether it is an error)."""
    listing = topic_index(arch, shown)
    name = (topic or "").strip().lower().replace("-", "_").replace(" ", "_")
    if not name:
        return f"Note topics (read_notes(topic) returns one):\n{listing}", False
    if name not in BY_NAME:
        return f"read_notes: no topic {topic[:60]!r}. Topics:\n{listing}", True
    return text(name), False


HOPPER_ABILITY = "- on sm_90 and newer: TMA tensor maps encoded by the tuner, thread-block clusters, wgmma;\n"


def abilities(problem: Problem, arch: str) -> str:
    """What a kernel may use (prompts/abilities.txt), with the Hopper line only where the problem can
    use it (the hopper_tma notes are relevant to it)."""
    hopper = HOPPER_ABILITY if "hopper_tma" in problem_topics(problem, arch) else ""
    return prompts.render("abilities", hopper=hopper).strip()
