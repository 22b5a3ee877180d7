"""Runs as processes of their own: listing the problems of a folder with their last run,
starting a run detached from the app, and following or steering a run another process owns.

Nothing here imports textual: the home screen (``cacao_tui.ui.home``) is one front end of
it, and a script could be another.
"""
