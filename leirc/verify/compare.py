"""Output comparison under the leirc correctness rule (shared/notes/benchmarking.md §2.3).

Floats, with an arithmetic bound ``E`` (:mod:`leirc.verify.bound`: a bound on the rounding
error of each output element, from the program's reductions and operations):
``|y - ref| <= rtol*|ref| + LAMBDA*(E + tiny)`` elementwise (tiny: the dtype's smallest
normal number, for results that underflow) **and**
``||y - ref||_2 / ||ref||_2 <= max(norm_tol, LAMBDA*||E||_2/||ref||_2)``. The bound is
only evaluated when the check without it (E = 0) fails, since E only widens the tolerance.
Without a bound (explicit ``rtol``/``norm_tol``, or a program the bound does not model), the
flat rule: ``|y - ref| <= atol + rtol*|ref|`` with ``atol = rtol * max|ref|`` and the same
normwise test. Integers and booleans: exact. Default tolerances by dtype: f32 rtol 1e-4 /
norm 1e-5, f64 1e-9 / 1e-12, f16 and bf16 1e-2 / 1e-3.

Non-finite values: with ``nonfinite="fail"`` (the grid distributions, whose inputs are
finite and inside the program's domain) a NaN/Inf in the reference is a failure of the
program for those inputs and one in the candidate alone a failure of the candidate. With
``nonfinite="match"`` (probes with large or special values) the candidate must reproduce
every non-finite reference element exactly -- NaN for NaN, an infinity of the same sign --
and those elements are then excluded from the value comparison. With ``nonfinite="ignore"``
(probes with large finite values: ``logits``, ``mixed``) a non-finite reference element is
the reference's own overflow or underflow (log(exp(x)/s) = -inf where x - log(s) is finite)
and is not compared; a candidate may be more robust than the reference, never less: a
non-finite candidate element where the reference is finite is still a failure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..interp import dtypes as D

TOLERANCES = {"f32": (1e-4, 1e-5), "f64": (1e-9, 1e-12), "f16": (1e-2, 1e-3), "bf16": (1e-2, 1e-3)}
#: safety factor on the arithmetic bound: the reference and the candidate each carry an
#: error of up to about E, and the sqrt(n) reduction term is a probabilistic bound
LAMBDA = 4.0


def tolerances(dtype: str, rtol: Optional[float] = None, norm_tol: Optional[float] = None) -> tuple[float, float]:
    r, n = TOLERANCES.get(dtype, (0.0, 0.0))
    return (r if rtol is None else float(rtol)), (n if norm_tol is None else float(norm_tol))


@dataclass
class OutputComparison:
    name: str
    ok: bool = True
    bitwise: bool = True
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    norm_rel_err: float = 0.0
    unwritten: int = 0
    nonfinite: int = 0
    mismatches: int = 0
    failures: list = field(default_factory=list)


def _fmt_idx(idx) -> str:
    return "(" + ", ".join(str(int(i)) for i in idx) + ")" if len(idx) != 1 else f"({int(idx[0])})"


def _g(x: float) -> str:
    return f"{x:.6g}"


def bitwise_equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Same shape, dtype and bits; any NaN equals any NaN."""
    a = np.asarray(a)
    b = np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind == "f" or D.is_bf16(a.dtype):
        ia = np.ascontiguousarray(a).view(np.dtype(f"u{a.dtype.itemsize}"))
        ib = np.ascontiguousarray(b).view(np.dtype(f"u{b.dtype.itemsize}"))
        ne = (ia != ib).reshape(-1)
        if not ne.any():
            return True
        # only NaN payloads may differ (bf16 has no isnan of its own: widen what is tested)
        fa, fb = a.reshape(-1), b.reshape(-1)
        if a.dtype.kind != "f":
            fa, fb = fa.astype(np.float32), fb.astype(np.float32)
        i = int(ne.argmax())
        if not (np.isnan(fa[i]) and np.isnan(fb[i])):
            return False  # the usual unequal case, decided by the first difference
        return bool(np.all(~ne | (np.isnan(fa) & np.isnan(fb))))
    return bool(np.array_equal(a, b))


def compare_output(name: str, y, ref, dtype: str, *, unwritten: Optional[np.ndarray] = None,
                   ref_unwritten: Optional[np.ndarray] = None, rtol: Optional[float] = None,
                   norm_tol: Optional[float] = None, where: str = "", bound=None,
                   nonfinite: str = "fail") -> OutputComparison:
    """Compare candidate output ``y`` with reference ``ref`` (both of LEIR dtype ``dtype``).
    ``unwritten`` marks candidate elements still holding the poison, ``ref_unwritten`` the
    reference's. ``where`` is appended to messages (e.g. "seed 0, uniform"). ``bound`` is
    the arithmetic error bound of each element (an array of ``ref``'s shape, or a callable
    returning one, called only when needed); None selects the flat rule. ``nonfinite`` is
    "fail", "match" or "ignore" (see the module docstring)."""
    c = OutputComparison(name)
    sfx = f" ({where})" if where else ""
    y = np.asarray(y)
    ref = np.asarray(ref)
    want_dt = D.np_dtype(dtype)
    if y.shape != ref.shape:
        c.ok = c.bitwise = False
        c.failures.append(f"output {name}: shape {list(y.shape)}, expected {list(ref.shape)}{sfx}")
        c.max_abs_err = c.max_rel_err = c.norm_rel_err = math.inf
        return c
    if y.dtype != want_dt:
        c.ok = c.bitwise = False
        c.failures.append(f"output {name}: dtype {D.leir_dtype(y.dtype) or y.dtype}, expected {dtype}{sfx}")
        c.max_abs_err = c.max_rel_err = c.norm_rel_err = math.inf
        return c
    c.bitwise = bitwise_equal(y, ref)
    n = y.size
    shape = y.shape
    # work on flat views; positions are reported in the output's shape
    y = y.reshape(-1)
    ref = ref.reshape(-1)
    if unwritten is not None:
        unwritten = np.asarray(unwritten).reshape(-1)
    if ref_unwritten is not None:
        ref_unwritten = np.asarray(ref_unwritten).reshape(-1)

    def pos(flat_i) -> str:
        return _fmt_idx(np.unravel_index(int(flat_i), shape))
    skip = None  # elements excluded from the value comparison

    def add_skip(m):
        nonlocal skip
        skip = m.copy() if skip is None else (skip | m)

    if ref_unwritten is not None and ref_unwritten.any():
        k = int(ref_unwritten.sum())
        c.ok = False
        c.failures.append(f"output {name}: the reference program leaves {k} of {n} elements unwritten{sfx}")
        add_skip(ref_unwritten)
    if unwritten is not None and unwritten.any():
        m = unwritten if skip is None else (unwritten & ~skip)
        k = int(m.sum())
        if k:
            first = int(np.flatnonzero(m)[0])
            c.ok = False
            c.unwritten = k
            c.failures.append(f"output {name}: {k} of {n} elements never written (first at {pos(first)}){sfx}")
        add_skip(unwritten)
    is_float = D.is_float(dtype)
    if c.bitwise and skip is None and (not is_float or np.isfinite(ref).all()):
        return c  # identical and finite: all errors are 0
    if is_float:
        y_fin = np.isfinite(y)
        r_fin = np.isfinite(ref)
        if not (y_fin.all() and r_fin.all()):
            y_bad = ~y_fin
            r_bad = ~r_fin
            if skip is not None:
                y_bad &= ~skip
                r_bad &= ~skip
            if r_bad.any() and nonfinite == "ignore":
                pass  # the reference overflowed: no finite value to hold the candidate to
            elif r_bad.any() and nonfinite == "match":
                same = (np.isnan(y) & np.isnan(ref)) | (np.isinf(y) & np.isinf(ref) & (np.sign(y) == np.sign(ref)))
                wrong = r_bad & ~same
                if wrong.any():
                    k = int(wrong.sum())
                    first = int(np.flatnonzero(wrong)[0])
                    c.ok = False
                    c.nonfinite = k
                    c.failures.append(f"output {name}: {k} of {n} non-finite reference elements not reproduced "
                                      f"(first at {pos(first)}: {y[first]} vs {ref[first]}; NaN must give NaN, "
                                      f"an infinity the same infinity){sfx}")
            elif r_bad.any():
                both = y_bad & r_bad
                k = int(r_bad.sum())
                c.ok = False
                c.failures.append(f"output {name}: the reference has NaN/Inf at {k} of {n} elements "
                                  f"({int(both.sum())} of them NaN/Inf in the candidate too): the program produces "
                                  f"non-finite values for these inputs{sfx}")
            only = y_bad & ~r_bad
            if only.any():
                k = int(only.sum())
                first = int(np.flatnonzero(only)[0])
                c.ok = False
                c.nonfinite = k
                c.failures.append(f"output {name}: NaN/Inf at {k} of {n} elements (first at {pos(first)}: "
                                  f"{y[first]} vs {ref[first]}){sfx}")
            add_skip(y_bad | r_bad)
    if skip is not None and skip.all():
        if n:
            c.max_abs_err = c.max_rel_err = c.norm_rel_err = math.inf if not c.ok else 0.0
        return c
    if not is_float:
        # integers compare exactly (a float64 difference would round above 2**53)
        _int_check(c, name, y, ref, skip, n, pos, sfx)
        return c
    df = _Diff(y, ref, skip)
    st = df.stats()
    c.max_abs_err, c.max_rel_err, c.norm_rel_err = st.max_d, st.max_rel, st.norm_rel
    r, nt = tolerances(dtype, rtol, norm_tol)
    if bound is not None:
        _arith_check(c, name, y, ref, df, st, r, nt, bound, pos, sfx)
        return c
    atol = r * st.max_ra
    k, worst, d_w = df.violations(df.ra * r + atol)
    if k:
        c.ok = False
        c.mismatches = k
        tol_w = atol + r * abs(float(ref[worst]))
        c.failures.append(f"output {name}: mismatch at {pos(worst)}: {_g(float(y[worst]))} vs "
                          f"{_g(float(ref[worst]))} (|diff| {_g(d_w)} > tol {_g(tol_w)}); "
                          f"{k} of {n} elements outside rtol={r:g}, atol={_g(atol)}{sfx}")
    if c.norm_rel_err > nt:
        c.ok = False
        c.failures.append(f"output {name}: normwise relative error {_g(c.norm_rel_err)} > {nt:g}{sfx}")
    return c


@dataclass
class _Stats:
    max_d: float
    max_ra: float
    max_rel: float
    norm_d: float
    norm_ref: float

    @property
    def norm_rel(self) -> float:
        if self.norm_ref > 0:
            return self.norm_d / self.norm_ref
        return 0.0 if self.norm_d == 0 else math.inf


def _work_dtype(dt: np.dtype) -> np.dtype:
    """Differences are taken in float32 for f32 and narrower outputs (a difference of two
    f16/bf16 values is exact there; of two f32 values it is within 2**-24 of itself, far
    below any tolerance), float64 otherwise: half the memory traffic of widening every
    output to float64, which dominated the comparison of large outputs."""
    return np.dtype(np.float64) if np.dtype(dt).itemsize > 4 else np.dtype(np.float32)


class _Diff:
    """``d = |y - ref|`` and ``ra = |ref|`` of flat outputs in the work dtype, excluded
    elements zeroed."""

    def __init__(self, y, ref, skip):
        self.skip = skip
        wt = _work_dtype(y.dtype) if y.dtype.kind == "f" or y.dtype.itemsize <= 2 else np.dtype(np.float64)
        self.ra = ref.astype(wt)
        with np.errstate(invalid="ignore", over="ignore"):  # inf - inf at matched non-finite elements
            self.d = y.astype(wt)
            np.subtract(self.d, self.ra, out=self.d)
        np.abs(self.d, out=self.d)
        np.abs(self.ra, out=self.ra)
        if skip is not None:
            self.d[skip] = 0
            self.ra[skip] = 0

    def stats(self) -> _Stats:
        d, ra = self.d, self.ra
        if d.size == 0:
            return _Stats(0.0, 0.0, 0.0, 0.0, 0.0)
        max_d, max_ra = float(d.max()), float(ra.max())
        pos = ra > 0
        if bool(np.any(d[~pos] > 0)) if not pos.all() else False:
            max_rel = math.inf  # an error where the reference is exactly 0
        else:
            with np.errstate(over="ignore"):
                max_rel = float(np.divide(d, ra, out=np.zeros_like(d), where=pos).max())
        # sums of squares accumulated in float64 without float64 copies (squares of large
        # float32 values would overflow in float32)
        sd = float(np.einsum("i,i->", d, d, dtype=np.float64, casting="safe"))
        sr = float(np.einsum("i,i->", ra, ra, dtype=np.float64, casting="safe"))
        return _Stats(max_d, max_ra, max_rel, math.sqrt(sd), math.sqrt(sr))

    def violations(self, tol) -> tuple[int, int, float]:
        """Elements with ``d > tol``: (count, flat index of the largest excess, its d)."""
        with np.errstate(invalid="ignore"):
            excess = self.d - tol
        bad = excess > 0
        k = int(np.count_nonzero(bad))
        if not k:
            return 0, -1, 0.0
        i = int(np.argmax(excess))
        return k, i, float(self.d[i])


def _int_check(c: OutputComparison, name, y, ref, skip, n, pos, sfx) -> None:
    bad = y != ref
    if skip is not None:
        bad &= ~skip
    if bad.any():
        k = int(bad.sum())
        first = int(np.flatnonzero(bad)[0])
        c.ok = False
        c.mismatches = k
        c.failures.append(f"output {name}: {k} of {n} elements differ; first at {pos(first)}: "
                          f"{y[first]} vs {ref[first]} (integer outputs must match exactly){sfx}")
    # the error figures are for the report; a float64 difference is exact enough there
    st = _Diff(y, ref, skip).stats()
    c.max_abs_err, c.max_rel_err, c.norm_rel_err = st.max_d, st.max_rel, st.norm_rel


def _tiny(dt) -> float:
    try:
        return float(np.finfo(dt).tiny)
    except (TypeError, ValueError):  # bf16 without finfo support
        return 2.0**-126


def _arith_check(c: OutputComparison, name, y, ref, df: _Diff, st: _Stats, r, nt, bound, pos, sfx) -> None:
    """The arithmetic rule (module docstring) on the flat outputs' differences ``df``."""
    n = y.size
    nref = st.norm_ref
    # underflow: a result in the subnormal range carries an absolute error of up to the
    # smallest normal number (a candidate may flush subnormals to zero)
    floor = LAMBDA * _tiny(y.dtype)
    tol = df.ra * r + floor
    k, worst, d_w = df.violations(tol)
    nt_eff = nt
    if k or c.norm_rel_err > nt:
        e = bound() if callable(bound) else bound
        e = np.asarray(e, dtype=np.float64).reshape(-1)
        if df.skip is not None:
            e = np.where(df.skip, 0.0, e)
        fin = np.isfinite(e)
        e = np.where(fin, e, 0.0)
        # an undefined bound (e.g. a division by an exact 0) falls back to the flat rule at
        # that element
        flat = r * st.max_ra
        tol = tol + np.where(fin, LAMBDA * e, flat)
        k, worst, d_w = df.violations(tol)
        # not np.dot: a BLAS call leaves OpenBLAS's threads spinning for ~0.15 s, which halved
        # the speed of the timing that follows a verification on 2 cores
        ne = math.sqrt(float(np.einsum("i,i->", e, e)))
        if nref > 0:
            nt_eff = max(nt, LAMBDA * ne / nref)
    if k:
        c.ok = False
        c.mismatches = k
        c.failures.append(f"output {name}: mismatch at {pos(worst)}: {_g(float(y[worst]))} vs "
                          f"{_g(float(ref[worst]))} (|diff| {_g(d_w)} > tol {_g(float(tol[worst]))}); "
                          f"{k} of {n} elements outside rtol={r:g} + {LAMBDA:g} x the arithmetic error bound{sfx}")
    if c.norm_rel_err > nt_eff:
        c.ok = False
        extra = f" and > {_g(nt_eff)} (the arithmetic bound)" if nt_eff > nt else ""
        c.failures.append(f"output {name}: normwise relative error {_g(c.norm_rel_err)} > {nt:g}{extra}{sfx}")
