"""The Step-TP reference's outputs for the loop and memory strategies, against leirc's.

For every record of ``shared/compat/steptp_strategy_outputs.jsonl`` whose strategy is a
leirc loop or memory strategy (fields ``model``, ``strategy``, ``original``,
``transformed``), the table below says how leirc's implementation relates to the
reference output ``transformed[i]`` produced from the same ``original``:

``structural``
    leirc's steps (the ``steps`` column) applied to the original give the same program
    after normalization: intermediates and serial/parallel/vector/unrolled loop indices are
    renamed in order of first appearance (fresh names are arbitrary; bound ``B`` indices
    keep their names, which select the hardware axis).
``inverse``
    The reference generated ``loop_fusion`` by swapping ``loop_split``'s (before, after)
    pair, so ``transformed[i]`` equals the original; leirc's fusion applied to the
    ``loop_split`` record with the same index gives it back (structurally).
``numeric``
    leirc's result differs only in how its first nest, a copy, is written: the rest is
    structurally equal and the two copy nests, run alone by the interpreter on the same
    inputs at full size, produce bit-identical tensors.
``invalid``
    The reference output is not a valid leirc program: the checker reports the listed
    error codes (vector lanes above 64, E044; shared memory beyond 48 KiB, E045; ``+E045``:
    reported once the V loops are made serial, since the checker stops after structural
    errors). leirc's strategies refuse the same step.
``wrong``
    The reference output computes something else (reason in the table, asserted).
``unsupported``
    A valid output leirc's strategy does not generate (reason in the table): unrolling
    beyond 64 iterations, merging two dimensions of a transposed tensor, vectorizing a
    loop that is not innermost. The nearest leirc step is asserted to be refused.

Tests reading ../shared skip when it is absent.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace

import pytest

from conftest import require_compat
from leirc.lang import ast as A
from leirc.lang.checker import check_kernel
from leirc.lang.parser import parse_record
from leirc.lang.printer import print_kernel
from leirc.strategies import NotApplicable, Step, apply_step
from leirc.strategies.rewrite import rename_tensor, substitute

MINE = {
    "loop_reorder", "loop_tiling", "loop_split", "loop_fusion", "loop_unrolling", "loop_parallelization",
    "loop_vectorization", "loop_binding", "reduction_factorization", "precompute_indices", "cache_read_write",
    "set_storage_scope", "layout_transformation", "set_storage_layout", "vectorized_memory_access",
}

MM, SM, LN, TH = "Standard_matrix_multiplication", "softmax", "LayerNorm", "Tanh"


def S(name, **args):
    return Step.make(name, **args)


UNROLL = "U^{%d} is full unrolling of %d iterations; leirc unrolls at most 64 (split first)"

# (model, strategy, index) -> (verdict, steps, detail)
TABLE = {
    # ---- Standard_matrix_multiplication
    (MM, "loop_reorder", 0): ("structural", [S("loop_reorder", loop="N0.tx", order="tx,c,a")], ""),
    (MM, "loop_tiling", 0): ("structural", [S("loop_tiling", loop="N0.tx", factor_outer=64, factor_inner=128)], ""),
    (MM, "loop_split", 0): ("structural", [S("loop_split", loop="N0.tx", factor=128)], ""),
    (MM, "loop_split", 1): ("structural", [S("loop_split", loop="N0.a", factor=96)], ""),
    (MM, "loop_fusion", 0): ("inverse", [S("loop_fusion", loop="N0.g")], ""),
    (MM, "loop_fusion", 1): ("inverse", [S("loop_fusion", loop="N0.g")], ""),
    (MM, "loop_unrolling", 0): ("unsupported", [S("loop_unrolling", loop="N0.a")], UNROLL % (768, 768)),
    (MM, "loop_parallelization", 0): ("structural", [S("loop_parallelization", loop="N0.a")], ""),
    (MM, "loop_binding", 0): ("structural", [S("loop_binding", loop="N0.a", axis="bz")], ""),
    (MM, "reduction_factorization", 0): ("structural", [S("reduction_factorization", loop="N0.c", split=921)], ""),
    (MM, "cache_read_write", 0): ("structural", [S("cache_read_write", stmt="N0.S0", tensor="A", mode="read", scope="l")], ""),
    (MM, "cache_read_write", 1): ("structural", [S("cache_read_write", stmt="N0.S0", tensor="D", mode="write", scope="l")], ""),
    (MM, "layout_transformation", 0): ("numeric", [S("layout_transformation", stmt="N0.S0", tensor="C", kind="transpose", perm="1,0")],
                                       "same read E_{a,c}; the copy nest walks C in its own order (L c, L a) instead of B^{768}_{tx}"),
    (MM, "layout_transformation", 1): ("numeric", [S("layout_transformation", stmt="N0.S0", tensor="C", kind="flatten")],
                                       "same read E_{c*768+a}; the copy nest walks C in its own order"),
    (MM, "layout_transformation", 2): ("structural", [S("layout_transformation", stmt="N0.S0", tensor="A", kind="transpose", perm="1,0")], ""),
    (MM, "vectorized_memory_access", 0): ("invalid", ["E044", "+E045"], "V^{1024} lanes; 3 MiB shared copy of C"),
    (MM, "vectorized_memory_access", 1): ("invalid", ["E044", "+E045"], "V^{768} lanes; 1.5 MiB shared accumulator"),
    # ---- softmax
    (SM, "loop_split", 0): ("structural", [S("loop_split", loop="N0.tx", factor=4)], ""),
    (SM, "loop_split", 1): ("structural", [S("loop_split", loop="N1.tx", factor=8)], ""),
    (SM, "loop_split", 2): ("structural", [S("loop_split", loop="N2.tx", factor=8)], ""),
    (SM, "loop_fusion", 0): ("inverse", [S("loop_fusion", loop="N0.f")], ""),
    (SM, "loop_fusion", 1): ("inverse", [S("loop_fusion", loop="N1.f")], ""),
    (SM, "loop_fusion", 2): ("inverse", [S("loop_fusion", loop="N2.f")], ""),
    (SM, "reduction_factorization", 0): ("structural", [S("reduction_factorization", loop="N0.a", split=11577)], ""),
    (SM, "cache_read_write", 0): ("structural", [S("cache_read_write", stmt="N0.S0", tensor="A", mode="read", scope="l")], ""),
    (SM, "cache_read_write", 1): ("structural", [S("cache_read_write", stmt="N0.S0", tensor="D", mode="write", scope="l")], ""),
    (SM, "layout_transformation", 0): ("structural", [S("layout_transformation", stmt="N0.S0", tensor="A", kind="transpose", perm="1,0")], ""),
    (SM, "layout_transformation", 1): ("structural", [S("layout_transformation", stmt="N0.S0", tensor="A", kind="flatten")], ""),
    (SM, "layout_transformation", 2): ("numeric", [S("layout_transformation", stmt="N0.S0", tensor="A", kind="split", dim=0, factor=4)],
                                       "same read F_{tx//4,tx%4,a}; the copy nest walks A (B tx, L a) instead of L f, B^{4}_{tx}"),
    (SM, "set_storage_scope", 0): ("structural", [S("set_storage_scope", tensor="D", scope="s")], ""),
    (SM, "set_storage_scope", 1): ("structural", [S("set_storage_scope", tensor="E", scope="s")], ""),
    (SM, "set_storage_layout", 0): ("structural", [S("set_storage_layout", tensor="D", kind="split", dim=0, factor=8)], ""),
    (SM, "set_storage_layout", 1): ("structural", [S("set_storage_layout", tensor="E", kind="split", dim=0, factor=8)], ""),
    (SM, "vectorized_memory_access", 0): ("invalid", ["E044"], "V^{16384} lanes"),
    (SM, "vectorized_memory_access", 1): ("invalid", ["E044", "+E045"], "V^{16384} lanes; 1 MiB shared copy"),
    (SM, "vectorized_memory_access", 2): ("invalid", ["E044"], "V^{16384} lanes"),
    # ---- LayerNorm
    (LN, "loop_reorder", 0): ("structural", [S("loop_reorder", loop="N0.tx", order="d,a,c,tx")], ""),
    (LN, "loop_reorder", 1): ("structural", [S("loop_reorder", loop="N2.tx", order="c,a,tx,d")], ""),
    (LN, "loop_reorder", 2): ("structural", [S("loop_reorder", loop="N4.tx", order="tx,d,c,a")], ""),
    (LN, "loop_tiling", 0): ("structural", [S("loop_tiling", loop="N4.tx", factor_outer=8, factor_inner=16)], ""),
    (LN, "loop_tiling", 1): ("structural", [S("loop_tiling", loop="N4.a", factor_outer=32, factor_inner=16)], ""),
    (LN, "loop_tiling", 2): ("structural", [S("loop_tiling", loop="N4.c", factor_outer=16, factor_inner=64)], ""),
    (LN, "loop_split", 0): ("structural", [S("loop_split", loop="N0.tx", factor=4)], ""),
    (LN, "loop_split", 1): ("structural", [S("loop_split", loop="N2.tx", factor=8)], ""),
    (LN, "loop_split", 2): ("structural", [S("loop_split", loop="N4.tx", factor=8)], ""),
    (LN, "loop_fusion", 0): ("inverse", [S("loop_fusion", loop="N0.h")], ""),
    (LN, "loop_fusion", 1): ("inverse", [S("loop_fusion", loop="N2.h")], ""),
    (LN, "loop_fusion", 2): ("inverse", [S("loop_fusion", loop="N4.h")], ""),
    (LN, "loop_unrolling", 0): ("structural", [S("loop_unrolling", loop="N0.a")], ""),
    (LN, "loop_unrolling", 1): ("unsupported", [S("loop_unrolling", loop="N2.c")], UNROLL % (256, 256)),
    (LN, "loop_unrolling", 2): ("unsupported", [S("loop_unrolling", loop="N4.d")], UNROLL % (128, 128)),
    (LN, "loop_parallelization", 0): ("structural", [S("loop_parallelization", loop="N4.d")], ""),
    (LN, "loop_parallelization", 1): ("structural", [S("loop_parallelization", loop="N5.a")], ""),
    (LN, "loop_binding", 0): ("structural", [S("loop_binding", loop="N4.d", axis="bx")], ""),
    (LN, "loop_binding", 1): ("structural", [S("loop_binding", loop="N5.a", axis="bz")], ""),
    (LN, "reduction_factorization", 0): ("wrong", [S("reduction_factorization", loop="N0.c", split=193)],
                                          "the combining nest keeps the reduction loops a and d: F = F + (K + M) runs 64*128 "
                                          "times, so F is 8192 times the row sum"),
    (LN, "cache_read_write", 0): ("invalid", ["E045"], "a 128 MiB shared copy of A"),
    (LN, "cache_read_write", 1): ("structural", [S("cache_read_write", stmt="N0.S0", tensor="F", mode="write", scope="l")], ""),
    (LN, "layout_transformation", 0): ("structural", [S("layout_transformation", stmt="N0.S0", tensor="A", kind="transpose", perm="1,3,0,2")], ""),
    (LN, "layout_transformation", 1): ("structural", [S("layout_transformation", stmt="N0.S0", tensor="A", kind="flatten")], ""),
    (LN, "layout_transformation", 2): ("numeric", [S("layout_transformation", stmt="N0.S0", tensor="A", kind="split", dim=0, factor=8)],
                                       "same read K_{tx//8,tx%8,a,c,d}; the copy nest walks A instead of L h, B^{8}_{tx}"),
    (LN, "set_storage_scope", 0): ("structural", [S("set_storage_scope", tensor="F", scope="s")], ""),
    (LN, "set_storage_scope", 1): ("structural", [S("set_storage_scope", tensor="G", scope="s")], ""),
    (LN, "set_storage_scope", 2): ("structural", [S("set_storage_scope", tensor="H", scope="s")], ""),
    (LN, "set_storage_layout", 0): ("structural", [S("set_storage_layout", tensor="J", kind="transpose", perm="0,1,3,2")], ""),
    (LN, "set_storage_layout", 1): ("structural", [S("set_storage_layout", tensor="J", kind="transpose", perm="3,2,1,0"),
                                                   S("set_storage_layout", tensor="J", kind="flatten")], ""),
    (LN, "set_storage_layout", 2): ("unsupported", [], "J_{c,tx,d*64+a}: a transposition that also merges two dimensions; "
                                                       "leirc flattens all dimensions or none"),
    (LN, "vectorized_memory_access", 0): ("unsupported", [S("vectorized_memory_access", stmt="N0.S0", tensor="A", scope="l")],
                                           "V^{64}_{a} is not the innermost copy loop (c and d run inside it); leirc vectorizes "
                                           "the innermost copy loop, here d with 128 > 64 lanes"),
    (LN, "vectorized_memory_access", 1): ("unsupported", [S("vectorized_memory_access", stmt="N2.S0", tensor="A", scope="l")],
                                           "V^{64}_{a} is not the innermost copy loop"),
    (LN, "vectorized_memory_access", 2): ("unsupported", [S("vectorized_memory_access", stmt="N4.S0", tensor="A", scope="l")],
                                           "V^{64}_{a} is not the innermost copy loop"),
    # ---- Tanh
    (TH, "loop_split", 0): ("structural", [S("loop_split", loop="N0.tx", factor=4)], ""),
    (TH, "loop_split", 1): ("structural", [S("loop_split", loop="N0.a", factor=128)], ""),
    (TH, "loop_split", 2): ("structural", [S("loop_split", loop="N1.tx", factor=8)], ""),
    (TH, "loop_fusion", 0): ("inverse", [S("loop_fusion", loop="N0.f")], ""),
    (TH, "loop_fusion", 1): ("inverse", [S("loop_fusion", loop="N0.f")], ""),
    (TH, "loop_fusion", 2): ("inverse", [S("loop_fusion", loop="N1.f")], ""),
    (TH, "cache_read_write", 0): ("invalid", ["E045"], "a 1 MiB shared copy of A"),
    (TH, "cache_read_write", 1): ("structural", [S("cache_read_write", stmt="N0.S0", tensor="D", mode="write", scope="l")], ""),
    (TH, "cache_read_write", 2): ("invalid", ["E045"], "a 1 MiB shared copy of A"),
    (TH, "layout_transformation", 0): ("structural", [S("layout_transformation", stmt="N0.S0", tensor="A", kind="transpose", perm="1,0")], ""),
    (TH, "layout_transformation", 1): ("structural", [S("layout_transformation", stmt="N0.S0", tensor="A", kind="flatten")], ""),
    (TH, "layout_transformation", 2): ("numeric", [S("layout_transformation", stmt="N0.S0", tensor="A", kind="split", dim=0, factor=8)],
                                       "same read F_{tx//8,tx%8,a}; the copy nest walks A instead of L f, B^{8}_{tx}"),
    (TH, "set_storage_scope", 0): ("structural", [S("set_storage_scope", tensor="D", scope="l")], ""),
    (TH, "set_storage_scope", 1): ("structural", [S("set_storage_scope", tensor="E", scope="l")], ""),
    (TH, "set_storage_layout", 0): ("structural", [S("set_storage_layout", tensor="D", kind="transpose", perm="1,0")], ""),
    (TH, "set_storage_layout", 1): ("structural", [S("set_storage_layout", tensor="D", kind="transpose", perm="1,0"),
                                                   S("set_storage_layout", tensor="D", kind="flatten")], ""),
    (TH, "set_storage_layout", 2): ("structural", [S("set_storage_layout", tensor="D", kind="transpose", perm="1,0"),
                                                   S("set_storage_layout", tensor="D", kind="flatten")], "same output as record 1"),
    (TH, "vectorized_memory_access", 0): ("invalid", ["E044"], "V^{16384} lanes"),
    (TH, "vectorized_memory_access", 1): ("invalid", ["E044", "+E045"], "V^{16384} lanes; 1 MiB shared buffer"),
    (TH, "vectorized_memory_access", 2): ("invalid", ["E044", "+E045"], "V^{16384} lanes; 1 MiB shared copy"),
}

#: numeric records whose copy nests walk some dimensions identically (same loops, same
#: subscripts in both programs): those are shrunk before the copies are compared
SHRINK = {(LN, "layout_transformation", 2): ({"a": 2, "c": 2, "d": 2}, {"A": (16, 2, 2, 2)})}


# ---------------------------------------------------------------------------


def _records():
    compat = require_compat()
    base = {}
    with (compat / "steptp_emitted_level1.jsonl").open(encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            base[r["model"]] = r
    out = []
    with (compat / "steptp_strategy_outputs.jsonl").open(encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if r["strategy"] in MINE:
                out.append((r, base[r["model"]]))
    return out


def _kernel(base: dict, program: str) -> A.Kernel:
    pr = parse_record(base, program)
    assert pr.module is not None and pr.ok, pr.diagnostics
    return pr.module.kernels[0]


def normalize(k: A.Kernel) -> str:
    """Print ``k`` with intermediates renamed T0, T1, ... and every non-bound loop index
    renamed v0, v1, ... per top-level nest, in order of first appearance."""
    params = {p.name for p in k.inputs + k.outputs}
    names: list[str] = []
    for n in A.walk(k):
        if isinstance(n, A.Access) and n.name not in params and n.name not in names:
            names.append(n.name)
    for i, n in enumerate(names):
        k = rename_tensor(k, n, f"\0T{i}")
    for i in range(len(names)):
        k = rename_tensor(k, f"\0T{i}", f"T{i}")
    body = []
    for item in k.body:
        loops = [n for n in A.walk(item) if isinstance(n, A.Loop) and n.kind != "B"]
        order: list[str] = []
        for lp in loops:
            if lp.var not in order:
                order.append(lp.var)
        mapping = {v: f"v{j}" for j, v in enumerate(order)}
        body.append(_rename_loops(substitute(item, {v: A.Var(m) for v, m in mapping.items()}), mapping))
    return print_kernel(replace(k, body=tuple(body)))


def _rename_loops(node, mapping):
    if isinstance(node, A.Loop):
        return replace(node, var=mapping.get(node.var, node.var) if node.kind != "B" else node.var,
                       body=tuple(_rename_loops(b, mapping) for b in node.body))
    return node


def _run(kernel: A.Kernel, steps) -> A.Kernel:
    for s in steps:
        kernel = apply_step(kernel, s)
    return kernel


def _verify(a: A.Kernel, b: A.Kernel) -> None:
    from leirc.verify import verify

    rep = verify(print_kernel(a), print_kernel(b), target="interp", seeds=(0,), dists=("normal",))
    assert rep.equal and rep.bitwise, rep.failures


def _copy_kernel(k: A.Kernel, shrink=None) -> A.Kernel:
    """The first nest of ``k`` alone, as a kernel whose output is the tensor it writes.
    ``shrink`` = ({loop index: extent}, {input: shape}) reduces dimensions that both copy
    nests walk with the same loops and subscripts (the interpreter then runs in ms)."""
    nest = k.body[0]
    if shrink:
        loops, shapes = shrink
        nest = _shrink(nest, loops)
        k = replace(k, inputs=tuple(replace(p, shape=shapes.get(p.name, p.shape)) for p in k.inputs))
    k = replace(k, body=(nest,), outputs=())
    name = next(n for n in A.walk(nest) if isinstance(n, A.Assign)).target.name
    info = check_kernel(k).tensors[name]  # written tensor as an intermediate: shape inferred
    return replace(k, outputs=(A.Param(name, info.dtype, info.shape),))


def _shrink(node, loops: dict):
    if isinstance(node, A.Loop):
        return replace(node, extent=loops.get(node.var, node.extent), body=tuple(_shrink(b, loops) for b in node.body))
    return node


def _cases():
    try:
        recs = _records()
    except BaseException:  # pytest.skip when the compat data is absent: one skipped case
        return [pytest.param(None, None, 0, id="compat-data-missing")]
    cases = []
    for rec, base in recs:
        for i in range(len(rec["transformed"])):
            cases.append(pytest.param(rec, base, i, id=f"{rec['model']}-{rec['strategy']}-{i}"))
    return cases


def test_table_covers_every_record():
    recs = _records()
    keys = {(r["model"], r["strategy"], i) for r, _ in recs for i in range(len(r["transformed"]))}
    assert keys == set(TABLE), (sorted(keys - set(TABLE)), sorted(set(TABLE) - keys))


def test_verdict_counts():
    """The summary quoted in the report (kept honest by this test)."""
    _records()
    counts = Counter(v for v, _, _ in TABLE.values())
    assert counts == {"structural": 55, "inverse": 11, "numeric": 5, "invalid": 11, "wrong": 1, "unsupported": 7}, counts


@pytest.mark.parametrize("rec,base,i", _cases())
def test_record(rec, base, i):
    if rec is None:
        require_compat()
    key = (rec["model"], rec["strategy"], i)
    verdict, steps, detail = TABLE[key]
    original = _kernel(base, rec["original"])
    target = rec["transformed"][i]
    if verdict == "structural":
        assert normalize(_run(original, steps)) == normalize(_kernel(base, target))
    elif verdict == "inverse":
        assert target == rec["original"]
        split = next(r for r, _ in _records() if r["model"] == rec["model"] and r["strategy"] == "loop_split")
        before = _kernel(base, split["transformed"][i])
        assert normalize(_run(before, steps)) == normalize(original)
    elif verdict == "numeric":
        ours = _run(original, steps)
        theirs = _kernel(base, target)
        assert normalize(ours) != normalize(theirs)
        # the programs agree after their first nest (the layout copy) ...
        assert normalize(replace(ours, body=ours.body[1:])) == normalize(replace(theirs, body=theirs.body[1:]))
        # ... and the two copy nests compute the same tensor
        _verify(_copy_kernel(ours, SHRINK.get(key)), _copy_kernel(theirs, SHRINK.get(key)))
    elif verdict == "invalid":
        res = check_kernel(_kernel(base, target))
        codes = sorted({d.code for d in res.diagnostics if d.is_error})
        assert codes == [c for c in steps if not c.startswith("+")], (codes, detail)
        later = [c[1:] for c in steps if c.startswith("+")]
        if later:  # the checker stops after structural errors; with V loops made serial it finds the rest
            res = check_kernel(_kernel(base, target.replace("V^{", "L^{")))
            assert sorted({d.code for d in res.diagnostics if d.is_error}) == later, detail
    elif verdict == "wrong":
        theirs = _kernel(base, target)
        res = check_kernel(theirs)
        assert res.ok
        ours = _run(original, steps)
        assert normalize(ours) != normalize(theirs)
        # the record's combining statement sums a loop-invariant value over a and d
        comb = [si for si in res.stmts if si.stmt.target.name == "F"]
        assert len(comb) == 1 and comb[0].kind == "reduce" and set(comb[0].reduce_vars) == {"a", "d"}
        assert not {n.name for n in A.walk(comb[0].operand) if isinstance(n, A.Var)} & {"a", "d"}
        # leirc's combining statement has no reduction loop left
        fs = [si for si in check_kernel(ours).stmts if si.stmt.target.name == "F"]
        assert len(fs) == 1 and fs[0].reduce_vars == ()
    else:
        assert verdict == "unsupported", verdict
        assert detail
        theirs = _kernel(base, target)
        assert check_kernel(theirs).ok
        for s in steps:  # the nearest leirc step is refused
            with pytest.raises(NotApplicable):
                apply_step(original, s)
