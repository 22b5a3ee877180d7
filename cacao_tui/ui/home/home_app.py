"""The home app: the home screen and its dialogs. It exits with a ``HomeChoice`` to open a
problem's run (``cacao_tui.ui.home.loop`` then shows the run and comes back) or None."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path

from textual.app import App, SystemCommand
from textual.screen import Screen

from cacao_tui.ui.home.attach import APP_CSS
from cacao_tui.ui.home.home_screen import HomeChoice, HomeScreen
from cacao_tui.ui.home.keys import HOME
from cacao_tui.ui.palette import OwnPalette
from cacao_tui.ui.sigterm import SigtermExit
from cacao_tui.ui.terminal_colours import TerminalColours


class HomeApp(OwnPalette, SigtermExit, TerminalColours, App[HomeChoice | None]):
    CSS_PATH = APP_CSS
    TITLE = "cacao"

    def __init__(self, folder: Path, select: Path | None = None) -> None:
        super().__init__()
        self.folder = folder
        self._select = select

    def get_default_screen(self) -> Screen:
        self.home = HomeScreen(self.folder, self._select, id="home-screen")
        return self.home

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        if isinstance(screen, HomeScreen):
            for key in HOME:
                if key.action != "quit":
                    yield SystemCommand(key.help.split(" (")[0].split(":")[0], f"{key.help} (key: {key.shown})",
                                        self._action(screen, key.action))  # fmt: skip
        yield from super().get_system_commands(screen)

    @staticmethod
    def _action(screen: Screen, action: str) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            await screen.run_action(action)

        return run
