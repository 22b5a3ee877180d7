"""The home screen (``cacao`` without ``--dir``): the problems of a folder, their runs, and
the run dialog; runs are processes of their own (``cacao_tui.runs``) that the app attaches to."""
