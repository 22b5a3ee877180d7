import sys

from ktt.procs import exit_when_parent_dies

exit_when_parent_dies(only_when_asked=True)  # first: a ktt whose caller was killed must not run on (docs/SECURITY.md)

from ktt.cli import main  # noqa: E402

sys.exit(main())
