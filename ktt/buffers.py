"""Device buffers of one shape: guarded allocations, pristine inputs, the reference's outputs.

Every buffer the kernel sees sits between two guard bands filled with a canary; a changed
canary after a run is an out-of-bounds write. Every buffer, ``write`` included, is uploaded
again from its page-locked pristine host copy (its ``init`` data) before every validation
run, as the original hands each buffer over with its init data: a kernel may accumulate
into a zeroed output. Under ``validation.poison_outputs`` write buffers are poisoned instead
(NaN, a NaN in every element of a 16-bit float, or a sentinel). Read-only inputs are compared
with a device copy of their pristine values after the run, so a kernel that mutates its input
is caught; a validated output is compared with the reference and, element by element, with its
init data, so one left as it started is reported as never written. The reference's outputs live in their own
allocations; candidate outputs never share memory with them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ktt.device import Gpu
from ktt.gpu_checks import CANARY32, GpuChecks, poison_word
from ktt.inputs import make_buffer
from ktt.problem.model import Problem, Shape

GUARD_BYTES = 64 * 1024


@dataclass
class Guarded:
    """One allocation: [guard | data | guard]; ``ptr`` is the data start the kernel receives."""

    base: int
    ptr: int
    nbytes: int
    label: str

    @property
    def words(self) -> int:
        return (self.nbytes + 3) // 4


def alloc_guarded(gpu: Gpu, nbytes: int, label: str) -> Guarded:
    padded = (nbytes + 255) // 256 * 256
    base = gpu.alloc(padded + 2 * GUARD_BYTES)
    g = Guarded(base, base + GUARD_BYTES, nbytes, label)
    fill_guards(gpu, g)
    return g


def fill_guards(gpu: Gpu, g: Guarded) -> None:
    """Write the canary into both guard bands (again: an earlier configuration may have hit them).
    Data that ends mid-word (an odd count of 16-bit elements...) gets its last word zeroed first,
    so the word-wise checks never read leftover bytes; the upload that follows fills the data."""
    zero_tail_word(gpu, g.ptr, g.nbytes)
    padded = (g.nbytes + 255) // 256 * 256
    gpu.memset32(g.base, CANARY32, GUARD_BYTES // 4)
    gpu.memset32(g.ptr + padded, CANARY32, GUARD_BYTES // 4)
    if padded > g.words * 4:  # the slack between the data end and the 256-byte boundary is guard too
        gpu.memset32(g.ptr + g.words * 4, CANARY32, (padded - g.words * 4) // 4)


def zero_tail_word(gpu: Gpu, ptr: int, nbytes: int) -> None:
    """Zero the last 32-bit word of ``nbytes`` of data at ``ptr`` when the data ends inside it."""
    if nbytes % 4:
        gpu.memset32(ptr + nbytes // 4 * 4, 0, 1)


def alloc_words(gpu: Gpu, nbytes: int) -> int:
    """A copy buffer of whole words, the slack of its last word zeroed (compared word by word)."""
    ptr = gpu.alloc((nbytes + 3) // 4 * 4)
    zero_tail_word(gpu, ptr, nbytes)
    return ptr


def canary_slots(checks: GpuChecks, g: Guarded) -> list[tuple[int, str]]:
    padded = (g.nbytes + 255) // 256 * 256
    head = checks.not_value(g.base, GUARD_BYTES // 4, CANARY32)
    tail_start = g.ptr + g.words * 4
    tail_words = (padded - g.words * 4 + GUARD_BYTES) // 4
    tail = checks.not_value(tail_start, tail_words, CANARY32)
    return [(head, f"{g.label}: write before its start"), (tail, f"{g.label}: write past its end")]


@dataclass
class ShapeBuffers:
    gpu: Gpu
    problem: Problem
    shape: Shape
    sets: tuple[int, ...]
    dev: dict[str, Guarded] = field(default_factory=dict)
    host: dict[tuple[int, str], np.ndarray] = field(default_factory=dict)  # pinned pristine inputs
    pristine: dict[tuple[int, str], int] = field(default_factory=dict)  # device copies of inputs
    ref_dev: dict[tuple[int, str], int] = field(default_factory=dict)
    ref_host: dict[tuple[int, str], np.ndarray] = field(default_factory=dict)
    previous: dict[str, int] = field(default_factory=dict)  # last run's outputs, for the drift check

    @classmethod
    def create(
        cls, gpu: Gpu, problem: Problem, shape: Shape, sets: tuple[int, ...], seed: int, work: Path
    ) -> ShapeBuffers:
        self = cls(gpu, problem, shape, sets)
        for b in problem.buffers:
            nbytes = shape.bytes_of(b)
            self.dev[b.name] = alloc_guarded(gpu, nbytes, b.name)
            if not problem.poisoned(b):
                for s in sets:
                    arr = make_buffer(problem, shape, b, s, seed, work)
                    pinned = gpu.pinned(nbytes, arr.dtype)
                    pinned[:] = arr
                    self.host[(s, b.name)] = pinned
                    dptr = alloc_words(gpu, nbytes)
                    gpu.h2d(dptr, pinned)
                    self.pristine[(s, b.name)] = dptr
            if b.validate:
                self.previous[b.name] = alloc_words(gpu, nbytes)
        gpu.sync()
        return self

    def set_reference(self, set_index: int, name: str, values: np.ndarray) -> None:
        b = next(x for x in self.problem.buffers if x.name == name)
        values = np.ascontiguousarray(values, dtype=b.numpy_dtype).ravel()
        if values.size != self.shape.sizes[name]:
            raise ValueError(f"reference output {name} has {values.size} elements, expected {self.shape.sizes[name]}")
        key = (set_index, name)
        if key not in self.ref_host:
            self.ref_host[key] = self.gpu.pinned(values.nbytes, values.dtype)
            self.ref_dev[key] = self.gpu.alloc(values.nbytes)
        self.ref_host[key][:] = values
        self.gpu.h2d(self.ref_dev[key], self.ref_host[key])

    def reupload_reference(self, set_index: int) -> None:
        """Refresh the device copy of a reference from the host (before accepting a best)."""
        for (s, name), host in self.ref_host.items():
            if s == set_index:
                self.gpu.h2d(self.ref_dev[(s, name)], host)

    def restore(self, set_index: int) -> None:
        """Every buffer from its pristine host copy (poisoned write buffers: the poison); fresh canaries."""
        for b in self.problem.buffers:
            g = self.dev[b.name]
            fill_guards(self.gpu, g)
            if self.problem.poisoned(b):
                self.gpu.memset32(g.ptr, poison_word(b.dtype), g.words)
            else:
                self.gpu.h2d(g.ptr, self.host[(set_index, b.name)])

    @property
    def restores_between_runs(self) -> bool:
        """Whether a timed repetition must first put writable buffers back (any that is not poisoned)."""
        return any(b.writable and not self.problem.poisoned(b) for b in self.problem.buffers)

    def restore_writable(self, set_index: int) -> None:
        """Between timed repetitions: writable buffers back to their init data (device copy), so a
        kernel that accumulates into its output sees the same start every time."""
        for b in self.problem.buffers:
            if b.writable and not self.problem.poisoned(b):
                g = self.dev[b.name]
                self.gpu.d2d(g.ptr, self.pristine[(set_index, b.name)], g.nbytes)

    def argument(self, name: str) -> int:
        return self.dev[name].ptr

    def queue_checks(self, checks: GpuChecks, set_index: int, compare: bool = True) -> list[tuple[int, str, str]]:
        """Queue canary, mutation and comparison checks; returns (slot, kind, label) triples."""
        out: list[tuple[int, str, str]] = []
        for g in self.dev.values():
            out += [(slot, "oob", label) for slot, label in canary_slots(checks, g)]
        for b in self.problem.buffers:
            if b.access == "read":
                g = self.dev[b.name]
                out.append((checks.diff_words(g.ptr, self.pristine[(set_index, b.name)], g.words), "mutated", b.name))
        if compare:
            for b in self.problem.validated:
                g = self.dev[b.name]
                n = self.shape.sizes[b.name]
                init = self.pristine.get((set_index, b.name))  # None when poisoned: the poison marks it
                slot = checks.compare(
                    b.dtype, g.ptr, self.ref_dev[(set_index, b.name)], n, self.problem.tolerance, init=init,
                    rtol=self.problem.rtol,
                )  # fmt: skip
                out.append((slot, "compare", b.name))
        return out

    def save_outputs(self) -> None:
        for b in self.problem.validated:
            g = self.dev[b.name]
            self.gpu.d2d(self.previous[b.name], g.ptr, g.nbytes)

    def queue_drift(self, checks: GpuChecks) -> list[tuple[int, str, str]]:
        out = []
        for b in self.problem.validated:
            g = self.dev[b.name]
            out.append((checks.diff_words(g.ptr, self.previous[b.name], g.words), "drift", b.name))
        return out

    def free(self) -> None:
        gpu = self.gpu
        for g in self.dev.values():
            gpu.free(g.base)
        for p in self.pristine.values():
            gpu.free(p)
        for p in self.ref_dev.values():
            gpu.free(p)
        for p in self.previous.values():
            gpu.free(p)
        for arr in [*self.host.values(), *self.ref_host.values()]:
            gpu.free_pinned(arr)
        self.dev.clear()
        self.pristine.clear()
        self.ref_dev.clear()
        self.previous.clear()
        self.host.clear()
        self.ref_host.clear()
