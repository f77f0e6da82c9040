"""The dependence analysis against brute force.

Hypothesis generates small LEIR programs — one nest of 1-3 loops (extents <= 8, random
starts, statements at every depth) whose statements write and read two tensors through
random subscripts: affine forms with negative coefficients and constants, ``e//c`` and
``e%c`` of affine forms, and ``(e//c, e%c)`` pairs with random divisors. Every answer
"independent" of :mod:`leirc.analysis.deps` (per access pair and per loop) and every
program the checker accepts with a ``P``/``V`` loop is compared with an exhaustive
enumeration of the statement instances: no false "independent" ever. The same
enumeration measures how exact the analysis is (it must never be conservative on these
affine and ``//``/``%`` programs: the solver is exact when its search finishes)."""

from __future__ import annotations

from collections import defaultdict
from itertools import product

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leirc.analysis import deps
from leirc.lang import ast as A
from leirc.lang.checker import check_text

PROFILE = dict(derandomize=True, deadline=None, suppress_health_check=list(HealthCheck), database=None)

VARS = ("i", "j", "k")


# ---------------------------------------------------------------------------
# generation


def _affine_str(coefs: dict, const: int, scope: tuple[str, ...]) -> str:
    terms = [f"{c}*{v}" if c != 1 else v for v, c in coefs.items() if c and v in scope]
    if not terms:
        return str(abs(const))
    s = " + ".join(terms).replace("+ -", "- ")
    if s.startswith("-"):
        s = "0" + s  # a leading minus would make -3*i parse as -(3*i): same value, fine either way
    if const:
        s += f" + {const}" if const > 0 else f" - {-const}"
    return s


@st.composite
def affine_form(draw):
    coefs = {v: draw(st.sampled_from([0, 1, 1, 2, -1, 3, -2, -3])) for v in VARS}
    return coefs, draw(st.integers(-4, 4))


@st.composite
def subscripts(draw, scope: tuple[str, ...], rank: int, pool: list) -> list[str]:
    """``rank`` subscripts over ``scope`` (not yet shifted into range). Forms come from a
    small per-program ``pool`` most of the time, so that different accesses share them
    (the interesting cases: the same ``e`` under different divisors)."""
    def form():
        f = draw(st.sampled_from(pool)) if draw(st.integers(0, 3)) else draw(affine_form())
        return _affine_str(*f, scope)

    if rank == 2 and draw(st.booleans()):
        e = form()
        c = draw(st.sampled_from([2, 4, 2, 3]))
        return [f"({e})//{c}", f"({e})%{c}"]
    out = []
    for _ in range(rank):
        e = form()
        kind = draw(st.sampled_from(["aff", "aff", "div", "mod", "aff", "div", "mod", "clamp"]))
        if kind == "div":
            e = f"({e})//{draw(st.integers(2, 4))}"
        elif kind == "mod":
            e = f"({e})%{draw(st.integers(2, 4))}"
        elif kind == "clamp":  # outside the linear fragment: decided by enumeration
            e = f"{draw(st.sampled_from(['max', 'min']))}({e}, {draw(st.integers(0, 3))})"
        out.append(e)
    return out


@st.composite
def programs(draw, perfect: bool = False, min_depth: int = 1):
    """(source with a placeholder {K0}{K1}{K2} for the kinds of the nest's loops, nest
    body, depth). ``perfect``: statements only in the innermost loop."""
    depth = draw(st.integers(min_depth, 3))
    loops = [(VARS[d], draw(st.sampled_from([1, 2, 3, 4, 5, 8, 1])), draw(st.sampled_from([0, 0, 1, 2])))
             for d in range(depth)]
    pool = [draw(affine_form()) for _ in range(2)]
    ranks = {"T": draw(st.integers(1, 2)), "U": draw(st.integers(1, 2))}
    stmts_at: list[list] = []
    for d in range(depth):
        scope = tuple(v for v, _, _ in loops[:d + 1])
        n = 0 if perfect and d < depth - 1 else draw(st.integers(0 if d < depth - 1 else 1, 2))
        level = []
        for _ in range(n):
            tgt = draw(st.sampled_from(["T", "U"]))
            reads = [(draw(st.sampled_from(["T", "U"])),) for _ in range(draw(st.integers(0, 2)))]
            accs = [(tgt, draw(subscripts(scope, ranks[tgt], pool)))]
            accs += [(r[0], draw(subscripts(scope, ranks[r[0]], pool))) for r in reads]
            level.append(accs)
        stmts_at.append(level)
    # shift every subscript into [0, n): the bound proof must succeed, the analysis then
    # sees the same forms plus a constant. The subscripts are Python expressions with the
    # same floor semantics, so their exact range comes from evaluating them over the box.
    ranges = {}
    shape = {"T": [1] * ranks["T"], "U": [1] * ranks["U"]}
    text_at = []
    for d in range(depth):
        v, n, s = loops[d]
        ranges[v] = range(s, s + n)
        box = [dict(zip(ranges, vals)) for vals in product(*ranges.values())]
        level = []
        for accs in stmts_at[d]:
            rendered = []
            for name, subs in accs:
                out = []
                for k, sub in enumerate(subs):
                    vals = [eval(sub, {"max": max, "min": min}, env) for env in box]  # noqa: S307 (generated arithmetic)
                    lo, hi = min(vals), max(vals)
                    if lo < 0:
                        sub, hi = f"{sub} + {-lo}", hi - lo
                    # slack: the checker bounds e%c by [0, c-1] even where e covers less
                    shape[name][k] = max(shape[name][k], hi + 5)
                    out.append(sub)
                rendered.append(f"{name}^{{f32,g}}_{{{','.join(out)}}}")
            level.append(rendered)
        text_at.append(level)
    init = ""
    for name in ("T", "U"):
        dims = shape[name]
        hdr = "".join(f"L^{{{n}}}_{{{name.lower()}{k}=0}}" for k, n in enumerate(dims))
        sub = ",".join(f"{name.lower()}{k}" for k in range(len(dims)))
        init += f"{hdr}[{name}^{{f32,g}}_{{{sub}}} = A^{{f32,g}}_{{0}};];\n"
    body = ""
    for d in reversed(range(depth)):
        v, n, s = loops[d]
        stmts = "".join(
            f"{acc[0]} = {' + '.join(acc[1:]) if len(acc) > 1 else 'A^{f32,g}_{0}'} + {v};" for acc in text_at[d])
        body = f"{{K{d}}}^{{{{{n}}}}}_{{{{{v}={s}}}}}[{_esc(stmts)}{body}];"
    final = "C^{f32,g}_{0} = T^{f32,g}_{" + ",".join("0" * 1 for _ in shape["T"]) + "} + U^{f32,g}_{" + \
        ",".join("0" for _ in shape["U"]) + "};"
    src = "\\kernel k(A: f32[1]) -> (C: f32[1]) {\n" + init + "{BODY}\n" + final + "\n}\n"
    return src, body, depth


def _esc(s: str) -> str:
    return s.replace("{", "{{").replace("}", "}}")


def render(prog, kinds: str) -> str:
    src, body, depth = prog
    return src.replace("{BODY}", body.format(**{f"K{d}": kinds[d] for d in range(depth)}))


# ---------------------------------------------------------------------------
# brute force


def eval_index(e: A.Expr, env: dict) -> int:
    if isinstance(e, A.Const):
        return e.value
    if isinstance(e, A.Var):
        return env[e.name]
    if isinstance(e, A.Neg):
        return -eval_index(e.operand, env)
    if isinstance(e, A.Call):
        assert e.func in ("max", "min"), f"generated subscripts are affine, // % and max/min only: {e}"
        vals = [eval_index(a, env) for a in e.args]
        return max(vals) if e.func == "max" else min(vals)
    a, b = eval_index(e.lhs, env), eval_index(e.rhs, env)
    if e.op == "+":
        return a + b
    if e.op == "-":
        return a - b
    if e.op == "*":
        return a * b
    if e.op == "//":
        return a // b
    assert e.op == "%", e.op
    return a % b


def instances(si):
    """Every iteration vector of the statement's loops (as a dict)."""
    ranges = [range(l.start, l.start + l.extent) for l in si.loops]
    for vals in product(*ranges):
        yield dict(zip((l.var for l in si.loops), vals))


def brute_pair(lp: A.Loop, wsi, w: A.Access, rsi, r: A.Access) -> bool:
    """Do ``w`` and ``r`` touch one element in two different iterations of ``lp``
    (same values of the loops enclosing ``lp``)? Mirrors the one semantic exception of the
    analysis: a plain assignment that does not mention ``lp``'s index stores the same
    value in every iteration (redundant, not a race)."""
    if wsi is rsi and r is w and wsi.kind == "assign" and not any(
            isinstance(n, A.Var) and n.name == lp.var for n in A.walk(wsi.stmt)):
        return False
    outer = []
    for l in wsi.loops:
        if l is lp:
            break
        outer.append(l.var)
    seen = defaultdict(set)
    for env in instances(wsi):
        key = (tuple(env[v] for v in outer), tuple(eval_index(i, env) for i in w.indices))
        seen[key].add(env[lp.var])
    for env in instances(rsi):
        key = (tuple(env[v] for v in outer), tuple(eval_index(i, env) for i in r.indices))
        if seen.get(key, set()) - {env[lp.var]}:
            return True
    return False


def access_pairs(stmts):
    for wsi in stmts:
        w = wsi.stmt.target
        for ref in (x for si in stmts for x in deps.refs_of(si)):
            if ref.access.name == w.name:
                yield wsi, w, ref.stmt, ref.access


STATS = {"pairs": 0, "dependent": 0, "conservative": 0}


@settings(max_examples=150, **PROFILE)
@given(programs())
def test_no_false_independent_per_pair_and_per_loop(prog):
    cf = check_text(render(prog, "LLL"))
    assert cf.ok, [d.message for d in cf.diagnostics if d.is_error]
    res = cf.results[0]
    nest_loops = [n for n in A.walk(res.kernel) if isinstance(n, A.Loop) and n.var in VARS]
    for lp in nest_loops:
        inside = [si for si in res.stmts if any(l is lp for l in si.loops)]
        any_dep = False
        for wsi, w, rsi, r in access_pairs(inside):
            truth = brute_pair(lp, wsi, w, rsi, r)
            said = not deps.loop_independent(lp, wsi, w, rsi, r)
            STATS["pairs"] += 1
            STATS["dependent"] += truth
            assert said or not truth, ("false independent", lp.var, str(w), str(r))
            # exactness: affine and //,% subscripts are decided exactly
            assert said == truth, ("conservative answer", lp.var, str(w), str(r))
            any_dep |= truth
        assert (deps.find_conflict(lp, inside) is not None) == any_dep


@settings(max_examples=120, **PROFILE)
@given(programs(), st.integers(0, 2), st.sampled_from("PV"))
def test_checker_rejects_every_parallel_loop_with_a_dependence(prog, which, kind):
    depth = prog[2]
    which = which % depth
    kinds = "".join(kind if d == which else "L" for d in range(3))
    cf = check_text(render(prog, kinds))
    res = cf.results[0]
    errors = {d.code for d in cf.diagnostics if d.is_error}
    assert errors <= {"E040"}, errors
    lp = next(n for n in A.walk(res.kernel) if isinstance(n, A.Loop) and n.var == VARS[which])
    inside = [si for si in res.stmts if any(l is lp for l in si.loops)]
    truth = lp.extent > 1 and any(brute_pair(lp, *p) for p in access_pairs(inside))
    assert ("E040" in errors) == truth


@settings(max_examples=80, **PROFILE)
@given(programs())
def test_direction_vectors_contain_every_real_direction(prog):
    """Every direction vector that occurs (brute force) is reported; reported vectors
    occur (exact on these programs)."""
    res = check_text(render(prog, "LLL")).results[0]
    stmts = res.stmts[2:-1]  # the nest under test (init nests first, final statement last)
    for wsi, w, rsi, r in access_pairs(stmts):
        common = []
        for l1, l2 in zip(wsi.loops, rsi.loops):
            if l1 is not l2:
                break
            common.append((l1, l2))
        got = deps.direction_vectors(w, wsi.loops, r, rsi.loops, common)
        truth = set()
        elems = defaultdict(list)
        for env in instances(rsi):
            elems[tuple(eval_index(i, env) for i in r.indices)].append(env)
        for env in instances(wsi):
            for env2 in elems.get(tuple(eval_index(i, env) for i in w.indices), ()):
                truth.add(tuple("<" if env[a.var] < env2[a.var] else "=" if env[a.var] == env2[a.var] else ">"
                                for a, _ in common))
        assert truth <= got, (str(w), str(r), truth - got)
        assert got == truth, (str(w), str(r), got - truth)


def test_generator_produces_dependences_and_independences():
    """The property tests above are only meaningful if both answers occur."""
    import hypothesis

    seen = {"dep": 0, "indep": 0}

    @settings(max_examples=40, **PROFILE)
    @given(programs())
    def run(prog):
        res = check_text(render(prog, "LLL")).results[0]
        for lp in (n for n in A.walk(res.kernel) if isinstance(n, A.Loop) and n.var in VARS):
            inside = [si for si in res.stmts if any(l is lp for l in si.loops)]
            seen["dep" if deps.find_conflict(lp, inside) else "indep"] += 1

    run()
    assert seen["dep"] > 5 and seen["indep"] > 5, seen
    assert hypothesis is not None
