"""A launch program evaluated for one configuration: what the GPU worker runs, as JSON-ready nodes.

tuning.yaml's ``launches`` may hold ``repeat`` blocks (docs/TUNING_SPEC.md, "Launch
programs"). Everything that does not depend on the device is settled here, in the
orchestrator, before the configuration reaches the GPU: each launch's grid, block, shared
memory and scalar arguments for every pass (a body that reads its loop variable is
evaluated once per pass, one that does not is evaluated once), the pass counts, the swap
partners' sizes, the cap on launches per run and the cap on evaluated nodes (launches, loops
and the passes of loops whose body reads its variable: nested loops whose innermost body
makes no launch at all cost no launches, so they are bounded by this one). A bad value is one ExpressionError
naming the tuning.yaml field, so the configuration fails as ``launch_failed`` without
costing GPU time. Only the ``until`` flags are left to the worker (ktt.sequence).

A node is either a launch ``{"kernel", "label", "grid", "block", "smem", "stream",
"args"}`` (plus ``"cluster": [x, y, z]`` and ``"non_portable"`` for a cluster launch) or
``{"repeat": {"label", "var", "passes", "until", "swap", "body"|"bodies"}}`` where ``bodies``
holds one body per pass. A tensor-map argument is ktt.tensor_map.TensorMapGeometry.to_json(),
checked here against its buffer's size; the worker encodes it for the buffer's address.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ktt.expressions import Expression, ExpressionError, Number
from ktt.problem.files import DTYPES
from ktt.problem.model import Shape
from ktt.spec import (
    MAX_LAUNCHES_PER_RUN,
    MAX_PASSES,
    Config,
    Launch,
    LaunchFieldError,
    ProgramItem,
    Repeat,
    TuningSpec,
    evaluate_launch,
)
from ktt.tensor_map import TensorMapGeometry, geometry_problem

Node = dict[str, Any]
# Nodes one evaluation may build: each launch, each repeat block and each pass of a block
# evaluated per pass (reaching the cap: 2.1 s, 89 MB here). 10,000 passes of two launches take
# 30,001, the most per-pass nesting under MAX_LAUNCHES_PER_RUN about 80,000; before this cap, three
# nested loops of 10,000 passes whose innermost made zero launches built 10^8 nodes (5 GB).
MAX_PROGRAM_NODES = 100_000


class _Budget:
    """Counts the launches one run will make (until loops at max_passes) against the cap."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def add(self, n: int, label: str) -> None:
        self.used += n
        if self.used > self.limit:
            raise ExpressionError(
                f"{label}: the program makes more than {self.limit:,} launches per run "
                "(until loops counted at max_passes); lower the pass counts"
            )


class _NodeCount:
    """Counts the nodes one evaluation builds against MAX_PROGRAM_NODES."""

    def __init__(self, limit: int = MAX_PROGRAM_NODES) -> None:
        self.limit = limit
        self.used = 0

    def add(self, label: str) -> None:
        self.used += 1
        if self.used > self.limit:
            raise ExpressionError(
                f"{label}: the program's loops evaluate more than {self.limit:,} launches, loops and passes "
                "for one configuration; lower the pass counts"
            )


def evaluate_program(spec: TuningSpec, config: Config, shape: Shape) -> list[Node]:
    """The whole program for one configuration and shape. Raises ExpressionError (field named)."""
    env = spec.env(config, shape)
    sizes = {name: (shape.sizes[name], dtype) for name, dtype in spec.buffer_dtypes.items() if name in shape.sizes}
    scratch = spec.scratch_sizes(config, shape)
    for s in spec.scratch:
        sizes[s.name] = (scratch[s.name], s.dtype)
    loop_vars = {item.var for item in _repeats(spec.launches)}
    nodes, _ = _Evaluator(sizes, _Budget(MAX_LAUNCHES_PER_RUN), loop_vars).items(spec.launches, env, ())
    return nodes


def _repeats(items: list[ProgramItem] | tuple[ProgramItem, ...]) -> list[Repeat]:
    out: list[Repeat] = []
    for item in items:
        if isinstance(item, Repeat):
            out += [item, *_repeats(item.body)]
    return out


class _Evaluator:
    def __init__(self, sizes: dict[str, tuple[int, str]], budget: _Budget, loop_vars: set[str]) -> None:
        self.sizes = sizes
        self.budget = budget
        self.nodes = _NodeCount()
        self.loop_vars = loop_vars
        # Values of expressions that read no loop variable: the same in every pass, computed once.
        self.cache: dict[tuple[int, bool], Number] = {}

    def value(self, expr: Expression, env: dict[str, Number], integer: bool) -> Number:
        if expr.names & self.loop_vars:
            return expr.evaluate_int(env) if integer else expr.evaluate(env)
        key = (id(expr), integer)
        found = self.cache.get(key)
        if found is None:
            found = self.cache[key] = expr.evaluate_int(env) if integer else expr.evaluate(env)
        return found

    def items(
        self, items: list[ProgramItem] | tuple[ProgramItem, ...], env: dict[str, Number], loops: tuple[str, ...]
    ) -> tuple[list[Node], int]:
        """(nodes, launches they make per run)."""
        nodes: list[Node] = []
        launches = 0
        for item in items:
            self.nodes.add(item.label)
            if isinstance(item, Repeat):
                node, n = self.repeat(item, env, loops)
            else:
                self.budget.add(1, item.label)
                node, n = self.launch(item, env, loops), 1
            nodes.append(node)
            launches += n
        return nodes, launches

    def launch(self, launch: Launch, env: dict[str, Number], loops: tuple[str, ...]) -> Node:
        try:
            g = evaluate_launch(launch, env, self.value)
        except LaunchFieldError as exc:
            raise ExpressionError(f"{launch.label}.{exc.field}: {exc.message}{_at(env, loops)}") from None
        except ExpressionError as exc:
            raise ExpressionError(f"{launch.label}: {exc}{_at(env, loops)}") from None
        args = []
        for j, (a, value) in enumerate(g.args):
            if a.kind == "value":
                args.append({"kind": "value", "dtype": a.dtype, "value": value})
            elif isinstance(value, TensorMapGeometry):
                count, dtype = self.sizes[a.name]
                nbytes = count * DTYPES[dtype][1]
                bad = geometry_problem(value, nbytes, f"{a.name!r} ({count:,} elements of {dtype})")
                if bad is not None:
                    raise ExpressionError(f"{launch.label}.args[{j}].{bad[0]}: {bad[1]}{_at(env, loops)}")
                args.append(value.to_json())
            else:
                args.append({"kind": a.kind, "name": a.name})
        node: Node = {
            "kernel": g.kernel,
            "label": launch.label,
            "grid": list(g.grid.as_tuple()),
            "block": list(g.block.as_tuple()),
            "smem": g.shared_mem,
            "stream": g.stream,
            "args": args,
        }
        if g.cluster is not None:
            node["cluster"] = list(g.cluster.as_tuple())
            node["non_portable"] = g.non_portable
        return node

    def repeat(self, rep: Repeat, env: dict[str, Number], loops: tuple[str, ...]) -> tuple[Node, int]:
        field = f"{rep.label}.count" if rep.count is not None else f"{rep.label}.max_passes"
        try:
            passes = rep.passes.evaluate_int(env)
        except ExpressionError as exc:
            raise ExpressionError(f"{field}: {exc}{_at(env, loops)}") from None
        low = 0 if rep.count is not None else 1
        if not low <= passes <= MAX_PASSES:
            raise ExpressionError(f"{field}: evaluates to {passes}, out of range {low}..{MAX_PASSES:,}")
        for a, b in rep.swaps:
            (na, ta), (nb, tb) = self.sizes[a], self.sizes[b]
            if na != nb or ta != tb:
                raise ExpressionError(f"{rep.label}.swap: {a!r} has {na:,} elements but {b!r} has {nb:,}")
        node: dict[str, Any] = {
            "label": rep.label,
            "var": rep.var,
            "passes": passes,
            "until": rep.until,
            "swap": [list(p) for p in rep.swaps],
        }
        inner = (*loops, rep.var)
        if rep.var in rep.names():
            bodies, total = [], 0
            for p in range(passes):  # the budgets stop this: MAX_LAUNCHES_PER_RUN launches, MAX_PROGRAM_NODES nodes
                self.nodes.add(rep.label)
                body, n = self.items(rep.body, {**env, rep.var: p}, inner)
                bodies.append(body)
                total += n
            node["bodies"] = bodies
            return {"repeat": node}, total
        # The body does not read the loop variable: one evaluation serves every pass.
        outer = self.budget
        self.budget = _Budget(outer.limit - outer.used)
        try:
            body, n = self.items(rep.body, env, inner)
        finally:
            self.budget = outer
        if passes:
            outer.add(n * passes, rep.label)
        node["body"] = body
        return {"repeat": node}, n * passes


def _at(env: dict[str, Number], loops: tuple[str, ...]) -> str:
    """Where in the loops an error happened: ' (at pass = 3)'."""
    shown = [f"{v} = {env[v]}" for v in loops if v in env]
    return f" (at {', '.join(shown)})" if shown else ""


def iter_launches(nodes: list[Node]) -> Iterator[Node]:
    """Every launch node of an evaluated program (each pass's body of a per-pass loop included)."""
    for node in nodes:
        rep = node.get("repeat")
        if rep is None:
            yield node
            continue
        for body in rep.get("bodies", [rep.get("body", [])]):
            yield from iter_launches(body)


def program_kernels(nodes: list[Node]) -> list[str]:
    """The kernels a program launches, each once, in first-use order."""
    return list(dict.fromkeys(launch["kernel"] for launch in iter_launches(nodes)))


def launches_per_run(nodes: list[Node]) -> int:
    """Launches of one run when every until loop runs to max_passes (exact for count loops)."""
    total = 0
    for node in nodes:
        rep = node.get("repeat")
        if rep is None:
            total += 1
        elif "bodies" in rep:
            total += sum(launches_per_run(b) for b in rep["bodies"])
        else:
            total += rep["passes"] * launches_per_run(rep["body"])
    return total


def has_until(nodes: list[Node]) -> bool:
    """True when a loop's pass count is known only on the device: launches per run then vary.

    ``ktt profile`` then profiles the first run (no warm-up run to skip: ncu skips launches
    by count, and an until loop's count is not known before it runs)."""
    for node in nodes:
        rep = node.get("repeat")
        if rep is not None and (
            rep.get("until") or any(has_until(b) for b in rep.get("bodies", [rep.get("body", [])]))
        ):
            return True
    return False


def is_flat(nodes: list[Node]) -> bool:
    return all("repeat" not in node for node in nodes)
