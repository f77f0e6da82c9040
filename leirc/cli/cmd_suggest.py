"""``leirc suggest KERNEL.leir``: the next steps worth trying, ranked, each with its
rationale -- without building or timing anything.

Offline (the default) the ranking is the search's: the analytical cost model plus the HTAM
memory's evidence (:func:`leirc.search.suggest.suggest`). With an endpoint (``--llm-base-url``
and ``--llm-model``, or ``--llm-config``) a model ranks them (:func:`leirc.search.
llm_proposers.llm_suggest`); every answer is applied through the engine, so a suggestion
printed here is always a legal step, and an answer that is not is counted and left out.
"""

from __future__ import annotations

import sys

from .llmflags import add_cache_arguments, apply_cache_arguments
from .common import add_target_argument, CliError, json_document, load_checked, positive_int, print_json, select_or_fail


def register(sub) -> None:
    from ..search.optimizer import add_llm_arguments

    p = sub.add_parser("suggest", help="rank the next optimization steps of a kernel (cost model + memory, or an LLM)",
                       description="Print the next steps worth trying on a kernel, best first, with their "
                                   "rationale. Nothing is built or timed; every suggestion is a legal step "
                                   "(apply one with `leirc apply`).")
    p.add_argument("file", metavar="KERNEL.leir")
    p.add_argument("--kernel", help="the kernel to look at (files with several kernels)")
    p.add_argument("-k", "--count", type=positive_int, default=5, metavar="N", help="suggestions to print (default 5)")
    add_target_argument(p, kinds=("llvm", "cuda"), default="llvm")
    p.add_argument("--memory", default=None, metavar="DB",
                   help="HTAM memory whose evidence joins the ranking (default: ~/.cache/leirc/memory.sqlite "
                        "when it exists; 'none': the cost model alone)")
    p.add_argument("--math", action="store_true", help="also rank the algebraic (SymPy) rewrites (slower)")
    p.add_argument("--json", action="store_true", help="print the suggestions as JSON")
    add_llm_arguments(p)
    add_cache_arguments(p)
    p.set_defaults(func=run)


def _memory(path, target):
    import os

    from ..search.memory import Memory, default_path

    if (path or "").lower() == "none":
        return None
    path = path or default_path()
    if not os.path.exists(path):
        return None  # nothing learnt yet: creating an empty memory would only hide that
    try:
        return Memory(path, target=target, warn=lambda m: print(f"leirc: warning: {m}", file=sys.stderr))
    except Exception as e:  # noqa: BLE001 - an unusable memory is reported, the cost model still ranks
        print(f"leirc: warning: cannot open the memory {path}: {e}; ranking by the cost model alone", file=sys.stderr)
        return None


def run(args) -> int:
    from ..engine.program import Program
    from ..search.optimizer import llm_config_from_args

    try:
        llm = apply_cache_arguments(args, llm_config_from_args(args))
    except ValueError as e:
        raise CliError(str(e)) from None
    cf, _ = load_checked(args.file)
    res = select_or_fail(cf, args.kernel)
    program = Program(res.kernel, res)
    memory = _memory(args.memory, args.target)
    stats = None
    try:
        if llm is None:
            from ..search.suggest import suggest

            got = suggest(program, k=args.count, target=args.target, memory=memory, include_math=args.math)
            source = "cost model + memory" if memory is not None else "cost model"
        else:
            from ..llm import LLMClient, LLMError
            from ..search.llm_proposers import llm_suggest

            try:
                client = LLMClient(llm, log=lambda m: print(f"leirc: {m}", file=sys.stderr))
            except LLMError as e:
                raise CliError(str(e), 2, kind="llm") from None
            try:
                got = llm_suggest(program, client, k=args.count, target=args.target, memory=memory)
                stats = getattr(got, "stats", None) or {"usage": client.usage.to_json()}
            except LLMError as e:
                raise CliError(f"the LLM endpoint failed: {e}", 1, kind="llm") from None
            finally:
                client.close()
            source = f"LLM ({', '.join(llm.models)})"
    finally:
        if memory is not None:
            memory.close()
    rows = [{"rank": i + 1, "step": s.step.to_json(), "text": _short(s.step), "score": round(s.score, 4),
             "predicted_speedup": round(s.predicted, 4), "direction": s.direction, "rationale": s.rationale,
             "apply": _apply_command(args, res.kernel.name, s.step)}
            for i, s in enumerate(got)]
    if args.json:
        print_json(json_document("suggest", True, file=args.file, kernel=res.kernel.name, target=args.target,
                                 source=source, suggestions=rows, stats=stats))
        return 0
    if not rows:
        print(f"{res.kernel.name}: no applicable step found ({source})")
        return 0
    print(f"{res.kernel.name} on {args.target}: {len(rows)} suggestion(s) from the {source}")
    for r in rows:
        print(f"{r['rank']:>3}. {r['text']}")
        print(f"     predicted x{r['predicted_speedup']:.3g} · {r['direction'] or 'step'} · {r['rationale']}")
        print(f"     {r['apply']}")
    return 0


def _short(step) -> str:
    if step.name == "program_rewrite":  # a whole program written by the model
        return "program_rewrite(leir=<a transformed program, see --json>)"
    return str(step)


def _apply_command(args, kernel: str, step) -> str:
    """The `leirc apply` command line that takes this step."""
    import shlex

    if step.name == "program_rewrite":
        return "(a whole program: save it from --json and compare with `leirc verify`)"
    parts = ["leirc", "apply", args.file, step.name] + [f"--arg={k}={v}" for k, v in step.kwargs.items()]
    if args.kernel:
        parts += ["--kernel", kernel]
    return " ".join(shlex.quote(p) for p in parts)
