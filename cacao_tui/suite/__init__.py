"""Many problems at once: ``cacao suite DIR...`` runs each as a normal run (its own output/),
as many at a time as there are GPUs to give them, and ``cacao collect DIR...`` tables the
results. ``slots`` hands out GPUs, ``runner`` starts the runs, ``collect`` reads their
output/ back, ``cli`` parses the two commands.
"""
