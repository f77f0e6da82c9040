"""``leirc target [-t SPEC] [--json]``: the target leirc builds for, and why.

Prints what was detected (the OS's CPU model and the instruction-set features it grants, the
vector width, cores, caches), LLVM's name for the CPU, the features that name implies and the
OS does not grant (each one a SIGILL if a kernel used it: they are passed to LLVM as
``-mattr=-FEATURE``), the TVM target a build uses, and the fingerprint every stored result
carries. ``-t 'llvm -mcpu=NAME -mattr=+f,-g'`` shows another target the same way.
"""

from __future__ import annotations

from .common import CliError, add_target_argument, json_document, print_json


def register(sub) -> None:
    p = sub.add_parser("target", help="show the target a build uses: CPU, granted features, fingerprint",
                       description="Show the detected target (or the one -t names): the instruction-set features "
                                   "the OS grants, LLVM's CPU name, the TVM target string and the fingerprint that "
                                   "keys stored results. Exit 0, or 2 on a bad -t.")
    add_target_argument(p, kinds=("llvm", "cuda"), default="llvm")
    p.add_argument("--json", action="store_true", help="print the target as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..lower import describe_target

    try:
        d = describe_target(args.target)
    except Exception as e:  # noqa: BLE001 - TVM rejects an unknown -mcpu with its own error types
        raise CliError(f"-t {args.target}: {type(e).__name__}: {e}", 2, kind="environment") from None
    if args.json:
        print_json(json_document("target", True, target=d))
        return 0
    print(f"target      {args.target}  (fingerprint {d['fingerprint']})")
    if d["kind"] == "cuda":
        print(f"arch        {d['arch']}")
        print(f"tvm         {d['tvm']}")
        return 0
    print(f"cpu         {d.get('model') or '-'}; LLVM calls it {d.get('llvm_cpu')} (LLVM {d.get('llvm_version')}, "
          f"{d.get('triple')})")
    feats = d.get("features")
    print("features    " + (" ".join(feats) if feats is not None else "as LLVM's CPU name implies (not restricted)"))
    masked = d.get("masked") or []
    if masked:
        print("masked      " + " ".join(masked) + "  (implied by the CPU name, not granted by the OS: built with -mattr=-F)")
    print(f"vector      {d['vector_bits']} bits ({d['vector_bits'] // 32} f32 lanes); {d['cores']} core(s)")
    caches = d.get("caches") or {}
    if caches:
        print("caches      " + ", ".join(f"{k} {v // 1024} KiB" for k, v in caches.items()))
    mattr = d["tvm"].get("mattr")
    print(f"tvm         llvm -mcpu={d['tvm']['mcpu']}" + (f" -mattr={','.join(mattr)}" if mattr else ""))
    for w in d.get("why") or []:
        print(f"why         {w}")
    return 0
