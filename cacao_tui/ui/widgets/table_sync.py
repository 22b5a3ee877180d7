"""Update a DataTable in place by row key: change cells, add and remove rows, never rebuild."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from textual.widgets import DataTable

from cacao_tui.ui import keymap


class KeyTable(DataTable[object]):
    """A DataTable whose columns have keys, with vi keys; rows are synced with ``sync``."""

    BINDINGS = keymap.bindings(keymap.TABLE)

    def __init__(self, columns: Sequence[tuple[str, str]], **kwargs: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)  # type: ignore[arg-type]
        self._column_spec = tuple(columns)
        self.column_keys = tuple(key for key, _ in columns)
        for key, label in columns:
            self.add_column(label, key=key)

    def action_cursor_last(self) -> None:
        if self.row_count:
            self.move_cursor(row=self.row_count - 1)

    def action_cursor_first(self) -> None:
        if self.row_count:
            self.move_cursor(row=0)

    def set_columns(self, columns: Sequence[tuple[str, str]], widths: Mapping[str, int] | None = None) -> None:
        """Replace the columns (and drop the rows: the caller syncs them again)."""
        self.clear(columns=True)
        self._column_spec = tuple(columns)
        self.column_keys = tuple(key for key, _ in columns)
        for key, label in columns:
            self.add_column(label, key=key, width=(widths or {}).get(key))

    def order(self) -> list[str]:
        """The row keys, top to bottom."""
        return [str(key.value) for key in self.rows]

    def sync(self, rows: Mapping[str, Sequence[object]]) -> int:
        """Make the table show exactly ``rows`` (key -> cells); returns how many cells changed."""
        changed = 0
        present = {key.value for key in self.rows}
        for key in present - rows.keys():
            if key is not None:
                self.remove_row(key)
                changed += 1
        for key, cells in rows.items():
            if key in present:
                for column, value in zip(self.column_keys, cells, strict=True):
                    if self.get_cell(key, column) != value:
                        self.update_cell(key, column, value, update_width=True)
                        changed += 1
            else:
                self.add_row(*cells, key=key)
                changed += 1
        return changed
