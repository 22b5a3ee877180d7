"""``python -m cacao_tui``: the same as the ``cacao`` command."""

from cacao_tui.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
