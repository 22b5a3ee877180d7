"""exhaustive: every valid configuration in declared order (the budget may cut it short)."""

from __future__ import annotations

from ktt.space import Key
from ktt.strategies.base import Strategy


class Exhaustive(Strategy):
    name = "exhaustive"
    summary = "every valid configuration in declared order (random order when the space is too large to list)"
    exhaustive = True

    def next_key(self) -> Key | None:
        if self.keys is None:  # not listed: declared order is not known without walking the product
            return self.random_unvisited()
        while self._cursor < len(self.keys):
            key = self.keys[self._cursor]
            self._cursor += 1
            if key not in self.history.proposed:
                return key
        return self.returned_unvisited()

    def label(self) -> str:
        if self.keys is None:
            return "exhaustive (space not listed: random order)"
        if len(self.history.results) >= len(self.keys):
            return "exhaustive"
        return "exhaustive (cut by budget)"
