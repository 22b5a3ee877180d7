"""``SM_COUNT``: the target GPU's number of SMs, for kernels and tuning.yaml expressions.

A persistent kernel sizes its grid to the machine (``grid: {x: "SM_COUNT * BLOCKS_PER_SM"}``)
and may loop over tiles with ``gridDim.x``; without a symbol, models hard-code 132. ktt defines
``SM_COUNT`` like a problem scalar with placement ``define``: a ``-DSM_COUNT=N`` macro (and a
line of the generated inputs.hpp), and a name every expression of tuning.yaml may use
(restrictions, grid, block, shared memory, scratch sizes).

Its value: the GPU the command runs on (``tune``, ``validate``, ``profile``), else
``--sm-count``, else the table's GPU for the arch (ktt.gpu_catalog: sm_90 -> 132). A problem
that declares a scalar named ``SM_COUNT`` keeps its own.
"""

from __future__ import annotations

import contextlib
import dataclasses

from ktt.gpu_catalog import for_arch
from ktt.problem.model import Problem, Scalar
from ktt.toolkit import normalize_arch

SM_COUNT = "SM_COUNT"


def device_sm_count(ordinal: int) -> int | None:
    """The SM count of GPU ``ordinal`` through the driver (no context), or None."""
    with contextlib.suppress(Exception):
        from cuda.bindings import driver

        (err,) = driver.cuInit(0)
        if int(err) != 0:
            return None
        err, dev = driver.cuDeviceGet(ordinal)
        if int(err) != 0:
            return None
        attr = driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
        err, count = driver.cuDeviceGetAttribute(attr, dev)
        return int(count) if int(err) == 0 and int(count) > 0 else None
    return None


def sm_count_for(explicit: int | None, ordinal: int | None, arch: str | None) -> int | None:
    """``explicit`` (--sm-count), else the device's, else the catalogue's GPU for ``arch``."""
    if explicit:
        return explicit
    if ordinal is not None:
        found = device_sm_count(ordinal)
        if found:
            return found
    try:
        spec = for_arch(normalize_arch(arch)) if arch else None
    except ValueError:
        spec = None
    return spec.sm_count if spec is not None else None


def with_sm_count(problem: Problem, sm_count: int | None) -> Problem:
    """``problem`` with ``SM_COUNT`` as a define scalar of every shape (unchanged when it has one,
    or when the count is unknown)."""
    if sm_count is None or any(a.name == SM_COUNT for a in problem.args):
        return problem
    scalar = Scalar(SM_COUNT, "int", int(sm_count), ("host", "define"))
    shapes = [dataclasses.replace(s, scalars={**s.scalars, SM_COUNT: int(sm_count)}) for s in problem.shapes]
    return dataclasses.replace(problem, args=[*problem.args, scalar], shapes=shapes)


def defined_sm_count(problem: Problem) -> int | None:
    value = problem.primary.scalars.get(SM_COUNT)
    return int(value) if isinstance(value, int | float) else None
