"""``python -m leirc.cluster resources [TARGET]``: the ``--resources`` JSON that
``ray start`` needs on a node that may time for TARGET (default llvm) -- that is, this
node's target fingerprint as a Ray custom resource."""

from __future__ import annotations

import json
import sys

from .hostid import node_resources, target_fingerprint


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if not args or args[0] not in ("resources", "fingerprint") or len(args) > 2:
        print("usage: python -m leirc.cluster resources|fingerprint [TARGET]", file=sys.stderr)
        return 2
    target = args[1] if len(args) == 2 else "llvm"
    print(json.dumps(node_resources(target)) if args[0] == "resources" else target_fingerprint(target))
    return 0


if __name__ == "__main__":
    sys.exit(main())
