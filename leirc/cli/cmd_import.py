"""``leirc import MODEL.py [-o OUT.leir]``: a KernelBench-format PyTorch module -> one LEIR kernel.

The model file is executed in-process (it is the user's own PyTorch code), traced with
torch.fx and translated. With ``-o OUT.leir`` the parameters and buffers are saved to
``OUT.npz`` (keyed by the LEIR input names); without it the LEIR text goes to standard
output (``--weights W.npz`` saves the weights). ``--verify`` runs the kernel against the
PyTorch module on three input seeds. Exit 0 on success, 1 when the model cannot be imported
(unsupported operator: the message names it and its source line) or does not verify, 2 on
usage/IO errors.
"""

from __future__ import annotations

import os
import sys

from .common import add_target_argument, CliError, Progress, write_npz, write_output


def register(sub) -> None:
    p = sub.add_parser("import", help="import a PyTorch (KernelBench-format) module as a LEIR kernel",
                       description="Trace a KernelBench-format model file (class Model, get_inputs, get_init_inputs) "
                                   "with torch.fx and emit one self-contained declared LEIR kernel.")
    p.add_argument("model", metavar="MODEL.py", nargs="?", help="the model file")
    p.add_argument("--list-ops", action="store_true",
                   help="list the PyTorch operators the frontend translates (from its registration tables) and exit")
    p.add_argument("--markdown", action="store_true",
                   help="with --list-ops: as the Markdown of docs/frontend-ops.md")
    p.add_argument("-o", "--output", metavar="OUT.leir",
                   help="write the kernel here and the weights to OUT.npz (default: kernel to stdout)")
    p.add_argument("--weights", metavar="W.npz", help="where to save the weights (default: next to -o)")
    p.add_argument("--verify", action="store_true", help="verify against the PyTorch module on seeds 0, 1, 2")
    add_target_argument(p, kinds=("interp", "llvm"), default="interp", help="what runs the LEIR side of --verify (default: the reference interpreter)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=run)


def run(args) -> int:
    if args.list_ops:  # the tables need no torch: a user can ask before installing it
        if args.model is not None:
            raise CliError("--list-ops takes no MODEL.py")
        from ..frontend.ops.catalog import markdown, text

        sys.stdout.write(markdown() if args.markdown else text())
        return 0
    if args.markdown:
        raise CliError("--markdown goes with --list-ops")
    if args.model is None:
        raise CliError("give a MODEL.py to import (or --list-ops)")
    from ..driver import UsageError, require_torch

    try:
        require_torch()
    except UsageError as e:
        raise CliError(str(e), 2, kind="environment") from None
    from ..frontend import FrontendError, import_model

    if not os.path.isfile(args.model):
        raise CliError(f"{args.model}: " + ("is a directory" if os.path.isdir(args.model) else "no such file"), 2,
                       kind="io")
    progress = Progress(args.quiet)
    progress.stage(f"importing {args.model} (torch.fx trace, shape propagation, translation)")
    try:
        res = import_model(args.model)
    except FrontendError as e:
        raise CliError(str(e), 1, kind="import") from None
    weights_path = args.weights
    if args.output:
        write_output(args.output, res.text)
        if weights_path is None:
            weights_path = os.path.splitext(args.output)[0] + ".npz"
    else:
        sys.stdout.write(res.text)
    if weights_path:
        write_npz(weights_path, res.weights)
    n_par = sum(int(v.size) for v in res.weights.values())
    where = f" -> {args.output}" if args.output else ""
    wmsg = f", weights ({len(res.weights)} tensors, {n_par} values) -> {weights_path}" if weights_path else ""
    print(f"imported {args.model}{where}{wmsg}", file=sys.stderr)
    if args.verify:
        progress.stage(f"verifying against the PyTorch module on {args.target}")
        # the module runs in the oracle's worker process, not in the compiler's
        from ..engine.oracles import OracleError, summary, verify_model

        try:
            rep = verify_model(args.model, res.text, res, target=args.target)
        except OracleError as e:
            raise CliError(str(e), 1, kind="verify") from None
        print(("ok: " if rep.equal else "FAILED: ") + summary(rep), file=sys.stderr)
        if not rep.equal:
            return 1
    return 0
