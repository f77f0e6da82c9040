"""``leirc build MODEL.py``: the ``.py`` branch of the build command.

The build command (``leirc/cli/cmd_build.py``) hands ``.py`` inputs to :func:`build_py`:
import the KernelBench-format model, compile the kernel (-O0), verify it against the
PyTorch module on three seeds, time PyTorch eager, torch.compile and the compiled kernel,
and write into ``OUTDIR``: ``<stem>.leir``, ``<stem>.npz`` (weights), ``<stem>.so`` and
``<stem>_leirc.py`` (a KernelBench-style ``ModelNew`` that runs the compiled kernel).

Environment: ``TVM_NUM_THREADS`` (default 2) sets the thread count of both sides;
``LEIRC_BUILD_TORCH_COMPILE=0`` skips torch.compile (it takes tens of seconds on a CPU);
``LEIRC_BUILD_TIME=0`` skips all timing.
"""

from __future__ import annotations

import json
import os
import sys


def build_py(args) -> int:
    from ..cli.common import usage_error
    from .pipeline import build_model

    if getattr(args, "target", "llvm") != "llvm":
        return usage_error("a PyTorch model (.py) is built for -t llvm only (its verification runs the kernel here)")
    if str(getattr(args, "opt", "0")) != "0":
        return usage_error(f"-O{args.opt} is not available yet: only -O0 (the direct lowering) exists")
    if not os.path.isfile(args.file):
        return usage_error(f"{args.file}: no such file")
    threads = int(os.environ.get("TVM_NUM_THREADS") or 2)
    time_it = os.environ.get("LEIRC_BUILD_TIME", "1") != "0"
    compile_ = os.environ.get("LEIRC_BUILD_TORCH_COMPILE", "1") != "0"

    def log(msg):
        print(f"leirc: {msg}", file=sys.stderr, flush=True)

    rep = build_model(args.file, out_dir=args.out_dir, target="llvm", threads=threads, time_it=time_it,
                      torch_compile=compile_, wrapper=True, log=log)
    if not rep.imported:
        print(f"leirc: error: {rep.import_error}", file=sys.stderr)
        return 1
    if not rep.built:
        print(f"leirc: error: {rep.build_error}", file=sys.stderr)
        return 1
    for p in (rep.leir_path, rep.weights_path, rep.wrapper_path):
        if p:
            print(f"wrote {p}", file=sys.stderr)
    so = os.path.join(args.out_dir, os.path.splitext(os.path.basename(args.file))[0] + ".so")
    if os.path.exists(so):
        print(f"wrote {so}", file=sys.stderr)
    if time_it and rep.leirc_ms:
        se = rep.speedup_eager
        sc = rep.speedup_compile
        log("speedup of leirc -O0: " + (f"{se:.3g}x vs eager" if se else "n/a vs eager") + ", "
            + (f"{sc:.3g}x vs torch.compile" if sc else "torch.compile n/a"))
    report = os.path.join(args.out_dir, os.path.splitext(os.path.basename(args.file))[0] + ".report.json")
    with open(report, "w") as f:
        json.dump(rep.to_json(), f, indent=2)
    print(f"wrote {report}", file=sys.stderr)
    if rep.verified is False:
        print(f"leirc: error: the compiled kernel does not match the PyTorch module: {rep.verify_summary}",
              file=sys.stderr)
        return 1
    return 0
