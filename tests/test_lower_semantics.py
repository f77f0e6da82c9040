"""Compiled semantics equal the interpreter's where IEEE / integer corner cases decide.

* ``max``/``min`` (calls and reductions, scalar and vectorized) propagate NaN on float
  dtypes like ``np.maximum``/``torch.maximum``; integers keep plain max/min.
* Comparisons follow IEEE 754: every ordered comparison with a NaN is false, ``!=`` true.
* Unsigned arithmetic wraps modulo 2**n (TVM's LLVM backend marks u32/u64 ``+ - *``
  ``nuw``, which lets LLVM fold ``(x*4)//4`` to ``x`` and ``x+1 < x`` to false).
* ``build(..., poison_intermediates=True)`` fills intermediates with a poison value so
  that reads of never-written elements show in the outputs.

Kernels are built for llvm and run in-process; CUDA source is checked with nvcc when
present.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from leirc.interp import dtypes as D
from leirc.interp import run_source
from leirc.lang.checker import check_text
from leirc.lower import NvccNotFound, build, nvcc_compile

NAN = np.float32(np.nan)


def _result(src: str):
    cf = check_text(src, "<test>")
    errs = [d for d in cf.diagnostics if d.is_error]
    assert not errs, "\n".join(f"{d.code} {d.message}" for d in errs)
    assert len(cf.results) == 1
    return cf.results[0]


def compiled(src: str, inputs: dict, **kw) -> dict:
    return build(_result(src), "llvm", **kw).run(inputs)


def both(src: str, inputs: dict) -> tuple[dict, dict]:
    """(compiled outputs, interpreter outputs)."""
    return compiled(src, inputs), run_source(src, inputs)


def same(a, b):
    """Equal values, NaN where the other has NaN (bitwise payloads may differ)."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
    if a.dtype.kind == "f" or a.dtype.name == "bfloat16":
        fa, fb = a.astype(np.float64), b.astype(np.float64)
        assert np.array_equal(np.isnan(fa), np.isnan(fb)), f"NaN positions differ:\n{a}\n{b}"
        m = ~np.isnan(fa)
        assert np.array_equal(fa[m], fb[m]), f"values differ:\n{a}\n{b}"
    else:
        assert np.array_equal(a, b), f"values differ:\n{a}\n{b}"


def cuda_source(src: str) -> str:
    b = build(_result(src), "cuda")
    try:
        ok, log = nvcc_compile(b.cuda_source)
    except NvccNotFound:
        ok, log = True, ""
    assert ok, log
    return b.cuda_source


# ---------------------------------------------------------------------------
# NaN in max / min


X16 = np.array([np.nan, -1, 0, 2, np.inf, -np.inf, np.nan, 3, -0.5, 7, np.nan, 1, -2, 5, 4, np.nan], np.float32)


@pytest.mark.parametrize("kind", ["L", "V"])
def test_relu_like_max_propagates_nan(kind):
    # an imported ReLU is max(x, 0): torch.relu(nan) is nan
    src = rf"""\kernel relu(X: f32[16]) -> (Y: f32[16]) {{
      {kind}^{{16}}_{{i=0}} [ Y^{{f32,g}}_{{i}} = max(X^{{f32,g}}_{{i}}, 0.0); ];
    }}"""
    got, ref = both(src, {"X": X16})
    same(got["Y"], np.maximum(X16, np.float32(0)))
    same(got["Y"], ref["Y"])
    assert np.isnan(got["Y"][[0, 6, 10, 15]]).all()


@pytest.mark.parametrize("kind", ["L", "V"])
def test_max_min_of_two_tensors_nan_on_either_side(kind):
    a = np.array([np.nan, 1, np.nan, -3, 0, np.inf, -np.inf, 2] * 2, np.float32)
    b = np.array([1, np.nan, np.nan, 4, -0.0, np.nan, 5, -2] * 2, np.float32)
    src = rf"""\kernel k(A: f32[16], B: f32[16]) -> (M: f32[16], N: f32[16], Q: f32[16], R: f32[16]) {{
      {kind}^{{16}}_{{i=0}} [
        M^{{f32,g}}_{{i}} = max(A^{{f32,g}}_{{i}}, B^{{f32,g}}_{{i}});
        N^{{f32,g}}_{{i}} = min(A^{{f32,g}}_{{i}}, B^{{f32,g}}_{{i}});
        Q^{{f32,g}}_{{i}} = max(B^{{f32,g}}_{{i}}, A^{{f32,g}}_{{i}}, 1.5);
        R^{{f32,g}}_{{i}} = min(exp(A^{{f32,g}}_{{i}}), B^{{f32,g}}_{{i}} * 2.0 + 1.0);
      ];
    }}"""
    got, ref = both(src, {"A": a, "B": b})
    with np.errstate(invalid="ignore", over="ignore"):
        same(got["M"], np.maximum(a, b))
        same(got["N"], np.minimum(a, b))
        same(got["Q"], np.maximum(np.maximum(b, a), np.float32(1.5)))
        same(got["R"], np.minimum(np.exp(a), b * np.float32(2) + np.float32(1)))
    for k in "MNQR":
        same(got[k], ref[k])


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("layout", ["rows", "vector_columns"])
def test_reduction_with_one_nan_is_nan(op, layout):
    a = np.arange(6 * 16, dtype=np.float32).reshape(6, 16) - 40
    a[1, 0] = np.nan  # first element: the identity meets NaN
    a[3, 9] = np.nan  # middle of a row
    a[5, 15] = np.nan  # last element
    if layout == "rows":
        src = rf"""\kernel k(A: f32[6, 16]) -> (X: f32[6]) {{
          L^{{6}}_{{i=0}} L^{{16}}_{{j=0}} [ X^{{f32,g}}_{{i}} = {op}(X^{{f32,g}}_{{i}}, A^{{f32,g}}_{{i,j}}); ];
        }}"""
        ref_np = (np.max if op == "max" else np.min)(a, axis=1)
    else:  # reduce over rows, columns in a vector loop: the accumulator is a vector
        src = rf"""\kernel k(A: f32[6, 16]) -> (X: f32[16]) {{
          L^{{6}}_{{i=0}} V^{{16}}_{{j=0}} [ X^{{f32,g}}_{{j}} = {op}(X^{{f32,g}}_{{j}}, A^{{f32,g}}_{{i,j}}); ];
        }}"""
        ref_np = (np.max if op == "max" else np.min)(a, axis=0)
    got, ref = both(src, {"A": a})
    same(got["X"], ref_np)
    same(got["X"], ref["X"])
    assert np.isnan(got["X"]).sum() == 3


@pytest.mark.parametrize("dt,np_dt", [("f64", np.float64), ("f16", np.float16)])
def test_nan_max_other_float_dtypes(dt, np_dt):
    src = rf"""\kernel k(A: {dt}[8], B: {dt}[8]) -> (M: {dt}[8], N: {dt}[8]) {{
      V^{{8}}_{{i=0}} [ M^{{{dt},g}}_{{i}} = max(A^{{{dt},g}}_{{i}}, B^{{{dt},g}}_{{i}});
                      N^{{{dt},g}}_{{i}} = min(A^{{{dt},g}}_{{i}}, 0.0); ];
    }}"""
    a = np.array([np.nan, 1, 2, -3, np.nan, 0, 5, -1], np_dt)
    b = np.array([0, np.nan, 1, -4, np.nan, 1, 6, -2], np_dt)
    got, ref = both(src, {"A": a, "B": b})
    same(got["M"], np.maximum(a, b))
    same(got["N"], np.minimum(a, np_dt(0)))
    same(got["M"], ref["M"])
    same(got["N"], ref["N"])


def test_integer_and_bool_max_min_stay_plain():
    src = r"""\kernel k(A: i32[8], B: i32[8], P: bool[8], Q: bool[8]) -> (M: i32[8], N: i32[8], O: bool[8], R: bool[8]) {
      V^{8}_{i=0} [ M^{i32,g}_{i} = max(A^{i32,g}_{i}, B^{i32,g}_{i}); N^{i32,g}_{i} = min(A^{i32,g}_{i}, 3);
                    O^{bool,g}_{i} = max(P^{bool,g}_{i}, Q^{bool,g}_{i}); R^{bool,g}_{i} = min(P^{bool,g}_{i}, Q^{bool,g}_{i}); ];
    }"""
    a = np.array([1, -5, 7, 0, 3, 9, -2, 4], np.int32)
    b = np.array([2, -6, 7, 1, -3, 8, 0, 4], np.int32)
    p = np.array([1, 0, 1, 0, 1, 1, 0, 0], bool)
    q = np.array([1, 1, 0, 0, 0, 1, 0, 1], bool)
    b_ = build(_result(src), "llvm")
    got = b_.run({"A": a, "B": b, "P": p, "Q": q})
    assert got["M"].tolist() == np.maximum(a, b).tolist()
    assert got["N"].tolist() == np.minimum(a, 3).tolist()
    assert got["O"].tolist() == (p | q).tolist()
    assert got["R"].tolist() == (p & q).tolist()
    assert "isnan" not in b_.tir_text  # integers do not pay for NaN handling


def test_maxpool_style_padding_with_nan_input():
    # -inf padding and a NaN input (the additive_split case of the issue): the window
    # holding the NaN is NaN, the others ignore the padding
    src = r"""\kernel mp(X: f32[6]) -> (C: f32[5]) {
      L^{8}_{h=0} [ Pd^{f32,g}_{h} = if_then_else(1 <= h < 7, X^{f32,g}_{h-1}, -inf); ];
      L^{5}_{i=0} L^{4}_{p=0} [ C^{f32,g}_{i} = max(C^{f32,g}_{i}, Pd^{f32,g}_{i+p}); ];
    }"""
    x = np.array([1, 2, np.nan, 0, -1, -3], np.float32)
    got, ref = both(src, {"X": x})
    pd = np.concatenate([[-np.inf], x, [-np.inf]]).astype(np.float32)
    same(got["C"], np.array([np.max(pd[i:i + 4]) for i in range(5)], np.float32))
    same(got["C"], ref["C"])


# ---------------------------------------------------------------------------
# comparisons


@pytest.mark.parametrize("kind", ["L", "V"])
def test_comparisons_with_nan_follow_ieee(kind):
    a = np.array([np.nan, 1, np.nan, 2, 3, -np.inf, np.inf, 0] * 2, np.float32)
    b = np.array([1, np.nan, np.nan, 2, 1, -np.inf, 5, -0.0] * 2, np.float32)
    ops = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
    outs = ", ".join(f"{k.upper()}: f32[16]" for k in ops)
    body = "\n".join(
        f"{k.upper()}^{{f32,g}}_{{i}} = if_then_else(A^{{f32,g}}_{{i}} {o} B^{{f32,g}}_{{i}}, 1.0, 0.0);"
        for k, o in ops.items())
    src = rf"""\kernel k(A: f32[16], B: f32[16]) -> ({outs}, C: bool[16], D: bool[16]) {{
      {kind}^{{16}}_{{i=0}} [ {body}
        C^{{bool,g}}_{{i}} = A^{{f32,g}}_{{i}} != B^{{f32,g}}_{{i}};
        D^{{bool,g}}_{{i}} = A^{{f32,g}}_{{i}} < B^{{f32,g}}_{{i}} < 10.0; ];
    }}"""
    got, ref = both(src, {"A": a, "B": b})
    with np.errstate(invalid="ignore"):
        expect = {"lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b, "eq": a == b, "ne": a != b}
    for k, e in expect.items():
        same(got[k.upper()], e.astype(np.float32))
        same(got[k.upper()], ref[k.upper()])
    assert got["C"].tolist() == (a != b).tolist()
    assert got["D"].tolist() == ((a < b) & (b < 10)).tolist()
    same(got["C"], ref["C"])
    same(got["D"], ref["D"])


def test_nan_not_equal_itself():
    src = r"""\kernel k(A: f32[4]) -> (C: bool[4], E: bool[4]) {
      L^{4}_{i=0} [ C^{bool,g}_{i} = A^{f32,g}_{i} != A^{f32,g}_{i}; E^{bool,g}_{i} = A^{f32,g}_{i} == A^{f32,g}_{i}; ];
    }"""
    a = np.array([np.nan, 1, np.inf, np.nan], np.float32)
    got, ref = both(src, {"A": a})
    assert got["C"].tolist() == [True, False, False, True]
    assert got["E"].tolist() == [False, True, True, False]
    same(got["C"], ref["C"])
    same(got["E"], ref["E"])


@pytest.mark.parametrize("dt,np_dt", [("f32", np.float32), ("f16", np.float16)])
def test_simplifier_does_not_cancel_nan_or_inf(dt, np_dt):
    # TVM's simplifier folds float x - x and x * 0 to 0, (x + y) - y to x, 0 / x to 0
    src = r"""\kernel k(A: f32[4], B: f32[4]) -> (Z: f32[4], W: f32[4], E: f32[4], F: f32[4], G: f32[4], H: f32[4], I: f32[4], J: f32[4], K: f32[4]) {
      V^{4}_{i=0} [ Z^{f32,g}_{i} = A^{f32,g}_{i} - A^{f32,g}_{i}; W^{f32,g}_{i} = A^{f32,g}_{i} * 0.0;
        E^{f32,g}_{i} = exp(A^{f32,g}_{i} - A^{f32,g}_{i}); F^{f32,g}_{i} = (A^{f32,g}_{i} + B^{f32,g}_{i}) - B^{f32,g}_{i};
        G^{f32,g}_{i} = 0.0 * A^{f32,g}_{i}; H^{f32,g}_{i} = A^{f32,g}_{i} + -A^{f32,g}_{i};
        I^{f32,g}_{i} = A^{f32,g}_{i} / A^{f32,g}_{i}; J^{f32,g}_{i} = 0.0 / A^{f32,g}_{i}; K^{f32,g}_{i} = A^{f32,g}_{i} * -0.0 + 1.0; ];
    }""".replace("f32", dt)
    a = np.array([np.nan, np.inf, 1, 0], np_dt)
    b = np.array([np.inf, 1, np.nan, -np.inf], np_dt)
    with np.errstate(all="ignore"):
        got, ref = both(src, {"A": a, "B": b})
        expect = {"Z": a - a, "W": a * np_dt(0), "E": np.exp(a - a), "F": (a + b) - b, "G": np_dt(0) * a,
                  "H": a + -a, "I": a / a, "J": np_dt(0) / a, "K": a * np_dt(-0.0) + np_dt(1)}
    for k, e in expect.items():
        same(got[k], e.astype(np_dt))
        same(got[k], ref[k])
    cuda_source(src)  # the guarded forms are valid CUDA too


def test_nan_max_bf16():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf = ml_dtypes.bfloat16
    src = r"""\kernel k(A: bf16[8], B: bf16[8]) -> (M: bf16[8], N: bf16[8], C: bool[8]) {
      V^{8}_{i=0} [ M^{bf16,g}_{i} = max(A^{bf16,g}_{i}, B^{bf16,g}_{i}); N^{bf16,g}_{i} = min(A^{bf16,g}_{i}, 0.0);
                    C^{bool,g}_{i} = A^{bf16,g}_{i} != B^{bf16,g}_{i}; ];
    }"""
    a = np.array([np.nan, 1, 2, -3, np.nan, 0, 5, -1], bf)
    b = np.array([0, np.nan, 2, -4, np.nan, 1, 6, -2], bf)
    got, ref = both(src, {"A": a, "B": b})
    fa, fb = a.astype(np.float32), b.astype(np.float32)
    same(got["M"], np.maximum(fa, fb).astype(bf))
    same(got["N"], np.minimum(fa, np.float32(0)).astype(bf))
    assert got["C"].tolist() == (fa != fb).tolist()
    for k in "MNC":
        same(got[k], ref[k])


# ---------------------------------------------------------------------------
# CUDA


def test_cuda_max_min_propagate_nan_and_ne_is_unordered():
    src = cuda_source(r"""\kernel k(A: f32[64], B: f32[64], H: f16[64]) -> (M: f32[64], N: f32[64], C: bool[64], W: f16[64], S: f32[]) {
      B^{64}_{tx=0} [ M^{f32,g}_{tx} = max(A^{f32,g}_{tx}, 0.0); N^{f32,g}_{tx} = min(A^{f32,g}_{tx}, B^{f32,g}_{tx});
                      C^{bool,g}_{tx} = A^{f32,g}_{tx} != B^{f32,g}_{tx}; W^{f16,g}_{tx} = max(0.0, H^{f16,g}_{tx}); ];
      L^{64}_{i=0} [ S^{f32,g} = min(S^{f32,g}, A^{f32,g}_{i}); ];
    }""")
    # CUDA's max/min/fmaxf/fminf return the non-NaN operand: none of them may appear.
    # max(x, y) is isnan(y) ? y : (y > x ? y : x), isnan(y) is y != y' with y' the same
    # bits behind a bit cast (C's != is unordered; nvcc keeps it as setp.nan also under
    # TVM's --use_fast_math)
    body = src[src.index('extern "C" __global__'):]  # (TVM's preamble defines half max/min)
    assert not re.search(r"\b(fmaxf?|fminf?|max|min)\s*\(", body), body
    nan_test = " != (*(float *)(&("
    assert body.count(f"B_ptr[((int)threadIdx.x)]{nan_test}") == 2  # min(A, B), A != B
    assert body.count(f"A_ptr[((int)threadIdx.x)]{nan_test}") == 1  # A != B (max(A, 0) needs none)
    assert f"((float)H_ptr[((int)threadIdx.x)]){nan_test}" in body
    assert f"A_ptr[i]{nan_test}" in body  # the element entering the min-reduction


def test_nan_max_stays_vectorized():
    src = r"""\kernel k(A: f32[8, 64], B: f32[8, 64]) -> (R: f32[8, 64], S: f32[8, 64]) {
      L^{8}_{i=0} V^{64}_{j=0} [ R^{f32,g}_{i,j} = min(A^{f32,g}_{i,j} * 3.0, B^{f32,g}_{i,j} + 1.0);
                                 S^{f32,g}_{i,j} = max(A^{f32,g}_{i,j}, 0.0); ];
    }"""
    ll = build(_result(src), "llvm").module.mod.inspect_source("ll")
    assert "<64 x float>" in ll  # TVM vectorized the loop (isnan is marked vectorizable)
    cu = cuda_source(src.replace("64", "4"))
    assert "float4" in cu[cu.index('extern "C" __global__'):]


# ---------------------------------------------------------------------------
# unsigned wrap-around


U8_A = np.array([200, 255, 0, 1, 128, 100, 17, 3], np.uint8)
U8_B = np.array([100, 1, 1, 255, 2, 200, 17, 250], np.uint8)


@pytest.mark.parametrize("kind", ["L", "V"])
def test_u8_arithmetic_wraps(kind):
    src = rf"""\kernel k(A: u8[8], B: u8[8]) -> (S: u8[8], M: u8[8], D: u8[8], H: u8[8], G: bool[8]) {{
      {kind}^{{8}}_{{i=0}} [ S^{{u8,g}}_{{i}} = A^{{u8,g}}_{{i}} + B^{{u8,g}}_{{i}}; M^{{u8,g}}_{{i}} = A^{{u8,g}}_{{i}} * B^{{u8,g}}_{{i}};
        D^{{u8,g}}_{{i}} = A^{{u8,g}}_{{i}} - B^{{u8,g}}_{{i}}; H^{{u8,g}}_{{i}} = (A^{{u8,g}}_{{i}} * 2) // 2;
        G^{{bool,g}}_{{i}} = A^{{u8,g}}_{{i}} + 1 < A^{{u8,g}}_{{i}}; ];
    }}"""
    got, ref = both(src, {"A": U8_A, "B": U8_B})
    a, b = U8_A, U8_B
    assert got["S"].tolist() == (a + b).tolist()
    assert got["M"].tolist() == (a * b).tolist()
    assert got["D"].tolist() == (a - b).tolist()
    assert got["H"].tolist() == ((a * np.uint8(2)) // np.uint8(2)).tolist()
    assert got["G"].tolist() == ((a + np.uint8(1)) < a).tolist()
    for k in "SMDHG":
        same(got[k], ref[k])


@pytest.mark.parametrize("dt,np_dt", [("u16", np.uint16), ("u32", np.uint32), ("u64", np.uint64)])
@pytest.mark.parametrize("kind", ["L", "V"])
def test_wide_unsigned_arithmetic_wraps(dt, np_dt, kind):
    bits = np.dtype(np_dt).itemsize * 8
    top = 2**bits - 1
    a = np.array([2**(bits - 1), top, 5, 2**(bits // 2), 3, 0, top - 6, 12345], np_dt)
    b = np.array([2, top, 7, 2**(bits // 2) + 1, 3, 1, 9, top // 3], np_dt)
    src = rf"""\kernel k(A: {dt}[8], B: {dt}[8]) -> (S: {dt}[8], M: {dt}[8], D: {dt}[8], W: {dt}[8], G: bool[8], Q: {dt}[8], N: {dt}[8]) {{
      {kind}^{{8}}_{{i=0}} [
        S^{{{dt},g}}_{{i}} = A^{{{dt},g}}_{{i}} + B^{{{dt},g}}_{{i}};
        M^{{{dt},g}}_{{i}} = A^{{{dt},g}}_{{i}} * B^{{{dt},g}}_{{i}};
        D^{{{dt},g}}_{{i}} = A^{{{dt},g}}_{{i}} - B^{{{dt},g}}_{{i}};
        W^{{{dt},g}}_{{i}} = (A^{{{dt},g}}_{{i}} * 4) // 4;
        G^{{bool,g}}_{{i}} = A^{{{dt},g}}_{{i}} + 1 < A^{{{dt},g}}_{{i}};
        Q^{{{dt},g}}_{{i}} = A^{{{dt},g}}_{{i}}**3 + 7;
        N^{{{dt},g}}_{{i}} = -A^{{{dt},g}}_{{i}}%1000;
      ];
    }}"""
    got, ref = both(src, {"A": a, "B": b})
    with np.errstate(over="ignore"):
        c = lambda v: np_dt(v)  # noqa: E731
        expect = {"S": a + b, "M": a * b, "D": a - b, "W": (a * c(4)) // c(4), "G": (a + c(1)) < a,
                  "Q": a * a * a + c(7), "N": (c(0) - a) % c(1000)}
    for k, e in expect.items():
        assert got[k].tolist() == e.tolist(), k
        same(got[k], ref[k])


def test_unsigned_reduction_wraps():
    src = r"""\kernel k(A: u32[4, 8]) -> (S: u32[4], P: u32[4]) {
      L^{4}_{i=0} L^{8}_{j=0} [ S^{u32,g}_{i} = S^{u32,g}_{i} + A^{u32,g}_{i,j}; ];
      L^{4}_{i=0} L^{8}_{j=0} [ P^{u32,g}_{i} = P^{u32,g}_{i} * A^{u32,g}_{i,j}; ];
    }"""
    a = (np.arange(32, dtype=np.uint64).reshape(4, 8) * 987654321 + 3).astype(np.uint32)
    got, ref = both(src, {"A": a})
    with np.errstate(over="ignore"):
        assert got["S"].tolist() == a.sum(1, dtype=np.uint32).tolist()
        assert got["P"].tolist() == a.prod(1, dtype=np.uint32).tolist()
    same(got["S"], ref["S"])
    same(got["P"], ref["P"])


def test_cuda_unsigned_arithmetic_compiles():
    src = cuda_source(r"""\kernel k(A: u16[32], B: u32[32], C: u64[32]) -> (X: u16[32], Y: u32[32], Z: u64[32]) {
      B^{32}_{tx=0} [ X^{u16,g}_{tx} = A^{u16,g}_{tx} * A^{u16,g}_{tx} - 3; Y^{u32,g}_{tx} = B^{u32,g}_{tx} * B^{u32,g}_{tx} + 1;
                      Z^{u64,g}_{tx} = C^{u64,g}_{tx} * C^{u64,g}_{tx} - C^{u64,g}_{tx}; ];
    }""")
    # u16 * u16 would be computed in (signed) int in C: 65535 * 65535 overflows it
    a = "A_ptr[((int)threadIdx.x)]"
    assert f"((uint){a}) * ((uint){a})" in src, src


# ---------------------------------------------------------------------------
# poisoned intermediates


# T gets the extent 7 from its writes (0, 2, 4, 6); Y reads the odd elements too
HOLES = r"""\kernel holes(A: f32[8]) -> (Y: f32[7]) {
  L^{4}_{i=0} [ T^{f32,g}_{2*i} = A^{f32,g}_{2*i} * 2.0; ];
  L^{7}_{i=0} [ Y^{f32,g}_{i} = T^{f32,g}_{i} + 1.0; ];
}"""


def test_poisoned_intermediate_reads_show_as_nan():
    a = np.arange(8, dtype=np.float32)
    got = compiled(HOLES, {"A": a}, poison_intermediates=True)["Y"]
    assert np.isnan(got[1::2]).all() and len(got[1::2]) == 3
    assert got[0::2].tolist() == (a[0::2] * 2 + 1).tolist()


def test_poison_is_the_interpreters_payload():
    # (an uninitialized small buffer may read as NaN anyway: LLVM folds arithmetic on
    # undefined stack memory to NaN; the exact payload only comes from the fill)
    src = HOLES.replace("T^{f32,g}_{i} + 1.0", "T^{f32,g}_{i}")
    a = np.arange(8, dtype=np.float32)
    got = compiled(src, {"A": a}, poison_intermediates=True)["Y"]
    assert D.poison_mask(got, "f32").tolist() == [False, True, False, True, False, True, False]
    ref = run_source(src, {"A": a})["Y"]  # the interpreter poisons the same way
    assert D.poison_mask(ref, "f32").tolist() == D.poison_mask(got, "f32").tolist()


def test_poison_is_off_by_default_and_recorded():
    b0 = build(_result(HOLES), "llvm")
    b1 = build(_result(HOLES), "llvm", poison_intermediates=True)
    assert not b0.poison_intermediates and b1.poison_intermediates
    assert "reinterpret" not in b0.tir_text and "reinterpret" in b1.tir_text


def test_poisoned_integer_and_multidim_intermediates():
    src = r"""\kernel k(A: i32[3, 4], U: u8[4]) -> (Y: i32[3, 3], Z: u8[3]) {
      L^{3}_{i=0} L^{2}_{j=0} [ T^{i32,g}_{i,2*j} = A^{i32,g}_{i,2*j}; ];
      L^{3}_{i=0} L^{3}_{j=0} [ Y^{i32,g}_{i,j} = T^{i32,g}_{i,j}; ];
      L^{2}_{j=0} [ V^{u8,g}_{2*j} = U^{u8,g}_{2*j}; ];
      L^{3}_{j=0} [ Z^{u8,g}_{j} = V^{u8,g}_{j}; ];
    }"""
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    u = np.array([1, 2, 3, 4], np.uint8)
    got = compiled(src, {"A": a, "U": u}, poison_intermediates=True)
    assert (got["Y"][:, [0, 2]] == a[:, [0, 2]]).all()
    assert (got["Y"][:, 1] == np.iinfo(np.int32).min + 1).all()
    assert got["Z"].tolist() == [1, 254, 3]


def test_poison_fully_written_intermediates_changes_nothing():
    src = r"""\kernel sm(X: f32[4, 16]) -> (Y: f32[4, 16]) {
      L^{4}_{i=0} L^{16}_{j=0} [ Rmax^{f32,g}_{i} = max(Rmax^{f32,g}_{i}, X^{f32,g}_{i,j}); ];
      L^{4}_{i=0} L^{16}_{j=0} [ Rsum^{f32,g}_{i} = Rsum^{f32,g}_{i} + exp(X^{f32,g}_{i,j} - Rmax^{f32,g}_{i}); ];
      P^{4}_{i=0} V^{16}_{j=0} [ Y^{f32,g}_{i,j} = exp(X^{f32,g}_{i,j} - Rmax^{f32,g}_{i})/Rsum^{f32,g}_{i}; ];
    }"""
    x = np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)
    y0 = compiled(src, {"X": x})["Y"]
    y1 = compiled(src, {"X": x}, poison_intermediates=True)["Y"]
    assert np.array_equal(y0, y1)


def test_cuda_poisoned_intermediate_compiles():
    b = build(_result(HOLES), "cuda", poison_intermediates=True)
    try:
        ok, log = nvcc_compile(b.cuda_source)
    except NvccNotFound:
        ok, log = True, ""
    assert ok, log
    # the fill runs on the device (a kernel of its own), never in host code
    assert b.cuda_source.count("__global__") >= 2
