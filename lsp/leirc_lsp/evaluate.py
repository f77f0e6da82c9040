"""One inline evaluation, in a process of its own: ``python -m leirc_lsp.evaluate`` reads
a JSON request on stdin and writes one JSON line on stdout.

The server starts one such process per evaluation and kills its process group on a
timeout, so a kernel that crashes or hangs (the engine's worker processes already
contain most failures) can never take the server down or block its event loop.

Request: ``{"text", "kernel", "reference" (text or null), "target", "threads", "time", "rpc"
(null, or ``{"tracker": "HOST:PORT", "key"}``: run and time on a server of that tracker)}``.
Reply: :func:`leirc.ide.inline.outcome` of the evaluation.
"""

from __future__ import annotations

import json
import sys


def main() -> int:
    req = json.loads(sys.stdin.read())
    from leirc.engine.evaluate import Evaluator
    from leirc.ide.inline import outcome

    reference = req.get("reference")
    remote = None
    if req.get("rpc"):
        from leirc.lower.rpc import RemoteDevice

        try:
            remote = RemoteDevice(req["rpc"]["tracker"], req["rpc"]["key"])
        except (ValueError, KeyError, TypeError) as e:
            sys.stdout.write(json.dumps({"ok": False, "error_kind": "rpc", "error": f"bad RPC settings: {e}"}) + "\n")
            return 0
    with Evaluator(req.get("target") or "llvm", time=bool(req.get("time", True)), threads=req.get("threads"),
                   prestart=False, timeout=float(req.get("timeout", 120)), remote=remote) as ev:
        try:
            result = ev.evaluate(req["text"], kernel=req.get("kernel"), reference=reference)
            before = None
            if reference is not None and result.ok and req.get("time", True):
                before = ev.evaluate(reference, kernel=req.get("kernel"))
            out = outcome(result, before)
        except ValueError as e:  # e.g. the reference does not check
            out = {"ok": False, "error_kind": "illegal", "error": str(e).splitlines()[0] if str(e) else "invalid"}
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
