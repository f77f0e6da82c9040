"""One inline evaluation, in a process of its own: ``python -m leirc_lsp.evaluate`` reads
a JSON request on stdin and writes one JSON line on stdout.

The server starts one such process per evaluation and kills its process group on a
timeout, so a kernel that crashes or hangs (the engine's worker processes already
contain most failures) can never take the server down or block its event loop.

Request: ``{"text", "kernel", "reference" (text or null), "target", "threads", "time", "rpc"
(null, or ``{"tracker": "HOST:PORT", "key"}``: run and time on a server of that tracker),
"numerics" (the numerics class of the step that made the text, or null)}``.
Reply: :func:`leirc.ide.inline.outcome` of the evaluation, with the normwise bound of the
kernel's outputs (the criterion that decides equality).
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
        from leirc.lower.device import RemoteDevice

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
            out = outcome(result, before, norm_bound=_norm_bound(req["text"], req.get("kernel")),
                          numerics=req.get("numerics"))
        except ValueError as e:  # e.g. the reference does not check
            out = {"ok": False, "error_kind": "illegal", "error": str(e).splitlines()[0] if str(e) else "invalid",
                   "detail": str(e) or None}
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


def _norm_bound(text: str, kernel):
    """The loosest normwise tolerance of the kernel's float outputs (what equality is judged
    by before the arithmetic bound widens it), or None."""
    from leirc.ide.document import Document
    from leirc.verify.compare import tolerances

    seg = Document(text).segment_of(kernel)
    if seg is None or seg.kernel is None:
        return None
    bounds = [tolerances(p.dtype)[1] for p in seg.kernel.outputs if tolerances(p.dtype)[1] > 0]
    return max(bounds) if bounds else None


if __name__ == "__main__":
    sys.exit(main())
