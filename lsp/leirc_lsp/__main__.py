"""``python -m leirc_lsp [--stdio | --tcp PORT]``."""

import sys

from .server import main

# guarded: a spawned worker process (the slow code-action listing) imports this module
# under another name and must not start a second server
if __name__ == "__main__":
    sys.exit(main())
