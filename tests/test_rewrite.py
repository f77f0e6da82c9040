"""The strategy engine's Rewrite: one plan per step, handles for what a step created, the
top-level items it touched, validated argument values, and -O1 composing by handles."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from leirc.lang import ast as A
from leirc.lang.printer import print_kernel
from leirc.strategies import NotApplicable, Step, all_strategies, apply_step, get, replay, trace_from_json
from leirc.strategies import base as B
from leirc.strategies.base import Arg, Context, Rewrite, Strategy, parse_args, plan_step
from leirc.strategies.rewrite import find_loop, iter_loops
from strategy_harness import docstring_example, kernel_of, stdlib_text

EW = r"\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i}*2;];}"
THREE = (r"\kernel k(A:f32[8])->(C:f32[8],D:f32[8],E:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i}*2;];"
         r"L^{8}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i}+1;];L^{8}_{i=0}[E^{f32,g}_{i}=A^{f32,g}_{i}-1;];}")


# ---------------------------------------------------------------------------
# argument values: validated, never truncated (issue 9)


@pytest.mark.parametrize("value,shown", [(4.5, "4.5"), (True, "true"), (False, "false"), (4.0, "4.0"),
                                         ("4.5", '"4.5"'), ("four", '"four"'), (None, "null"), ([4], "[4]"),
                                         ("4_0", '"4_0"')])
def test_int_argument_rejects_non_integers(value, shown):
    with pytest.raises(NotApplicable) as e:
        apply_step(kernel_of(EW), Step.make("loop_split", loop="N0.i", factor=value))
    assert e.value.reason == f"argument 'factor' of loop_split: expected an integer, got {shown}"


def test_the_issue_message_verbatim():
    with pytest.raises(NotApplicable, match=r"argument 'factor' of loop_split: expected an integer, got 4\.5$"):
        apply_step(kernel_of(EW), Step.make("loop_split", loop="N0.i", factor=4.5))


@pytest.mark.parametrize("value", [4, "4", " 4 ", "+4"])
def test_int_argument_accepts_integers_and_integer_text(value):
    new = apply_step(kernel_of(EW), Step.make("loop_split", loop="N0.i", factor=value))
    assert find_loop(new, "N0.i")[0].extent == 4


def test_trace_with_truncatable_values_is_rejected():
    """A trace written by hand or by another tool: 4.5 and true used to become 4 and 1."""
    for bad in ("4.5", "true"):
        text = '{"steps": [{"strategy": "loop_split", "args": {"loop": "N0.i", "factor": %s}}]}' % bad
        with pytest.raises(NotApplicable, match="expected an integer"):
            replay(kernel_of(EW), trace_from_json(text))


def test_false_is_not_the_integer_default():
    """``dim`` defaults to -1 and ``factor`` to 0: False == 0 must not pass as the default."""
    s = get("set_storage_layout")
    with pytest.raises(NotApplicable, match="argument 'factor' of set_storage_layout: expected an integer, got false"):
        parse_args(s, {"tensor": "D", "kind": "flatten", "factor": False})
    assert parse_args(s, {"tensor": "D", "kind": "flatten", "factor": 0})["factor"] == 0


def test_nest_argument_is_validated_too():
    with pytest.raises(NotApplicable, match="argument 'nest' of dead_code_elimination: expected an integer, got 0.5"):
        parse_args(get("dead_code_elimination"), {"nest": 0.5})
    assert parse_args(get("dead_code_elimination"), {"nest": "1"}) == {"nest": 1}


def test_boolean_only_for_a_yes_no_choice():
    s = get("operator_fusion")
    assert parse_args(s, {"nest": 0, "local": True})["local"] == "true"
    assert parse_args(s, {"nest": 0, "local": "false"})["local"] == "false"
    with pytest.raises(NotApplicable, match="must be one of false, true"):
        parse_args(s, {"nest": 0, "local": 1})
    with pytest.raises(NotApplicable, match="must be one of tx, ty, tz, bx, by, bz"):
        parse_args(get("loop_binding"), {"loop": "N0.i", "axis": True})


def test_bool_kind_and_strings():
    a = Arg("flag", "bool", "a flag")
    assert a.parse("s", True) is True and a.parse("s", "false") is False
    with pytest.raises(NotApplicable, match="argument 'flag' of s: expected true or false, got 1"):
        a.parse("s", 1)
    with pytest.raises(NotApplicable, match="argument 'loop' of loop_split: expected a non-empty string, got 3"):
        parse_args(get("loop_split"), {"loop": 3, "factor": 2})
    with pytest.raises(NotApplicable, match="expected comma-separated loop names"):
        parse_args(get("loop_reorder"), {"loop": "N0.i", "order": [1, 2]})
    assert parse_args(get("loop_reorder"), {"loop": "N0.i", "order": "i, k,j"})["order"] == ("i", "k", "j")


# ---------------------------------------------------------------------------
# the protocol: plan, or check + apply


class _PlanOnly(Strategy):
    name = "plan_only"
    calls = 0

    def plan(self, ctx, args):
        type(self).calls += 1
        if args.get("no"):
            raise self.na("refused")
        lp, path = find_loop(ctx.kernel, "N0.i")
        from leirc.strategies.rewrite import replace_at
        from dataclasses import replace

        return Rewrite(replace_at(ctx.kernel, path, replace(lp, kind="U")), "bitwise")


class _CheckApply(Strategy):
    name = "check_apply"
    numerics = "bitwise"

    def check(self, ctx, args):
        self.checked = True

    def apply(self, ctx, args):
        return ctx.kernel

    def numerics_for(self, ctx, args):
        return "exact-in-reals"


def test_plan_only_strategy_gets_check_and_apply():
    s, ctx = _PlanOnly(), Context(kernel_of(EW))
    _PlanOnly.calls = 0
    s.check(ctx, {})
    new = s.apply(ctx, {})
    assert find_loop(new, "N0.i")[0].kind == "U" and _PlanOnly.calls == 2
    with pytest.raises(NotApplicable, match="refused"):
        s.check(ctx, {"no": True})


def test_check_apply_strategy_gets_plan_with_its_numerics():
    s, ctx = _CheckApply(), Context(kernel_of(EW))
    rw = s.plan(ctx, {})
    assert s.checked and rw.kernel is ctx.kernel and rw.numerics == "exact-in-reals"


def test_registering_a_strategy_without_plan_or_check_apply_fails():
    class Neither(Strategy):
        def sites(self, ctx):
            return []

    with pytest.raises(AssertionError):
        B.strategy("h6_neither", level="operator", numerics="bitwise")(Neither)
    assert "h6_neither" not in B.REGISTRY


def test_plan_step_checks_the_result_exactly_once(monkeypatch):
    """Planning is one pass and the re-check is one check_kernel call (the input's check
    result is passed in, as the engine does)."""
    k = kernel_of(EW)
    res = B.check_kernel(k)
    calls = []
    real = B.check_kernel
    monkeypatch.setattr(B, "check_kernel", lambda kern: calls.append(kern) or real(kern))
    rw = plan_step(k, Step.make("loop_split", loop="N0.i", factor=4), result=res)
    assert len(calls) == 1 and calls[0] == rw.kernel
    assert rw.result is not None and rw.result.ok and rw.result.kernel is rw.kernel


def test_context_recheck_is_remembered_for_the_final_check(monkeypatch):
    k = kernel_of(EW)
    ctx = Context(k)
    calls = []
    real = B.check_kernel
    monkeypatch.setattr(B, "check_kernel", lambda kern: calls.append(kern) or real(kern))
    cand = apply_step(k, Step.make("loop_unrolling", loop="N0.i"))
    calls.clear()
    ctx.recheck("x", cand)
    assert B.recheck(Step.make("x"), cand, ctx).ok
    assert len(calls) == 1
    bad = A.Kernel("k", k.inputs, k.outputs, ())  # output never written
    with pytest.raises(NotApplicable, match="never written"):
        ctx.recheck("x", bad)
    with pytest.raises(B.StrategyBug):
        B.recheck(Step.make("x"), bad, ctx)
    assert ctx.memo("key", lambda: [1]) is ctx.memo("key", lambda: [2])


def test_numerics_are_those_of_the_application():
    """loop_tiling is declared bitwise but reassociates a tiled reduction."""
    k = kernel_of(r"\kernel k(A:f32[4,8])->(C:f32[1]){L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{0}=C^{f32,g}_{0}+A^{f32,g}_{i,j};];}")
    rw = plan_step(k, Step.make("loop_tiling", loop="N0.i", factor_outer=2, factor_inner=4))
    assert rw.numerics == get("loop_tiling").numerics_for(Context(k), {"loop": "N0.i", "factor_outer": 2,
                                                                       "factor_inner": 4})
    assert rw.numerics == "exact-in-reals"


# ---------------------------------------------------------------------------
# touched / produced


def test_touched_is_the_changed_middle():
    k = kernel_of(THREE)
    rw = plan_step(k, Step.make("loop_split", loop="N1.i", factor=2))
    assert rw.touched == ((1,),) and rw.produced == ((1,),)
    rw = plan_step(k, Step.make("expression_reorder", nest=1))
    assert rw.touched == ((1,), (2,)) and rw.produced == ((1,), (2,))


@pytest.mark.parametrize("name,touched,produced", [
    ("operator_fusion", ((0,), (1,)), ((0,),)),
    ("dead_code_elimination", ((0,),), ()),
    ("operator_fission", ((0,),), ((0,), (1,))),
    ("expand_log", ((1,),), ((1,),)),
    ("reduction_factorization", ((0,),), ((0,), (1,), (2,))),
])
def test_touched_on_docstring_examples(name, touched, produced):
    k, step, _ = docstring_example(name)
    rw = plan_step(k, step)
    assert (rw.touched, rw.produced) == (touched, produced)
    # the untouched items are the same objects' equals, in order
    keep_old = [it for i, it in enumerate(k.body) if (i,) not in rw.touched]
    keep_new = [it for i, it in enumerate(rw.kernel.body) if (i,) not in rw.produced]
    assert keep_old == keep_new


# ---------------------------------------------------------------------------
# created: roles declared in the registry, resolved by diffing around the site

DECLARING = sorted(s.name for s in all_strategies() if s.creates)


def test_the_schedule_strategies_declare_roles():
    roles = {s.name: tuple(r.name for r in s.creates) for s in all_strategies() if s.creates}
    assert roles["loop_split"] == ("outer", "inner")
    assert roles["loop_tiling"] == ("outer_tile", "inner_tile", "outer_point", "inner_point")
    assert roles["loop_binding"] == ("bound",) and roles["loop_fusion"] == ("fused",)
    assert {"reduction_factorization", "cache_read_write", "precompute_indices", "expression_splitting",
            "common_subexpression_elimination", "layout_transformation", "online_softmax"} <= set(roles)


@pytest.mark.parametrize("name", DECLARING)
def test_every_declared_role_resolves_on_the_docstring_example(name):
    s = get(name)
    k, step, _ = docstring_example(name)
    rw = plan_step(k, step)
    assert set(rw.created) == {r.name for r in s.creates}, rw.created
    old_names = {n.name for n in A.walk(k) if isinstance(n, A.Access)} | {p.name for p in k.inputs + k.outputs}
    for r in s.creates:
        ref = rw.created[r.name]
        if r.kind == "loop":
            find_loop(rw.kernel, ref)  # a reference into the new kernel
        else:
            assert ref not in old_names
            assert any(isinstance(n, A.Assign) and n.target.name == ref for n in A.walk(rw.kernel))
    loop_refs = [rw.created[r.name] for r in s.creates if r.kind == "loop"]
    assert len(set(loop_refs)) == len(loop_refs)


EXPECTED = {
    "loop_split": {"outer": "N0.io", "inner": "N0.i"},
    "loop_tiling": {"outer_tile": "N0.io", "inner_tile": "N0.jo", "outer_point": "N0.i", "inner_point": "N0.j"},
    "loop_fusion": {"fused": "N0.i"},
    "loop_binding": {"bound": "N0.txj"},
    "reduction_factorization": {"first": "D", "second": "E"},
    "tensor_split_to_decouple_operators": {"first": "D", "second": "E"},
    "cache_read_write": {"cache": "D"},
    "precompute_indices": {"index": "D"},
    "common_subexpression_elimination": {"value": "E"},
    "tensor_concat_to_fuse_operators": {"concat": "E", "result": "F"},
    "flashattention_wo_tiling": {"next_max": "A", "scale": "C", "weight": "D"},
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_created_values_on_docstring_examples(name):
    k, step, _ = docstring_example(name)
    assert dict(plan_step(k, step).created) == EXPECTED[name]


def test_split_handles_name_the_right_loop_among_equal_headers():
    """Splitting the first of two sibling loops: the inner part has the same header as the
    untouched sibling, so a diff by header alone would name the sibling."""
    k = kernel_of(r"\kernel k(A:f32[4,8],B:f32[4,4])->(C:f32[4,8],D:f32[4,4]){L^{4}_{a=0}["
                  r"L^{8}_{i=0}[C^{f32,g}_{a,i}=A^{f32,g}_{a,i}*2;];L^{4}_{i=0}[D^{f32,g}_{a,i}=B^{f32,g}_{a,i}+1;];];}")
    rw = plan_step(k, Step.make("loop_split", loop="N0.i", factor=4))
    assert dict(rw.created) == {"outer": "N0.io", "inner": "N0.i"}
    inner, path = find_loop(rw.kernel, rw.created["inner"])
    assert inner.extent == 4 and path == (0, 0, 0)
    rw2 = plan_step(k, Step.make("loop_split", loop="N0.i#1", factor=2))
    assert dict(rw2.created) == {"outer": "N0.io", "inner": "N0.i#1"}
    assert find_loop(rw2.kernel, "N0.i#1")[1] == (0, 1, 0)


def test_handles_compose_split_then_vectorize_and_bind():
    k = kernel_of(stdlib_text("relu"))
    ref = next(r for r, lp, p in iter_loops(k) if lp.extent % 16 == 0 and lp.extent > 16 and not lp.body[0].__class__ is A.Loop)
    rw = plan_step(k, Step.make("loop_split", loop=ref, factor=16))
    v = plan_step(rw.kernel, Step.make("loop_vectorization", loop=rw.created["inner"]))
    assert find_loop(v.kernel, rw.created["inner"])[0].kind == "V"
    b = plan_step(rw.kernel, Step.make("loop_binding", loop=rw.created["outer"], axis="bx"))
    assert find_loop(b.kernel, b.created["bound"])[0].kind == "B"


@pytest.mark.parametrize("kernel", ["gemv", "softmax", "layernorm", "matmul_standard", "conv2d"])
def test_loop_roles_resolve_on_stdlib_sites(kernel):
    """Every listed split, tiling, fusion and binding site of a stdlib kernel names all its
    created loops (a count mismatch would leave a role out)."""
    from leirc.strategies import enumerate_sites

    k = kernel_of(stdlib_text(kernel))
    res = B.check_kernel(k)
    n = 0
    for site in enumerate_sites(k, ["loop_split", "loop_tiling", "loop_fusion", "loop_binding"], res):
        for step in site.steps(limit=1):
            rw = plan_step(k, step, result=res)
            s = get(step.name)
            assert set(rw.created) == {r.name for r in s.creates}, (step, rw.created)
            for r in s.creates:
                find_loop(rw.kernel, rw.created[r.name])
            n += 1
    assert n > 0


# ---------------------------------------------------------------------------
# -O1 composes by handles


def test_o1_cuda_binds_the_split_outer_loop_not_a_look_alike():
    """The nest already has a serial loop ``io`` of the split's outer extent: the old name
    prefix search (``var.startswith("io")``) bound that loop to blockIdx instead of the new
    outer loop ``ioa`` of the split."""
    from leirc.opt.o1 import optimize

    k = kernel_of(r"\kernel k(A:f32[1024])->(C:f32[1024]){L^{2}_{io=0}L^{512}_{i=0}"
                  r"[C^{f32,g}_{io*512+i}=A^{f32,g}_{io*512+i}*2;];}")
    res = optimize(k, "cuda")
    steps = [str(s) for s in res.steps]
    assert "loop_split(factor=256, loop=N0.i)" in steps
    assert "loop_binding(axis=bx, loop=N0.ioa)" in steps, steps
    loops = {lp.var: lp for _, lp, _ in iter_loops(res.kernel)}
    assert loops["io"].kind == "L" and loops["bxioa"].kind == "B" and loops["txi"].kind == "B"


def test_o1_llvm_vectorizes_the_split_inner_loop():
    from leirc.opt.o1 import optimize

    res = optimize(kernel_of(stdlib_text("relu")), "llvm")
    split = [s for s in res.steps if s.name == "loop_split"]
    vec = [s for s in res.steps if s.name == "loop_vectorization"]
    assert split and vec and vec[0].kwargs["loop"] == split[0].kwargs["loop"]


# ---------------------------------------------------------------------------
# leirc apply


def _leirc(*args, cwd=None):
    return subprocess.run([sys.executable, "-c", "from leirc.cli.main import main; raise SystemExit(main())", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=300)


def test_cli_apply_output_and_handles(tmp_path):
    f = tmp_path / "k.leir"
    f.write_text(EW + "\n")
    r = _leirc("apply", str(f), "loop_split", "--at", "N0.i", "--arg", "factor=4", "--compact")
    assert r.returncode == 0, r.stderr
    assert r.stdout == (r"\kernel k(A:f32[8])->(C:f32[8]){L^{2}_{io=0}L^{4}_{i=0}"
                        r"[C^{f32,g}_{io*4+i}=A^{f32,g}_{io*4+i}*2;];}" + "\n")
    assert "applied loop_split(factor=4, loop=N0.i) [operator, bitwise]" in r.stderr
    assert "created: outer=N0.io inner=N0.i" in r.stderr
    r = _leirc("apply", str(f), "loop_split", "--at", "N0.i", "--arg", "factor=4.5")
    assert r.returncode == 2 and "argument 'factor' of loop_split: expected an integer" in r.stderr
    t = tmp_path / "t.json"
    t.write_text(json.dumps({"steps": [{"strategy": "loop_split", "args": {"loop": "N0.i", "factor": True}}]}))
    r = _leirc("apply", str(f), "--trace", str(t))
    assert r.returncode == 1 and "expected an integer, got true" in r.stderr and "Traceback" not in r.stderr
