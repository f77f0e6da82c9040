from __future__ import annotations

import argparse
import sys

from .. import __version__


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="leirc", description="LEIR compiler")
    ap.add_argument("--version", action="version", version=f"leirc {__version__}")
    sub = ap.add_subparsers(dest="command")
    args = ap.parse_args(argv)
    ap.print_help()
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
