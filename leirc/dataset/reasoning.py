"""A structured reasoning trace for one step, grounded in the actual programs.

Step-TP's chain-of-thought texts are per-strategy templates; here every field is computed
from the two checked programs and the :class:`~leirc.engine.program.Rewrite` between them:

* ``precondition`` -- the site the strategy enumerated and the checker's facts at it (loop
  kind and extent, statement kind, reduction operator, reduction and dependence-carrying
  loops): why the step was legal here;
* ``changes`` -- what changed in the IR state: the top-level items touched and produced,
  loop headers before and after, accesses added or removed, scopes changed, tensors and
  loops created (the rewrite's handles), and the numerics class of this application;
* ``rationale`` -- why it should help, a sentence per strategy instantiated with the names
  above (it states the mechanism, not a promise);
* ``measured`` -- the measured effect (speedup on the target, equal, bitwise-equal, errors),
  kept apart because it is a measurement: two runs of the same generation differ only there.

:func:`render` turns a trace into the ``<think>`` text of the chat export.
"""

from __future__ import annotations

from typing import Optional

from ..lang import ast as A
from ..lang.printer import COMPACT, print_expr

#: below this (ms) a measured time is mostly call overhead; the text does not claim a speedup
MIN_TIMED_MS = 0.01
_KIND_TEXT = {"assign": "an assignment", "reduce": "a reduction", "update": "an update", "scan": "a scan"}
_KIND = {"L": "serial", "P": "parallel", "V": "vectorized", "U": "unrolled", "B": "bound"}


def _header(loop: A.Loop) -> str:
    return f"{loop.kind}^{{{loop.extent}}}_{{{loop.var}}}"


def _loops(item) -> list[str]:
    return [_header(n) for n in A.walk(item) if isinstance(n, A.Loop)]


def _accesses(item) -> set[str]:
    out = set()
    for n in A.walk(item):
        if isinstance(n, A.Access):
            out.add(print_expr(n, COMPACT))
    return out


def _scopes(kernel: A.Kernel) -> dict[str, str]:
    out: dict[str, str] = {}
    for n in A.walk(kernel):
        if isinstance(n, A.Access):
            out.setdefault(n.name, n.scope)
        elif isinstance(n, A.Alloc):
            out[n.name] = n.scope
    return out


def _item(kernel: A.Kernel, path) -> object:
    node: object = kernel
    for i in path:
        node = node.body[i]  # type: ignore[attr-defined]
    return node


def _stmt_facts(si) -> dict:
    d = {"kind": si.kind, "loops": [_header(l) for l in si.loops]}
    if si.op is not None:
        d["op"] = si.op
    if si.reduce_vars:
        d["reduce_over"] = list(si.reduce_vars)
    if si.carried:
        d["carried_by"] = sorted(si.carried)
    return d


#: argument kinds that name a place in the program (the others are values: factors, scopes)
ADDRESS_KINDS = ("loop", "nest", "stmt")


def precondition(program, site: Optional[dict], step_args: dict, strategy=None) -> dict:
    """The site and the checker's facts at the loops, nests and statements the step names."""
    kinds = {a.name: a.kind for a in strategy.args} if strategy is not None else {}
    facts = []
    for name, value in sorted(step_args.items()):
        if kinds.get(name) == "tensor" and isinstance(value, str):
            ti = program.result.tensors.get(value)
            if ti is not None:
                facts.append({"arg": name, "tensor": value, "role": ti.role, "dtype": ti.dtype, "scope": ti.scope,
                              "shape": list(ti.shape) if ti.shape is not None else None})
            continue
        if kinds.get(name, "loop" if isinstance(value, str) else None) not in ADDRESS_KINDS:
            continue
        if kinds.get(name) == "nest" and isinstance(value, int):
            value = f"N{value}"
        try:
            path = program.path_of(value)
        except (KeyError, TypeError):
            continue
        node = program.item_at(path)
        if isinstance(node, A.Loop) and kinds.get(name) != "nest":
            f = {"arg": name, "ref": value, "loop": _header(node), "loop_kind": _KIND.get(node.kind, node.kind)}
            stmts = [program.info_at(p) for r, p in program.stmts() if p[:len(path)] == path]
            reduced = sorted({s.stmt.target.name for s in stmts if node.var in s.reduce_vars})
            carried = sorted({s.stmt.target.name for s in stmts if node.var in s.carried})
            f["reduces"] = reduced
            f["carries_dependence_of"] = carried
            facts.append(f)
        elif isinstance(node, A.Assign):
            facts.append({"arg": name, "ref": value, "stmt": print_expr(node.target, COMPACT),
                          **_stmt_facts(program.info_at(path))})
        else:
            stmts = [program.info_at(p) for r, p in program.stmts() if p[:len(path)] == path]
            facts.append({"arg": name, "ref": value, "item": type(node).__name__.lower(), "loops": _loops(node),
                          "writes": sorted({si.stmt.target.name for si in stmts}),
                          "reads": sorted({n.name for si in stmts for n in A.walk(si.stmt.value)
                                           if isinstance(n, A.Access)})})
    out = {"site": (site or {}).get("description", ""), "facts": facts}
    return out


def changes(before, rewrite) -> dict:
    """What the rewrite changed, from the touched/produced items of both kernels."""
    after = rewrite.program
    old_items = [_item(before.kernel, p) for p in rewrite.touched]
    new_items = [_item(after.kernel, p) for p in rewrite.produced]
    old_acc = set().union(*[_accesses(i) for i in old_items]) if old_items else set()
    new_acc = set().union(*[_accesses(i) for i in new_items]) if new_items else set()
    s0, s1 = _scopes(before.kernel), _scopes(after.kernel)
    scopes = {n: [s0.get(n), s1[n]] for n in sorted(s1) if s0.get(n) != s1[n]}
    return {
        "touched": [list(p) for p in rewrite.touched],
        "produced": [list(p) for p in rewrite.produced],
        "loops_before": [_loops(i) for i in old_items],
        "loops_after": [_loops(i) for i in new_items],
        "accesses_removed": sorted(old_acc - new_acc),
        "accesses_added": sorted(new_acc - old_acc),
        "scopes": scopes,
        "created": dict(rewrite.created),
        "nests": [len(before.kernel.body), len(after.kernel.body)],
        "statements": [len(before.result.stmts), len(after.result.stmts)],
        "numerics": rewrite.numerics,
    }


#: the mechanism by which a strategy can pay off, per strategy; ``{loop}``, ``{created}``,
#: ``{target}`` are filled from the trace
_WHY = {
    "loop_parallelization": "the iterations of {loop} carry no dependence, so a P loop runs them on several cores",
    "loop_vectorization": "{loop} is innermost and independent, so a V loop lets one SIMD instruction do several iterations",
    "loop_unrolling": "unrolling {loop} removes its loop overhead and exposes its iterations to instruction scheduling",
    "loop_binding": "binding {loop} to a GPU axis runs its independent iterations on different threads or blocks",
    "loop_reorder": "the new loop order changes which index is innermost, and with it the stride of the accesses",
    "loop_split": "splitting {loop} creates an inner loop of a fixed size that can be vectorized, unrolled or bound",
    "loop_tiling": "tiling keeps a block of the iteration space (and the data it touches) in cache while it is reused",
    "loop_fusion": "one loop over the combined range halves the loop overhead and makes the range parallelizable as one",
    "operator_fusion": "computing producer and consumer in one nest keeps the intermediate in registers instead of memory",
    "operator_fission": "separate nests can each be scheduled (reordered, vectorized) on their own",
    "compute_inline": "substituting the producer removes an intermediate tensor and a pass over memory",
    "expression_splitting": "a sub-expression in its own nest can be scheduled separately or shared",
    "common_subexpression_elimination": "the repeated sub-expression is computed once and reused",
    "dead_code_elimination": "the removed nest computed values nobody reads",
    "expression_reorder": "independent nests in another order can enable fusion with their neighbours",
    "tensor_concat_to_fuse_operators": "two operators with the same shape of computation run as one over concatenated data",
    "tensor_split_to_decouple_operators": "two halves of the computation can be scheduled independently",
    "reduction_factorization": "independent partial reductions expose parallelism inside the reduction",
    "cache_read_write": "a copy in {scope} memory serves the repeated accesses from faster storage",
    "set_storage_scope": "an intermediate in {scope} memory is cheaper to access than global memory",
    "set_storage_layout": "the intermediate's new layout makes its accesses contiguous",
    "layout_transformation": "a re-laid-out copy makes the accesses of the statement contiguous",
    "vectorized_memory_access": "a contiguous copy allows vector loads",
    "precompute_indices": "the index arithmetic is computed once into a table instead of per access",
    "online_softmax": "a streaming softmax needs one pass over the row for max and sum instead of two",
    "normal_loop_summation_on_exp_to_prefix_summation_on_exp":
        "a running max with a rescaled running sum fuses the max pass into the sum pass",
    "normal_loop_max_to_prefix_max": "a running max turns the reduction into a scan that later streaming rewrites build on",
    "flashattention_wo_tiling": "streaming P.V with rescaling avoids materializing the attention matrix",
    "normal_matmul_to_prefix_matmul_based_on_online_softmax":
        "the matmul after a softmax accumulates with rescaling while the softmax streams",
}


def rationale(strategy, pre: dict, ch: dict, target: str) -> str:
    loop = next((f["loop"] for f in pre.get("facts", []) if "loop" in f), "the loop")
    scope = next((s[1] for s in ch.get("scopes", {}).values()), None) or next(
        (v for f in pre.get("facts", []) for k, v in f.items() if k == "scope"), "local")
    scope_name = {"l": "local", "s": "shared", "g": "global"}.get(scope, scope)
    created = ", ".join(f"{k}={v}" for k, v in ch.get("created", {}).items()) or "nothing"
    text = _WHY.get(strategy.name)
    if text is None:
        if strategy.level == "math":
            text = "an algebraically equivalent form can be cheaper to evaluate or enable a later rewrite"
        else:
            text = strategy.summary or strategy.name
    text = text.format(loop=loop, scope=scope_name, created=created, target=target)
    return f"{text} (target {target}; {strategy.level} level, {ch.get('numerics', strategy.numerics)})"


def measured(ev, base_ms: Optional[float], target: str) -> dict:
    rep = ev.verify
    ms = ev.timing.median_ms if ev.timing is not None and ev.timing.ok else None
    speedup = (base_ms / ms) if (base_ms and ms) else None
    return {"target": target, "equal": bool(rep.equal) if rep else False, "bitwise": bool(rep.bitwise) if rep else False,
            "max_abs_err": _num(rep.max_abs_err) if rep else None, "original_ms": base_ms, "transformed_ms": ms,
            "speedup": round(speedup, 4) if speedup else None}


def _num(x):
    import math

    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return None if x is None or math.isnan(x) else str(x)
    return x


def trace(strategy, before, rewrite, site: Optional[dict], step_args: dict, target: str) -> dict:
    pre = precondition(before, site, step_args, strategy)
    ch = changes(before, rewrite)
    return {"precondition": pre, "changes": ch, "rationale": rationale(strategy, pre, ch, target)}


def _nests(nests: list) -> str:
    return "; ".join(" ".join(n) or "(no loop)" for n in nests) or "(none)"


def render(reasoning: dict, strategy: str) -> str:
    """The trace as text (the ``<think>`` part of a chat example)."""
    pre, ch = reasoning["precondition"], reasoning["changes"]
    lines = [f"Strategy: {strategy}. Site: {pre.get('site') or 'the whole program'}."]
    for f in pre.get("facts", []):
        if "loop" in f:
            extra = []
            if f.get("reduces"):
                extra.append(f"reduction loop of {', '.join(f['reduces'])}")
            if f.get("carries_dependence_of"):
                extra.append(f"carries a dependence of {', '.join(f['carries_dependence_of'])}")
            else:
                extra.append("carries no dependence")
            lines.append(f"Precondition: {f['ref']} is the {f['loop_kind']} loop {f['loop']}; " + "; ".join(extra) + ".")
        elif "tensor" in f:
            where = {"g": "global", "s": "shared", "l": "local"}.get(f["scope"], f["scope"])
            shape = ",".join(map(str, f["shape"])) if f["shape"] is not None else "?"
            lines.append(f"Precondition: {f['tensor']} is the {f['role']} {f['dtype']}[{shape}] in {where} memory.")
        elif "item" in f:
            lines.append(f"Precondition: {f['ref']} is the nest {' '.join(f['loops']) or '(no loop)'} writing "
                         f"{', '.join(f['writes']) or 'nothing'} from {', '.join(f['reads']) or 'no tensor'}.")
        elif "stmt" in f:
            kind = _KIND_TEXT.get(f["kind"], f"a {f['kind']}") + (f" with {f['op']}" if f.get("op") else "")
            over = f" over {', '.join(f['reduce_over'])}" if f.get("reduce_over") else ""
            lines.append(f"Precondition: {f['ref']} writes {f['stmt']}, {kind}{over} inside {' '.join(f['loops']) or 'no loop'}.")
    if ch["loops_before"] != ch["loops_after"]:
        lines.append(f"Loops: {_nests(ch['loops_before'])} -> {_nests(ch['loops_after'])}.")
    if ch["accesses_added"] or ch["accesses_removed"]:
        lines.append(f"Accesses: removed {ch['accesses_removed'] or 'none'}; added {ch['accesses_added'] or 'none'}.")
    if ch["scopes"]:
        lines.append("Scopes: " + ", ".join(f"{n} {a}->{b}" if a else f"{n} (new) in {b}"
                                            for n, (a, b) in ch["scopes"].items()) + ".")
    if ch["created"]:
        lines.append("Created: " + ", ".join(f"{k}={v}" for k, v in ch["created"].items()) + ".")
    lines.append(f"Nests {ch['nests'][0]}->{ch['nests'][1]}, statements {ch['statements'][0]}->{ch['statements'][1]}; "
                 f"numerics: {ch['numerics']}.")
    lines.append(f"Why: {reasoning['rationale']}.")
    m = reasoning.get("measured")
    if m:
        fast = [t for t in (m.get("original_ms"), m.get("transformed_ms")) if t is not None]
        if not m.get("speedup"):
            sp = "not timed"
        elif min(fast) < MIN_TIMED_MS:
            # a kernel of a few microseconds times its call overhead: no lesson in that ratio
            sp = f"not meaningful (runs in {min(fast) * 1000:.1f} us, below {MIN_TIMED_MS * 1000:.0f} us)"
        else:
            sp = f"{m['speedup']:.2f}x"
        lines.append(f"Measured on {m['target']}: equal={m['equal']}, bitwise={m['bitwise']}, speedup {sp}.")
    return "\n".join(lines)


__all__ = ["trace", "precondition", "changes", "rationale", "measured", "render"]
