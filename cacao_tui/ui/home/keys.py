"""The keys of the home screen, the run dialog and an attached run's view; the footers and
the ``?`` screens are generated from these tables (the same ``Key`` rows as ui/keymap.py)."""

from __future__ import annotations

from cacao_tui.ui.keymap import Key

# Footer labels only for the most used keys (help, open, run, results, new, edit, quit): an
# 80-column footer holds them all; the rest are on ? and in the command palette.
HOME: tuple[Key, ...] = (
    Key("question_mark", "help", "help", "Show this help", display="?", section="App"),
    Key("enter,o", "open", "open", "Open the problem's run: live ones attached, finished ones read-only",
        display="enter", section="Problem"),
    Key("r", "run", "run", "Run the problem… (the run dialog; the run is a process of its own)", section="Run"),
    Key("R", "resume", "", "Resume its interrupted run, or a split run's next phase… (the run dialog, --resume)",
        section="Run"),
    Key("a", "rerun", "", "Run it again with the last run's settings… (the run dialog, filled in)",
        section="Run"),
    Key("b", "results", "results", "Results of its last run (best, per-case table, branches)", section="Problem"),
    Key("c", "check", "", "Check the problem (like --check: loads and compiles the reference)",
        section="Problem"),
    Key("n", "new", "new", "New problem… (the problem editor)", section="Problem"),
    Key("e", "edit", "edit", "Edit the problem… (the problem editor)", section="Problem"),
    Key("C", "clone", "", "Clone the problem… (its definition, without runs)", section="Problem"),
    Key("D", "delete", "", "Delete the problem (asks first): it moves to .trash/ in the folder, nothing is lost",
        section="Problem"),
    Key("S", "stop_run", "", "Stop the problem's live run (asks first; SIGTERM: a clean stop, --resume continues)",
        section="Run"),
    Key("l", "launch_log", "", "Show the run's launch log (what the run process printed)", section="Run"),
    Key("g", "toggle_gpus", "", "GPU panel: load, memory, clock, heat, power, lock holder (NVML)",
        section="App"),
    Key("q,ctrl+q", "quit", "quit", "Quit the app; runs go on (they are processes of their own)", display="q"),
)

HOME_MOVING: tuple[Key, ...] = (
    Key("j,down", "cursor_down", "", "Next problem", display="j ↓"),
    Key("k,up", "cursor_up", "", "Previous problem", display="k ↑"),
    Key("ctrl+p", "command_palette", "", "Command palette: every action by name", display="ctrl+p"),
)

# Finding a problem in a long list (bound on the home screen, listed under "Moving around").
HOME_FIND: tuple[Key, ...] = (
    Key("G,end", "cursor_last", "", "Last problem", display="G end"),
    Key("home", "cursor_first", "", "First problem"),
    Key("slash", "filter", "", "Filter the list by name (Enter keeps the filter, Esc clears it)", display="/"),
    Key("s", "sort", "", "Sort by name, last run (live first), best (best first) or when (newest first)"),
    Key("escape", "clear_filter", "", "Clear the filter", display="esc"),
)

RUN_DIALOG: tuple[Key, ...] = (
    Key("ctrl+s", "start", "start", "Start the run", display="ctrl+s"),
    Key("escape", "close", "cancel", "Cancel: nothing is started or archived", display="esc"),
)
RUN_DIALOG_MOVING: tuple[Key, ...] = (
    Key("tab", "focus_next", "", "Next field"),
    Key("shift+tab", "focus_previous", "", "Previous field"),
    Key("enter", "", "", "In a field: start the run; on a checkbox or button: press it"),
    Key("space", "", "", "Tick or untick a checkbox; open a list"),
)

# An attached run's view adds these to the run view's keys (ui/keymap.py MAIN).
ATTACHED: tuple[Key, ...] = (
    Key("S", "stop_run", "", "Stop the whole run (asks first; SIGTERM to its process: a clean stop, "
        "--resume continues)", section="Attached run"),
    Key("l", "launch_log", "", "Show the run's launch log (what the run process printed)", section="Attached run"),
)
ATTACHED_NOTE = "q leaves the view; the run goes on (it is a process of its own)"


def home_sections() -> list[tuple[str, list[Key]]]:
    sections: dict[str, list[Key]] = {"Problem": [], "Run": [], "App": []}
    for key in HOME:
        sections.setdefault(key.section, []).append(key)
    sections["Moving around"] = [*HOME_MOVING, *HOME_FIND]
    sections["Run dialog"] = [*RUN_DIALOG, *RUN_DIALOG_MOVING]
    return list(sections.items())
