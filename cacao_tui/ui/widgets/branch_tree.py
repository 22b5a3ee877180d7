"""The branch tree: one node per branch and per iteration, created once and relabelled live."""

from __future__ import annotations

import contextlib

from rich.text import Text
from textual.message import Message
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from cacao_tui.ui import keymap
from cacao_tui.ui.formatting import ITER_STYLES, STATUS_STYLES, fmt_ms, fmt_result, status_icon
from cacao_tui.ui.run_view import RUN, BranchView, IterationView, RunView, Selection


def branch_label(b: BranchView) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(status_icon(b.status) + " ", style=STATUS_STYLES.get(b.status, ""))
    text.append(b.name, style="bold" if b.active else "")
    text.append(f" {b.iterations_done}/{b.max_iter}", style="dim")
    if b.best_ms is not None:
        text.append(f" {fmt_ms(b.best_ms)}", style="green")
        if b.speedup is not None or b.score is not None:
            text.append(f" {fmt_result(b.speedup, b.score)}", style="bold green")
    return text


def iteration_label(it: IterationView) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(f"iter{it.index} ", style="dim")
    text.append(it.status, style=ITER_STYLES.get(it.status, "yellow"))
    if it.best_ms is not None:
        text.append(f" {fmt_ms(it.best_ms)}", style="green")
    if it.action is not None and it.status != "superseded":
        text.append(f" → {it.action}", style="dim")
    if it.summary:
        text.append(f" · {it.summary}", style="dim italic")
    return text


def run_label(view: RunView) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(view.info.problem if view.info else "run", style="bold")
    text.append(f" · {view.phase}", style="dim")
    if view.best_ms is not None:
        text.append(f" {fmt_ms(view.best_ms)} {fmt_result(view.best_speedup, view.best_score)}", style="green")
    return text


class BranchTree(Tree[Selection]):
    """Relabels only what changed; the cursor stays on its node while nodes are added."""

    BINDINGS = keymap.bindings(keymap.TREE + keymap.SIDEWAYS)  # a long label: → (or z, the whole screen)

    class SelectionChanged(Message):
        def __init__(self, selection: Selection) -> None:
            super().__init__()
            self.selection = selection

    def __init__(self, **kwargs: object) -> None:
        super().__init__("run", data=Selection(), **kwargs)  # type: ignore[arg-type]
        self.guide_depth = 2
        self._branches: dict[str, TreeNode[Selection]] = {}
        self._iterations: dict[tuple[str, int], TreeNode[Selection]] = {}
        self._labels: dict[object, str] = {}
        self.relabels = 0  # how many labels were actually set (the benchmark reads it)

    def on_mount(self) -> None:
        self.root.expand()

    def action_scroll_columns(self, columns: int) -> None:
        self.scroll_relative(x=columns, animate=False)

    def _relabel(self, key: object, node: TreeNode[Selection], label: Text) -> None:
        plain = label.markup
        if self._labels.get(key) != plain:
            self._labels[key] = plain
            node.set_label(label)
            self.relabels += 1

    def _branch_node(self, view: RunView, name: str) -> TreeNode[Selection]:
        node = self._branches.get(name)
        if node is None:
            b = view.branches[name]
            parent = self.root
            if b.parent is not None and b.parent in view.branches:
                parent = self._branch_node(view, b.parent)
            node = parent.add(name, data=Selection(name), expand=True)
            self._branches[name] = node
        return node

    def sync(self, view: RunView, changed: set[str]) -> None:
        """Create missing nodes and relabel the changed ones."""
        if RUN in changed:
            self._relabel(RUN, self.root, run_label(view))
        for name in changed - {RUN}:
            if name not in view.branches:
                self._remove_branch(name)
        for name, b in view.branches.items():  # in the order the run created them
            if name not in changed:
                continue
            node = self._branch_node(view, name)
            self._relabel(name, node, branch_label(b))
            for index, it in sorted(b.iterations.items()):
                key = (name, index)
                it_node = self._iterations.get(key)
                if it_node is None:
                    # A branch's iterations first, then its sub-branches, whichever arrived first:
                    # the same tree however the events were batched.
                    first_child = next((c for c in node.children if c.data is not None and c.data.iteration is None),
                                       None)  # fmt: skip
                    it_node = node.add_leaf(f"iter{index}", data=Selection(name, index), before=first_child)
                    self._iterations[key] = it_node
                self._relabel(key, it_node, iteration_label(it))

    def _remove_branch(self, name: str) -> None:
        """A deleted branch: its node goes (a sub-branch's node went with its parent's)."""
        node = self._branches.pop(name, None)
        for key in [k for k in self._iterations if k[0] == name]:
            self._labels.pop(key, None)
            del self._iterations[key]
        self._labels.pop(name, None)
        if node is not None:
            with contextlib.suppress(Exception):
                node.remove()

    def select_branch(self, name: str) -> None:
        node = self._branches.get(name)
        if node is not None:
            self.move_cursor(node)

    @property
    def selection(self) -> Selection:
        node = self.cursor_node
        return node.data if node is not None and node.data is not None else Selection()

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted[Selection]) -> None:
        event.stop()
        self.post_message(self.SelectionChanged(event.node.data or Selection()))
