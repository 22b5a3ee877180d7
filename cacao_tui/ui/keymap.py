"""Every key of the app, in one place: the footer, the ``?`` screen and the command palette
are all generated from these tables, so they cannot disagree.

Only keys that every terminal sends over SSH: letters, digits, punctuation, arrows, tab,
enter, escape and ctrl+letter (ctrl+p, ctrl+q; Textual turns off XON/XOFF in raw mode).
No function keys, no alt/meta combinations, no ctrl+arrows.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding


@dataclass(frozen=True)
class Key:
    keys: str  # Textual key names, comma-separated aliases (the first is the one shown)
    action: str  # action on the screen (or widget) that owns the table
    footer: str  # short label in the footer; "" keeps it out of the footer
    help: str  # one line on the ? screen
    display: str | None = None  # how the key is written for people, when not the key name
    palette: str | None = None  # command palette title; None keeps it out of the palette
    priority: bool = False
    section: str = "App"  # heading on the ? screen

    @property
    def shown(self) -> str:
        return self.display or self.keys.split(",")[0]

    def binding(self) -> Binding:
        return Binding(
            self.keys,
            self.action,
            self.footer or self.help,
            show=bool(self.footer),
            key_display=self.display,
            priority=self.priority,
        )


# The main screen. The order here is the footer's order; only the most used keys have a footer
# label (help, pause, filter, diff, results, zoom, quit), so an 80-column footer shows them all
# and the finish notification's "b: results, q: quit" are in it. The rest: ? and ctrl+p.
MAIN: tuple[Key, ...] = (
    Key("question_mark", "help", "help", "Show this help", display="?", palette="Help: keys and screens"),
    Key(
        "p",
        "toggle_pause",
        "pause",
        "Pause or resume the selected branch",
        palette="Pause / resume branch",
        section="Branch control",
    ),
    Key(
        "P",
        "pause_all",
        "",
        "Pause every branch; press again to resume them all",
        palette="Pause / resume all",
        section="Branch control",
    ),
    Key(
        "x",
        "kill",
        "",
        "Kill the selected branch (asks first; its files stay)",
        palette="Kill branch…",
        section="Branch control",
    ),
    Key(
        "plus,equals_sign",
        "max_iter(1)",
        "",
        "Raise the selected branch's max_iter by one",
        display="+",
        palette="Raise max_iter (+1)",
        section="Branch control",
    ),
    Key(
        "minus",
        "max_iter(-1)",
        "",
        "Lower the selected branch's max_iter by one",
        display="-",
        palette="Lower max_iter (-1)",
        section="Branch control",
    ),
    Key(
        "r",
        "retry",
        "",
        "Give a failed or stopped branch one more try",
        palette="Retry branch",
        section="Branch control",
    ),
    Key(
        "m",
        "message",
        "",
        "Send the branch a message; it reaches the branch's next prompts",
        palette="Message branch…",
        section="Steering",
    ),
    Key(
        "u",
        "revert",
        "",
        "Revert the branch to an iteration and continue from its kernel",
        palette="Revert branch to iteration…",
        section="Steering",
    ),
    Key(
        "c",
        "change_decision",
        "",
        "Choose the branch's next decision instead of the model",
        palette="Change decision…",
        section="Steering",
    ),
    Key(
        "D",
        "delete",
        "",
        "Delete the branch (asks first): it moves to output/trash/",
        palette="Delete branch…",
        section="Steering",
    ),
    Key(
        "slash",
        "filter",
        "filter",
        "Filter the log (Enter keeps it, Escape clears it)",
        display="/",
        palette="Filter log…",
        section="Views",
    ),
    Key(
        "d",
        "toggle_diff",
        "diff",
        "Kernel tab: switch between the source and the diff",
        palette="Kernel: source / diff",
        section="Views",
    ),
    Key(
        "b",
        "results",
        "results",
        "Open the results view (best so far, per-branch summary)",
        palette="Results",
        section="Views",
    ),
    Key(
        "g",
        "toggle_gpus",
        "",
        "GPU panel: load, memory, clock, heat, power, lock holder (NVML)",
        palette="Show / hide the GPU panel",
        priority=True,
        section="Views",
    ),
    Key(
        "z",
        "toggle_maximize",
        "zoom",
        "Maximise the focused pane to the whole screen; z or Esc: back",
        palette="Maximise / restore the focused pane",
        section="Views",
    ),
    Key(
        "q",
        "quit",
        "quit",
        "Quit; while branches run: stop them cleanly, or detach and let the run go on",
        palette="Quit…",
    ),
    Key("1", "show_tab('log')", "", "Details: Log tab", palette="Show Log tab", section="Views"),
    Key(
        "2",
        "show_tab('llm')",
        "",
        "Details: LLM tab (prompts, responses, tool calls, tokens)",
        palette="Show LLM tab",
        section="Views",
    ),
    Key(
        "3",
        "show_tab('kernel')",
        "",
        "Details: Kernel tab (source and diff)",
        palette="Show Kernel tab",
        section="Views",
    ),
    Key(
        "4",
        "show_tab('tuning')",
        "",
        "Details: Tuning tab (progress, top configurations, failures)",
        palette="Show Tuning tab",
        section="Views",
    ),
    Key(
        "5",
        "show_tab('profile')",
        "",
        "Details: Profile tab (NCU metrics, change, roofline class)",
        palette="Show Profile tab",
        section="Views",
    ),
    Key("escape", "escape", "", "Clear the log filter / close a dialog"),
    Key("ctrl+q", "quit", "", "Quit (same as q)", display="ctrl+q"),
)

# Keys Textual provides that the help screen lists too (they are bound by Textual itself).
BUILTIN: tuple[Key, ...] = (
    Key("tab", "focus_next", "", "Next pane (tree → tabs → pane contents)"),
    Key("shift+tab", "focus_previous", "", "Previous pane"),
    Key("ctrl+p", "command_palette", "", "Command palette: every action above by name", display="ctrl+p"),
    Key("ctrl+c", "help_quit", "", "Quit (same as q), unless a text box is copying with it", display="ctrl+c"),
)

# Moving inside a pane: vi keys next to the arrows.
NAVIGATION: tuple[Key, ...] = (
    Key("j,down", "cursor_down", "", "Tree / tables: next row", display="j ↓"),
    Key("k,up", "cursor_up", "", "Tree / tables: previous row", display="k ↑"),
    Key("enter", "select_cursor", "", "Tree: expand or collapse the branch"),
)
TREE: tuple[Key, ...] = (
    Key("j", "cursor_down", "", "next", display="j"),
    Key("k", "cursor_up", "", "previous", display="k"),
)
TABLE: tuple[Key, ...] = (
    *TREE,
    Key("G,end", "cursor_last", "", "last row", display="G end"),
    Key("home", "cursor_first", "", "first row"),
)
SCROLL: tuple[Key, ...] = (  # Home goes to the top (g is the GPU panel's)
    Key("j", "scroll_down", "", "scroll down", display="j"),
    Key("k", "scroll_up", "", "scroll up", display="k"),
    Key("G", "scroll_end", "", "bottom", display="G"),
)
SIDEWAYS: tuple[Key, ...] = (  # panes whose lines may be wider than they are (ScrollPane)
    Key("right,l", "scroll_columns(10)", "", "ten columns right", display="→"),
    Key("left,h", "scroll_columns(-10)", "", "ten columns left", display="←"),
)
LOG_FILTER: tuple[Key, ...] = (Key("escape", "clear_filter", "", "Clear the log filter"),)

# Dialogs.
CONFIRM: tuple[Key, ...] = (
    Key("y", "answer(True)", "yes", "Yes"),
    Key("n,escape", "answer(False)", "no", "No", display="n"),
)
QUIT: tuple[Key, ...] = (
    Key("s", "choose('stop')", "stop", "Stop every branch cleanly (resuming the run continues it later), then quit"),
    Key("d", "choose('detach')", "detach", "Leave the app; the run goes on and prints progress lines"),
    Key("escape,n", "choose(None)", "cancel", "Back to the run", display="esc"),
)
FORM: tuple[Key, ...] = (Key("escape", "close", "cancel", "Cancel the dialog", display="esc"),)
DECISION: tuple[Key, ...] = (
    Key("c", "choose('continue')", "continue", "Continue: iterate again"),
    Key("r", "choose('retry')", "retry", "Retry: the smallest fix of what failed"),
    Key("b", "choose('branch')", "branch", "Branch into the sub-strategies the model names"),
    Key("s", "choose('stop')", "stop", "Stop the branch"),
    Key("escape,n", "choose(None)", "cancel", "Back", display="esc"),
)
CLOSE: tuple[Key, ...] = (Key("escape,q,question_mark", "close", "close", "Close", display="esc"),)
RESULTS: tuple[Key, ...] = (
    Key("escape,q", "close", "back", "Back (or quit when opened with --best)", display="esc"),
    Key("enter", "show_kernel", "kernel", "Show the selected branch's best kernel"),
)
# The results view of `cacao --best`: it is the whole app, so Esc quits, and its footer says so.
RESULTS_STANDALONE: tuple[Key, ...] = (Key("escape,q", "close", "quit", "Quit", display="esc"),)


def help_sections() -> list[tuple[str, list[Key]]]:
    sections: dict[str, list[Key]] = {
        "Branch control": [],
        "Steering": [],
        "Views": [],
        "Moving around": [],
        "App": [],
    }
    for key in MAIN:
        sections.setdefault(key.section, []).append(key)
    sections["Moving around"] += [*NAVIGATION, *BUILTIN]
    sections["Quit dialog"] = list(QUIT)
    sections["Command palette only (ctrl+p)"] = [
        Key("ctrl+p", c.action, "", f"{c.title} {c.help}") for c in PALETTE_ONLY
    ]
    return list(sections.items())


@dataclass(frozen=True)
class Command:
    """A command palette entry with no key of its own."""

    action: str
    title: str
    help: str


PALETTE_ONLY: tuple[Command, ...] = (
    Command("new_problem", "New problem…", "The problem editor on a new problem (saved only once --check passes)"),
    Command("clone_problem", "Clone this problem…", "Copy this problem's definition, without its runs, to a new name"),
)


def bindings(keys: tuple[Key, ...]) -> list[Binding]:
    return [k.binding() for k in keys]


def palette_entries(keys: tuple[Key, ...] = MAIN) -> list[Key]:
    return [k for k in keys if k.palette]
