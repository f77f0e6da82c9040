"""``python -m leirc_lsp [--stdio | --tcp PORT]``."""

import sys

from .server import main

sys.exit(main())
