import sys

from ktt.cli import main

sys.exit(main())
