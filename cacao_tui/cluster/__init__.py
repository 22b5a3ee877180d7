"""Where a run's GPU jobs go: this machine's GPUs (the default) or a Ray cluster.

The engine leases a GPU and calls a ``Tuner`` (``cacao_tui.nodes.context``); this package
supplies the Ray versions of both (``ray_backend``), the job bundle that carries a
problem's files to a node (``bundle``), what runs on the node (``remote``), the placement
each job reports (``placement``), and ``--cluster``'s parser (``spec``). Ray is an optional
extra (``pip install -e '.[cluster]'``); nothing here imports it until a Ray cluster is asked for.
"""
