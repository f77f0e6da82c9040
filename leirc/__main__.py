"""``python -m leirc``: the same as the ``leirc`` command."""

from .cli.main import main

raise SystemExit(main())
