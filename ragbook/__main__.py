"""``python -m ragbook``: the command line of ``ragbook.cli``."""
from .cli import main

raise SystemExit(main())
