"""The oracle does not trust the analysis it checks.

The literal, loop-by-loop execution (``Interpreter(result, vectorize=False)``) is the
meaning of a program; the vectorized plan is an optimization gated by its own simple
condition (leirc.interp.plan). Here the two are cross-checked on every stdlib kernel at
reduced size, on the Step-TP compat programs, and on random programs with affine and
``//``/``%`` subscripts -- bitwise when no loop reduces vectorized, within a tight
normwise tolerance otherwise. Also: the uninitialized-read check, NaN semantics of
max/min and comparisons, and signed integer overflow (an error in LEIR), in both modes.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from leirc.interp import InterpError, Interpreter, check_source, describe_plan, random_inputs
from leirc.interp import dtypes as D
from leirc.interp.plan import RVEC, make_plan
from leirc.interp.shrink import iterations, shrink
from leirc.lang.checker import check_kernel, check_text
from leirc.lang.parser import parse_record

ROOT = Path(__file__).resolve().parents[1]
STDLIB = sorted((ROOT / "stdlib").glob("*.leir"))
EMITTED = ROOT.parent / "shared" / "compat" / "steptp_emitted_level1.jsonl"

#: literal statement instances we are willing to run per program (~40 us each)
BUDGET = 80_000


def K(body: str, sig: str) -> str:
    return f"\\kernel k({sig}) {{\n{body}\n}}\n"


def _bits(a: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "f" or a.dtype == D.BF16:
        return np.ascontiguousarray(a).view(f"u{a.dtype.itemsize}")
    return a


def _tol(dt: np.dtype) -> float:
    if dt == np.float64:
        return 1e-12
    if dt == np.float32:
        return 2e-6
    return 1e-2  # f16 / bf16: a serial half-precision loop rounds at every step


def assert_modes_agree(result, inputs, label: str = "") -> dict:
    """Run literal and vectorized (and vectorized in tiny blocks); compare every output and
    intermediate. Bitwise unless some loop reduces vectorized; then floats agree within a
    normwise tolerance of the dtype (the vectorized sums accumulate in float64) and NaN
    positions agree exactly. Returns the literal results."""
    lit = Interpreter(result, vectorize=False).run(inputs, intermediates=True)
    reassoc = RVEC in make_plan(result).modes.values()
    for kw in ({}, {"max_elements": 7}):
        vec = Interpreter(result, **kw).run(inputs, intermediates=True)
        for name, a in lit.items():
            b = vec[name]
            assert a.shape == b.shape and a.dtype == b.dtype, (label, name)
            floaty = a.dtype.kind == "f" or a.dtype == D.BF16
            if not reassoc or not floaty:
                np.testing.assert_array_equal(_bits(b), _bits(a), err_msg=f"{label}: '{name}' vectorized {kw} != literal")
                continue
            a64, b64 = a.astype(np.float64), b.astype(np.float64)
            np.testing.assert_array_equal(np.isnan(b64), np.isnan(a64), err_msg=f"{label}: '{name}' NaN positions")
            fin = np.isfinite(a64)
            np.testing.assert_array_equal(b64[~fin & ~np.isnan(a64)], a64[~fin & ~np.isnan(a64)])
            if fin.any():
                scale = max(1.0, float(np.abs(a64[fin]).max()))
                err = float(np.abs(a64[fin] - b64[fin]).max())
                assert err <= _tol(a.dtype) * scale, f"{label}: '{name}' differs by {err:.3g} (scale {scale:.3g}) {kw}"
    return lit


# ---------------------------------------------------------------------------
# the //,% regression: the checker's dependence test treated W_{i//2,i%2} and
# W_{i//4,i%4} as the same "dimension i"; the oracle vectorized the loop and computed a
# wrong result for a plain serial program


REGRESSION = K("L^{4}_{a=0} L^{4}_{b=0} [ W^{f32,g}_{a,b} = 0.0; ];\n"
               "L^{8}_{i=0} [ W^{f32,g}_{i//2,i%2} = W^{f32,g}_{i//4,i%4} + A^{f32,g}_{i}; ];",
               "A: f32[8]) -> (W: f32[4, 4]")


def test_div_mod_serial_regression():
    r = check_source(REGRESSION)
    A = np.arange(1, 9, dtype=np.float32)
    w = np.zeros((4, 4), np.float32)
    for i in range(8):
        w[i // 2, i % 2] = w[i // 4, i % 4] + A[i]
    np.testing.assert_array_equal(Interpreter(r).run({"A": A})["W"], w)
    np.testing.assert_array_equal(Interpreter(r, vectorize=False).run({"A": A})["W"], w)
    assert "L^{8}_{i}: iter" in describe_plan(r)


@pytest.mark.parametrize("body,sig,expect", [
    # the same (E//k, E%k) pair everywhere recovers E: vectorizable
    ("B^{16}_{tx=0} L^{6}_{a=0} [ D^{f32,g}_{tx//8,tx%8} = max(D^{f32,g}_{tx//8,tx%8}, A^{f32,g}_{tx,a}); ];",
     "A: f32[16, 6]) -> (D: f32[2, 8]", ["B^{16}_{tx}: vec", "  L^{6}_{a}: rvec"]),
    # different moduli: not the same element numbering
    ("L^{4}_{a=0} L^{4}_{b=0} [ W^{f32,g}_{a,b} = 0.0; ];\n"
     "L^{8}_{i=0} [ W^{f32,g}_{i//2,i%2} = W^{f32,g}_{i//4,i%4} + 1.0; ];", "A: f32[1]) -> (W: f32[4, 4]",
     ["L^{4}_{a}: vec", "  L^{4}_{b}: vec", "L^{8}_{i}: iter"]),
    # a split loop: f*4 + tx with tx in [0, 4) tells the iterations of f apart
    ("L^{4}_{f=0} L^{4}_{tx=0} L^{5}_{a=0} [ D^{f32,g}_{f*4+tx,a} = A^{f32,g}_{f*4+tx,a} * 2.0; ];",
     "A: f32[16, 5]) -> (D: f32[16, 5]", ["L^{4}_{f}: vec", "  L^{4}_{tx}: vec", "    L^{5}_{a}: vec"]),
    # ... but f*3 + tx does not (iterations f and f+1 overlap)
    ("L^{13}_{a=0} [ D^{f32,g}_{a} = 1.0; ];\n"
     "L^{4}_{f=0} L^{4}_{tx=0} [ D^{f32,g}_{f*3+tx} = D^{f32,g}_{f*3+tx} * 0.5 + A^{f32,g}_{f*4+tx}; ];",
     "A: f32[16]) -> (D: f32[13]", ["L^{13}_{a}: vec", "L^{4}_{f}: iter", "  L^{4}_{tx}: vec"]),
    # flattened layout: a*16 + tx is a mixed-radix numbering of (a, tx)
    ("B^{16}_{tx=0} L^{8}_{a=0} [ D^{f32,g}_{a*16+tx} = A^{f32,g}_{tx,a}; ];\n"
     "B^{16}_{tx=0} L^{8}_{a=0} [ C^{f32,g}_{tx,a} = D^{f32,g}_{a*16+tx} + 1.0; ];",
     "A: f32[16, 8]) -> (C: f32[16, 8]", None),
    # a shifted read of the written tensor is a real dependence
    ("L^{8}_{i=0} [ Y^{f32,g}_{i} = A^{f32,g}_{i}; ];\nL^{7}_{i=0} [ Y^{f32,g}_{i+1} = Y^{f32,g}_{i} * 0.5; ];",
     "A: f32[8]) -> (Y: f32[8]", ["L^{8}_{i}: vec", "L^{7}_{i}: iter"]),
    # reversed subscripts are injective too
    ("L^{8}_{i=0} [ Y^{f32,g}_{7-i} = A^{f32,g}_{i} + 1.0; ];\nL^{8}_{i=0} [ Y^{f32,g}_{7-i} = Y^{f32,g}_{7-i} * 2.0; ];",
     "A: f32[8]) -> (Y: f32[8]", ["L^{8}_{i}: vec", "L^{8}_{i}: vec"]),
    # invariant store inside a reduction loop (the Step-TP argmax pattern)
    ("L^{3}_{t=0} L^{5}_{a=0} [ M^{f32,g}_{t} = max(M^{f32,g}_{t}, A^{f32,g}_{t,a}); C^{i64,g}_{t} = 0; ];",
     "A: f32[3, 5]) -> (M: f32[3], C: i64[3]", ["L^{3}_{t}: vec", "  L^{5}_{a}: rvec"]),
    # a scalar temporary carries a dependence
    ("L^{6}_{i=0} [ T^{f32,l} = A^{f32,g}_{i} * 3.0; Y^{f32,g}_{i} = T^{f32,l} + 1.0; ];",
     "A: f32[6]) -> (Y: f32[6]", ["L^{6}_{i}: iter"]),
])
def test_plan_rule_and_agreement(body, sig, expect):
    r = check_source(K(body, sig))
    if expect is not None:
        assert [l.split(" (")[0] for l in describe_plan(r).split("\n")] == expect
    for seed in range(2):
        assert_modes_agree(r, random_inputs(r.kernel, seed, "normal"), body)


def test_plan_does_not_consult_the_checkers_dependence_test(monkeypatch):
    import leirc.lang.checker as C

    def boom(*a, **k):  # pragma: no cover - must not be called
        raise AssertionError("the interpreter's plan used the checker's dependence test")

    for name in ("_independent", "find_conflict", "_only_self_conflicts"):
        if hasattr(C, name):
            monkeypatch.setattr(C, name, boom)
    r = check_source(REGRESSION)
    make_plan(r)
    for f in STDLIB[:6]:
        make_plan(check_source(f.read_text(encoding="utf-8")))


# ---------------------------------------------------------------------------
# (a) every stdlib kernel at reduced size


@pytest.mark.parametrize("path", STDLIB, ids=[p.stem for p in STDLIB])
def test_stdlib_kernel_literal_equals_vectorized(path):
    orig = check_source(path.read_text(encoding="utf-8"))
    r, moved = shrink(orig.kernel)
    n = iterations(r)
    if n > BUDGET:
        pytest.skip(f"could shrink only to {n} literal statement instances (> {BUDGET}): sizes are tied to "
                    f"products of other sizes (e.g. channels = groups x channels-per-group), moved {moved}")
    assert [make_plan(r).modes[id(l)] for l in _loops(r.kernel)] == [make_plan(orig).modes[id(l)]
                                                                      for l in _loops(orig.kernel)]
    for seed, dist in ((0, "normal"), (1, "signed")):
        assert_modes_agree(r, random_inputs(r.kernel, seed, dist), path.stem)


def test_stdlib_plans_stay_vectorized():
    # the simple condition must not cost speed on the stdlib: every loop runs vectorized
    # except the scan of cumsum
    for path in STDLIB:
        r = check_source(path.read_text(encoding="utf-8"))
        modes = make_plan(r).modes
        iters = [l.var for l in _loops(r.kernel) if modes[id(l)] == "iter"]
        assert iters == (["j"] if path.stem == "cumsum" else []), (path.stem, describe_plan(r))


def _loops(k):
    from leirc.lang import ast as A

    return [n for n in A.walk(k) if isinstance(n, A.Loop)]


def test_shrink_keeps_structure_and_checks_clean():
    orig = check_source((ROOT / "stdlib" / "conv2d.leir").read_text(encoding="utf-8"))
    r, moved = shrink(orig.kernel)
    assert r.ok and iterations(r) < iterations(orig) / 1000
    # 64, 65, 66 (size, guard bound, padded size) move together
    assert (64, 66, 4) in moved
    assert [p.shape for p in r.kernel.inputs] == [(2, 4, 4, 4), (4, 4, 3, 3)]
    assert [p.shape for p in r.kernel.outputs] == [(2, 4, 4, 4)]


# ---------------------------------------------------------------------------
# (b) the Step-TP compat programs


def _emitted() -> list:
    if not EMITTED.is_file():
        return []
    return [json.loads(line) for line in EMITTED.open(encoding="utf-8") if line.strip()]


_RECS = _emitted()


@pytest.mark.parametrize("idx", range(len(_RECS)) if _RECS else [None],
                         ids=[r["model"] for r in _RECS] if _RECS else ["compat-missing"])
def test_compat_program_literal_equals_vectorized(idx):
    if idx is None:
        pytest.skip(f"compat corpus not found at {EMITTED} (it lives in ../shared next to the repository)")
    rec = _RECS[idx]
    pr = parse_record(rec)
    assert pr.ok
    r = check_kernel(pr.module.kernels[0])
    assert r.ok
    if iterations(r) > BUDGET:
        r, _ = shrink(r.kernel)
    n = iterations(r)
    if n > BUDGET:
        pytest.skip(f"{n} literal statement instances even after shrinking (> {BUDGET})")
    assert_modes_agree(r, random_inputs(r.kernel, 0, "uniform"), rec["model"])


# ---------------------------------------------------------------------------
# (c) random programs: affine and //,% subscripts, extents <= 8, several statements


class _Gen:
    """Seeded generator of small checked programs over W1 (1-D) and W2 (2-D), both
    initialized first, then several statements in serial loops reading and writing them
    through random subscripts (affine, reversed, //, %, pairs (E//k, E%k)), some in
    reduction form."""

    N1, N2 = 16, (4, 8)

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.pair_e = None
        self.dtype = "i32" if self.rng.random() < 0.25 else ("f32" if self.rng.random() < 0.3 else "f64")

    def sub1(self, vs, n):
        """A subscript expression over loop vars ``vs`` (name -> (start, extent)) in [0, n)."""
        rng = self.rng
        for _ in range(40):
            v = rng.choice(list(vs))
            u = rng.choice(list(vs))
            k = rng.choice([2, 3, 4])
            c = rng.randint(0, 3)
            e = rng.choice([f"{v}", f"{v}+{c}", f"{7}-{v}", f"{v}//{k}", f"{v}%{k}", f"{v}*2+{c}",
                            f"{v}+{u}", f"({v}+{u})//{k}", f"{v}*{k}+{u}%{k}", f"{u}*4+{v}//2"])
            if self._in_range(e, vs, n):
                return e
        return None

    @staticmethod
    def _in_range(e, vs, n):
        import itertools

        names = list(vs)
        for vals in itertools.product(*[range(s, s + x) for s, x in vs.values()]):
            env = dict(zip(names, vals))
            x = eval(e, {}, env)  # the generator's own tiny expressions only
            if not 0 <= x < n:
                return False
        return True

    def access(self, name, vs):
        t = self.dtype
        if name == "W1" or name == "A":
            s = self.sub1(vs, self.N1)
            return None if s is None else f"{name}^{{{t},g}}_{{{s}}}"
        rng = self.rng
        if rng.random() < 0.4:
            v = rng.choice(list(vs))
            k = rng.choice([2, 4, 8])
            e = rng.choice([f"{v}", f"{v}*2+1", f"{v}+2"])
            if self.pair_e is not None and self.pair_e[1] == tuple(vs) and rng.random() < 0.7:
                # the same E under another modulus: the aliasing that fooled the checker
                e = self.pair_e[0]
                k = rng.choice([m for m in (2, 4, 8) if m != self.pair_e[2]])
            self.pair_e = (e, tuple(vs), k)
            if self._in_range(f"({e})//{k}", vs, self.N2[0]) and self._in_range(e, vs, 32):
                return f"{name}^{{{t},g}}_{{({e})//{k},({e})%{k}}}"
        a, b = self.sub1(vs, self.N2[0]), self.sub1(vs, self.N2[1])
        return None if a is None or b is None else f"{name}^{{{t},g}}_{{{a},{b}}}"

    def value(self, vs, depth=0):
        rng = self.rng
        r = rng.random()
        if depth >= 2 or r < 0.35:
            src = rng.choice(["W1", "W2", "A", "W1", "W2"])
            return self.access(src, vs) or ("1.5" if self.dtype != "i32" else "3")
        if r < 0.45:
            return self.rng.choice(["0.5", "2.0", "1.0"]) if self.dtype != "i32" else str(rng.randint(1, 5))
        a, b = self.value(vs, depth + 1), self.value(vs, depth + 1)
        if r < 0.55:
            return f"max({a}, {b})"
        if r < 0.62:
            v = rng.choice(list(vs))
            return f"if_then_else({v} < {rng.randint(1, 6)}, {a}, {b})"
        op = rng.choice(["+", "-", "+", "*"] if self.dtype != "i32" else ["+", "-"])
        return f"({a} {op} {b})"

    def program(self) -> str:
        rng, t = self.rng, self.dtype
        items = [f"L^{{16}}_{{a=0}} [ W1^{{{t},g}}_{{a}} = A^{{{t},g}}_{{a}}; ];",
                 f"L^{{4}}_{{a=0}} L^{{8}}_{{b=0}} [ W2^{{{t},g}}_{{a,b}} = A^{{{t},g}}_{{a+b}} * 2; ];"]
        for _ in range(rng.randint(2, 4)):
            nv = rng.choice([1, 2, 2, 3])
            names = rng.sample(["i", "j", "k"], nv)
            vs = {v: (rng.choice([0, 0, 0, 1]), rng.randint(1, 8)) for v in names}
            body = []
            for _ in range(rng.choice([1, 1, 2])):
                tgt = self.access(rng.choice(["W1", "W2"]), vs)
                if tgt is None:
                    continue
                if rng.random() < 0.3:
                    op = rng.choice(["+", "max"])
                    e = self.value(vs, 1)
                    body.append(f"{tgt} = {tgt} + {e};" if op == "+" else f"{tgt} = max({tgt}, {e});")
                else:
                    body.append(f"{tgt} = {self.value(vs)};")
            if rng.random() < 0.25:
                # a pair under two moduli of the same E in one loop (flow dependence when
                # the write's modulus is the smaller one)
                v = names[0]
                k1, k2 = sorted(rng.sample([2, 4, 8], 2))
                e = rng.choice([v, f"{v}+1"])
                vs[v] = (0, rng.randint(4, 8))
                if self._in_range(f"({e})//{k1}", vs, self.N2[0]) and self._in_range(f"({e})//{k2}", vs, self.N2[0]):
                    w, r = (k1, k2) if rng.random() < 0.7 else (k2, k1)
                    body.insert(0, f"W2^{{{t},g}}_{{({e})//{w},({e})%{w}}} = W2^{{{t},g}}_{{({e})//{r},({e})%{r}}} "
                                   f"+ {self.value(vs, 1)};")
            if not body:
                continue
            heads = "".join(f"L^{{{x}}}_{{{v}={s}}}" for v, (s, x) in vs.items())
            items.append(heads + " [ " + " ".join(body) + " ];")
            if rng.random() < 0.3:
                # the bare aliasing pattern in a loop of its own, as in the regression
                k1, k2 = sorted(rng.sample([2, 4], 2))
                n = rng.randint(5, 8)
                w, r = (k1, k2) if rng.random() < 0.8 else (k2, k1)
                items.append(f"L^{{{n}}}_{{v=0}} [ W2^{{{t},g}}_{{v//{w},v%{w}}} = W2^{{{t},g}}_{{v//{r},v%{r}}} "
                             f"+ A^{{{t},g}}_{{v}}; ];")
        return K("\n".join(items), f"A: {t}[32]) -> (W1: {t}[16], W2: {t}[4, 8]")


def _random_program(seed: int):
    for attempt in range(50):
        src = _Gen(seed * 1000 + attempt).program()
        cf = check_text(src)
        if cf.ok:
            return src, cf.results[0]
    raise AssertionError(f"no checked program for seed {seed}")


@pytest.mark.parametrize("seed", range(120))
def test_random_programs_literal_equals_vectorized(seed):
    src, r = _random_program(seed)
    ins = random_inputs(r.kernel, seed, "signed")
    if r.kernel.inputs[0].dtype == "i32":
        ins = {"A": np.random.default_rng(seed).integers(-20, 20, size=32).astype(np.int32)}
    try:
        lit = Interpreter(r, vectorize=False).run(ins, intermediates=True)
    except InterpError as e:  # e.g. signed overflow: then both modes must fail
        with pytest.raises(InterpError):
            Interpreter(r).run(ins, intermediates=True)
        assert str(e)
        return
    assert lit
    assert_modes_agree(r, ins, src)


def test_random_generator_is_deterministic_and_exercises_div_mod():
    runs = [_random_program(s) for s in range(20)]
    assert [p for p, _ in runs[:5]] == [_random_program(s)[0] for s in range(5)]  # seeded: the same again
    text = "".join(p for p, _ in runs)
    assert "//" in text and "%" in text and "max(" in text
    # some of the generated loops really carry dependences (iterate) and some vectorize
    modes = [m for _, r in runs for m in make_plan(r).modes.values()]
    assert "iter" in modes and "vec" in modes and "rvec" in modes


# ---------------------------------------------------------------------------
# reads of never-written elements (check_uninit)


UNINIT = K("L^{4}_{i=0} [ T^{f32,g}_{i*2} = A^{f32,g}_{i} * 2.0; ];\n"
           "L^{7}_{i=0} [ Y^{f32,g}_{i} = T^{f32,g}_{i} + 1.0; ];", "A: f32[8]) -> (Y: f32[7]")


@pytest.mark.parametrize("vectorize", [True, False])
def test_uninitialized_intermediate_read_is_an_error(vectorize):
    r = check_source(UNINIT)
    A = np.arange(8, dtype=np.float32)
    it = Interpreter(r, vectorize=vectorize)
    y = it.run({"A": A})["Y"]  # without the check: poison flows into the output
    assert np.isnan(y[1::2]).all() and (y[0::2] == A[:4] * 2 + 1).all()
    with pytest.raises(InterpError) as ei:
        it.run({"A": A}, check_uninit=True)
    msg = str(ei.value)
    assert msg.startswith("uninitialized read:")
    assert "'T' element [1]" in msg and "Y^{f32,g}_{i} = T^{f32,g}_{i}+1.0" in msg and "at 3:" in msg
    assert ei.value.span is not None and ei.value.span.line == 3


@pytest.mark.parametrize("vectorize", [True, False])
def test_uninit_check_respects_guards_reductions_and_updates(vectorize):
    # the unwritten odd elements are only read in the untaken branch
    src = K("L^{4}_{i=0} [ T^{f32,g}_{i*2} = A^{f32,g}_{i} * 2.0; ];\n"
            "L^{7}_{i=0} [ Y^{f32,g}_{i} = if_then_else(i%2 < 1, T^{f32,g}_{i}, 0.0) + 1.0; ];",
            "A: f32[8]) -> (Y: f32[7]")
    r = check_source(src)
    A = np.arange(8, dtype=np.float32)
    y = Interpreter(r, vectorize=vectorize).run({"A": A}, check_uninit=True)["Y"]
    np.testing.assert_array_equal(y, [1, 1, 3, 1, 5, 1, 7])
    # reductions are initialized (identity) on entry to their init loop; scans read
    # only what they wrote; an in-place update of a fully written tensor is fine
    src = K("L^{4}_{i=0} L^{6}_{j=0} [ S^{f32,g}_{i} = S^{f32,g}_{i} + B^{f32,g}_{i,j}; ];\n"
            "L^{4}_{i=0} L^{6}_{j=0} [ C^{f32,g}_{i,j} = if_then_else(1 <= j, C^{f32,g}_{i,j-1}, 0.0) + B^{f32,g}_{i,j}; ];\n"
            "L^{4}_{i=0} L^{6}_{j=0} [ S^{f32,g}_{i} = max(S^{f32,g}_{i}, C^{f32,g}_{i,j}); ];",
            "B: f32[4, 6]) -> (S: f32[4], C: f32[4, 6]")
    r = check_source(src)
    Interpreter(r, vectorize=vectorize).run(random_inputs(r.kernel, 0), check_uninit=True)


@pytest.mark.parametrize("vectorize", [True, False])
def test_uninit_check_covers_outputs_indirect_reads_and_accumulator_loads(vectorize):
    # an output element read before it is written
    src = K("L^{3}_{i=0} [ Y^{f32,g}_{i+1} = A^{f32,g}_{i}; ];\nL^{4}_{i=0} [ Z^{f32,g}_{i} = Y^{f32,g}_{i}; ];\n"
            "Y^{f32,g}_{0} = 0.0;", "A: f32[3]) -> (Y: f32[4], Z: f32[4]")
    r = check_source(src)
    with pytest.raises(InterpError, match=r"^uninitialized read: 'Y' element \[0\]"):
        Interpreter(r, vectorize=vectorize).run({"A": np.ones(3, np.float32)}, check_uninit=True)
    # ... unless the caller gives its initial contents
    Interpreter(r, vectorize=vectorize).run({"A": np.ones(3, np.float32)}, check_uninit=True,
                                            outputs={"Y": np.zeros(4, np.float32), "Z": np.zeros(4, np.float32)})
    # a data-dependent read of an intermediate
    src = K("L^{2}_{i=0} [ T^{f32,g}_{i} = A^{f32,g}_{i}; ];\nL^{3}_{i=0} [ T^{f32,g}_{i+2} = A^{f32,g}_{i}; ];\n"
            "L^{3}_{i=0} [ Y^{f32,g}_{i} = T^{f32,g}_{L^{i64,g}_{i}}; ];", "A: f32[3], L: i64[3]) -> (Y: f32[3]")
    r = check_source(src)
    ins = {"A": np.ones(3, np.float32), "L": np.array([0, 4, 1])}
    Interpreter(r, vectorize=vectorize).run(ins, check_uninit=True)
    # writes by several statements together cover T and S: the update reads only written elements
    src = K("L^{2}_{i=0} [ T^{f32,g}_{i} = A^{f32,g}_{i}; ];\nL^{3}_{i=0} [ T^{f32,g}_{i+2} = A^{f32,g}_{i}; ];\n"
            "L^{2}_{i=0} [ T^{f32,g}_{i*4} = 0.0; ];\n"
            "L^{8}_{i=0} L^{3}_{j=0} [ S^{f32,g}_{i} = A^{f32,g}_{j}; ];\n"
            "L^{5}_{i=0} L^{3}_{j=0} [ S^{f32,g}_{i} = S^{f32,g}_{i} + T^{f32,g}_{i}; ];\n"
            "L^{8}_{i=0} [ Y^{f32,g}_{i} = S^{f32,g}_{i}; ];", "A: f32[3]) -> (Y: f32[8]")
    r = check_source(src)
    Interpreter(r, vectorize=vectorize).run({"A": np.ones(3, np.float32)}, check_uninit=True)


@pytest.mark.parametrize("vectorize", [True, False])
def test_uninit_check_on_update_of_unwritten_accumulator(vectorize):
    src = K("L^{3}_{i=0} [ S^{f32,g}_{i*2} = A^{f32,g}_{i}; ];\n"
            "L^{5}_{i=0} L^{4}_{j=0} [ S^{f32,g}_{i} = S^{f32,g}_{i} + A^{f32,g}_{j%3}; ];\n"
            "L^{5}_{i=0} [ Y^{f32,g}_{i} = S^{f32,g}_{i}; ];", "A: f32[3]) -> (Y: f32[5]")
    r = check_source(src)
    with pytest.raises(InterpError, match=r"^uninitialized read: 'S' element \[1\]"):
        Interpreter(r, vectorize=vectorize).run({"A": np.ones(3, np.float32)}, check_uninit=True)


def test_uninit_check_on_stdlib_kernels_passes():
    for name in ("softmax", "layernorm", "conv2d", "cumsum", "maxpool2d", "sdpa"):
        orig = check_source((ROOT / "stdlib" / f"{name}.leir").read_text(encoding="utf-8"))
        r, _ = shrink(orig.kernel)
        ins = random_inputs(r.kernel, 0)
        for vec in (True, False):
            Interpreter(r, vectorize=vec).run(ins, check_uninit=True)


# ---------------------------------------------------------------------------
# NaN: max/min propagate it (like torch.maximum), comparisons follow IEEE


NAN_SRC = K("L^{6}_{i=0} [ Y^{f32,g}_{i} = max(A^{f32,g}_{i}, B^{f32,g}_{i}); Z^{f32,g}_{i} = min(A^{f32,g}_{i}, B^{f32,g}_{i}); "
            "M^{f32,g}_{i} = max(A^{f32,g}_{i}, 0.0, B^{f32,g}_{i}); "
            "C^{bool,g}_{i,0} = A^{f32,g}_{i} < B^{f32,g}_{i}; C^{bool,g}_{i,1} = A^{f32,g}_{i} <= B^{f32,g}_{i}; "
            "C^{bool,g}_{i,2} = A^{f32,g}_{i} > B^{f32,g}_{i}; C^{bool,g}_{i,3} = A^{f32,g}_{i} >= B^{f32,g}_{i}; "
            "C^{bool,g}_{i,4} = A^{f32,g}_{i} == B^{f32,g}_{i}; C^{bool,g}_{i,5} = A^{f32,g}_{i} != B^{f32,g}_{i}; "
            "C^{bool,g}_{i,6} = 0.0 < A^{f32,g}_{i} < 5.0; "
            "R^{f32,g}_{i} = if_then_else(A^{f32,g}_{i} > 0.0, 1.0, 2.0); ];",
            "A: f32[6], B: f32[6]) -> (Y: f32[6], Z: f32[6], M: f32[6], C: bool[6, 7], R: f32[6]")


@pytest.mark.parametrize("vectorize", [True, False])
def test_max_min_propagate_nan_and_comparisons_are_ieee(vectorize):
    nan = np.nan
    A = np.array([nan, 1.0, nan, 3.0, -np.inf, 2.0], np.float32)
    B = np.array([1.0, nan, nan, 4.0, nan, 2.0], np.float32)
    out = Interpreter(check_source(NAN_SRC), vectorize=vectorize).run({"A": A, "B": B})
    isn = np.isnan
    assert isn(out["Y"]).tolist() == [True, True, True, False, True, False]
    assert isn(out["Z"]).tolist() == [True, True, True, False, True, False]
    assert isn(out["M"]).tolist() == [True, True, True, False, True, False]
    assert out["Y"][3] == 4.0 and out["Z"][3] == 3.0 and out["M"][5] == 2.0
    C = out["C"]
    for i in (0, 1, 2, 4):  # a NaN operand: every comparison false except !=
        assert C[i, :5].tolist() == [False] * 5 and C[i, 5]
    assert C[3].tolist()[:6] == [True, True, False, False, False, True]
    assert C[5].tolist()[:6] == [False, True, False, True, True, False]
    assert C[:, 6].tolist() == [False, True, False, True, False, True]
    assert out["R"].tolist() == [2.0, 1.0, 2.0, 1.0, 2.0, 1.0]  # NaN > 0 is false


@pytest.mark.parametrize("vectorize", [True, False])
@pytest.mark.parametrize("n", [6, 4096])  # 4096 x 3: the short-window reduction path
def test_max_min_reductions_propagate_nan(vectorize, n):
    src = K(f"L^{{{n}}}_{{i=0}} L^{{3}}_{{j=0}} [ Y^{{f32,g}}_{{i}} = max(Y^{{f32,g}}_{{i}}, A^{{f32,g}}_{{i,j}}); "
            f"Z^{{f32,g}}_{{i}} = min(A^{{f32,g}}_{{i,j}}, Z^{{f32,g}}_{{i}}); ];\n"
            f"L^{{{n}}}_{{i=0}} L^{{3}}_{{j=0}} [ G^{{f32,g}} = max(G^{{f32,g}}, A^{{f32,g}}_{{i,j}}); ];",
            f"A: f32[{n}, 3]) -> (Y: f32[{n}], Z: f32[{n}], G: f32[]")
    r = check_source(src)
    if not vectorize and n > 6:
        pytest.skip("the literal run of the long case is covered at n=6")
    A = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    A[1, 0] = np.nan  # first position
    A[2, 2] = np.nan  # last position
    out = Interpreter(r, vectorize=vectorize).run({"A": A})
    expect = np.zeros(n, bool)
    expect[[1, 2]] = True
    assert np.isnan(out["Y"]).tolist() == expect.tolist()
    assert np.isnan(out["Z"]).tolist() == expect.tolist()
    assert np.isnan(out["G"])
    assert out["Y"][0] == 2 and out["Z"][3] == 9
    if vectorize:
        assert "rvec" in describe_plan(r)


# ---------------------------------------------------------------------------
# signed integer overflow is an error; unsigned arithmetic wraps


_EXACT = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
          "neg": lambda a, b: -a, "abs": lambda a, b: abs(a), "//": lambda a, b: a // b}


@pytest.mark.parametrize("vectorize", [True, False])
@pytest.mark.parametrize("T", ["i8", "i16", "i32", "i64"])
@pytest.mark.parametrize("op", ["+", "-", "*", "neg", "abs", "//"])
def test_signed_overflow_is_an_error(T, op, vectorize):
    """Each result is compared with exact (Python) integer arithmetic: in range -> the
    exact value, out of range -> InterpError("signed integer overflow: ...")."""
    dt = D.np_dtype(T)
    a_, b_ = f"A^{{{T},g}}_{{i}}", f"B^{{{T},g}}_{{i}}"
    expr = {"neg": f"-{a_}", "abs": f"abs({a_})"}.get(op, f"{a_} {op} {b_}")
    src = K(f"L^{{3}}_{{i=0}} [ Y^{{{T},g}}_{{i}} = {expr}; ];", f"A: {T}[3], B: {T}[3]) -> (Y: {T}[3]")
    it = Interpreter(check_source(src), vectorize=vectorize)
    mn, mx = int(np.iinfo(dt).min), int(np.iinfo(dt).max)
    half = 1 << (8 * dt.itemsize - 2)
    edge = [mn, mn + 1, -half - 1, -half, -3, -1, 0, 1, 2, 3, half - 1, half, mx - 1, mx]
    n_err = 0
    for x in edge:
        for y in (edge if op in ("+", "-", "*", "//") else [0]):
            if op == "//" and y == 0:
                continue
            exact = _EXACT[op](x, y)
            ins = {"A": np.array([1, x, 0], dtype=dt), "B": np.array([1, y, 1], dtype=dt)}
            if mn <= exact <= mx:
                assert int(it.run(ins)["Y"][1]) == exact, (x, op, y)
            else:
                n_err += 1
                with pytest.raises(InterpError, match=r"^signed integer overflow: .*in " + T) as ei:
                    it.run(ins)
                assert "at i=1" in str(ei.value)
    assert n_err > 0


@pytest.mark.parametrize("vectorize", [True, False])
def test_unsigned_wraps_and_untaken_branches_do_not_overflow(vectorize):
    src = K("L^{3}_{i=0} [ Y^{u8,g}_{i} = A^{u8,g}_{i} + B^{u8,g}_{i}; ];\n"
            "L^{3}_{i=0} [ Z^{i32,g}_{i} = if_then_else(i < 2, C^{i32,g}_{i} * 2, 0); ];",
            "A: u8[3], B: u8[3], C: i32[3]) -> (Y: u8[3], Z: i32[3]")
    r = check_source(src)
    out = Interpreter(r, vectorize=vectorize).run({"A": np.array([250, 1, 2], np.uint8), "B": np.array([10, 2, 3], np.uint8),
                                                   "C": np.array([5, -6, 2 ** 31 - 1], np.int32)})
    assert out["Y"].tolist() == [4, 3, 5] and out["Z"].tolist() == [10, -12, 0]


@pytest.mark.parametrize("vectorize", [True, False])
@pytest.mark.parametrize("T", ["i32", "i64"])
def test_signed_overflow_in_reductions(T, vectorize):
    dt = D.np_dtype(T)
    src = K(f"L^{{3}}_{{i=0}} L^{{4}}_{{j=0}} [ Y^{{{T},g}}_{{i}} = Y^{{{T},g}}_{{i}} + A^{{{T},g}}_{{i,j}}; ];\n"
            f"L^{{3}}_{{i=0}} [ Z^{{{T},g}}_{{i}} = 5; ];\n"
            f"L^{{3}}_{{i=0}} L^{{4}}_{{j=0}} [ Z^{{{T},g}}_{{i}} = Z^{{{T},g}}_{{i}} - A^{{{T},g}}_{{i,j}}; ];",
            f"A: {T}[3, 4]) -> (Y: {T}[3], Z: {T}[3]")
    r = check_source(src)
    if vectorize:
        assert describe_plan(r).count("rvec") == 2
    it = Interpreter(r, vectorize=vectorize)
    big = 1 << (8 * dt.itemsize - 2)
    out = it.run({"A": np.arange(12, dtype=dt).reshape(3, 4)})
    assert out["Y"].tolist() == [6, 22, 38] and out["Z"].tolist() == [-1, -17, -33]
    # large terms that cancel in order: every running value fits
    ok = np.array([[big, -big, big, -big]] * 3, dtype=dt)
    out = it.run({"A": ok})
    assert out["Y"].tolist() == [0, 0, 0] and out["Z"].tolist() == [5, 5, 5]
    # the final sum would fit (0), but the running value big+big does not: an error in
    # the literal loop, so also in the vectorized reduction
    with pytest.raises(InterpError, match=r"^signed integer overflow"):
        it.run({"A": np.array([[big, big, -big, -big]] * 3, dtype=dt)})
    with pytest.raises(InterpError, match=r"^signed integer overflow"):
        it.run({"A": np.array([[1, 2, 3, 4], [5, 6, 7, 8], [-big, -big, -big, -big]], dtype=dt)})


@pytest.mark.parametrize("vectorize", [True, False])
def test_overflow_in_subscript_arithmetic(vectorize):
    # i * 2^62 overflows int64 for i >= 2 before the division brings it back in range
    src = K("L^{4}_{i=0} [ Y^{f32,g}_{i} = A^{f32,g}_{(i*4611686018427387904)//4611686018427387904}; ];",
            "A: f32[4]) -> (Y: f32[4]")
    cf = check_text(src)
    if not cf.ok:
        pytest.skip("the checker rejects this subscript (its bounds proof accounts for int64 range)")
    with pytest.raises(InterpError, match=r"^signed integer overflow"):
        Interpreter(cf.results[0], vectorize=vectorize).run({"A": np.zeros(4, np.float32)})


@pytest.mark.parametrize("vectorize", [True, False])
def test_overflow_in_data_dependent_subscript(vectorize):
    # L*2^62 wraps in int64 for L = 2 (to -2^63) and the division would bring it "back"
    src = K("L^{4}_{i=0} [ Y^{f32,g}_{i} = A^{f32,g}_{(L^{i64,g}_{i}*4611686018427387904)//4611686018427387904}; ];",
            "A: f32[4], L: i64[4]) -> (Y: f32[4]")
    it = Interpreter(check_source(src), vectorize=vectorize)
    A = np.arange(4, dtype=np.float32)
    assert it.run({"A": A, "L": np.array([0, 1, 1, 0])})["Y"].tolist() == [0, 1, 1, 0]
    with pytest.raises(InterpError, match=r"^signed integer overflow: L\^\{i64,g\}_\{i\}\*4611686018427387904 in i64 "
                                          r"with operand\(s\) 2, 4611686018427387904 .*\(at i=2\)"):
        it.run({"A": A, "L": np.array([0, 1, 2, 3])})
