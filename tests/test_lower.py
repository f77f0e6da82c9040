"""Lowering semantics: small kernels covering every construct, built for llvm with real
TVM builds and compared with NumPy references computed here.

Kernels run in-process (``Built.run``); sandboxed execution is tested in
``test_runner.py``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from leirc.lang.checker import check_text
from leirc.lower import LoweringError, build, lower

RNG = np.random.default_rng(1234)


def _result(src: str, kernel: str | None = None):
    cf = check_text(src, "<test>")
    errs = [d for d in cf.diagnostics if d.is_error]
    assert not errs, "\n".join(f"{d.code} {d.message}" for d in errs)
    if kernel is None:
        assert len(cf.results) == 1
        return cf.results[0]
    return next(r for r in cf.results if r.kernel.name == kernel)


def run(src: str, inputs: dict, outputs: dict | None = None, kernel: str | None = None) -> dict:
    return build(_result(src, kernel), "llvm").run(inputs, outputs)


def f32(*shape):
    return RNG.random(shape).astype(np.float32)


def close(a, b, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64), rtol=rtol, atol=atol)


# ---------------------------------------------------------------------------
# loop kinds


@pytest.mark.parametrize("kind,var", [("L", "i"), ("P", "i"), ("V", "i"), ("U", "i"), ("B", "tx"), ("B", "bx"),
                                      ("B", "bza")])
def test_loop_kinds_elementwise(kind, var):
    src = f"""\\kernel k(A: f32[8, 16]) -> (Y: f32[8, 16]) {{
      L^{{8}}_{{r=0}} {kind}^{{16}}_{{{var}=0}} [ Y^{{f32,g}}_{{r,{var}}} = A^{{f32,g}}_{{r,{var}}}*2.0 + 1.0; ];
    }}"""
    a = f32(8, 16)
    close(run(src, {"A": a})["Y"], a * 2 + 1)


def test_loop_kinds_outer_and_nested():
    # P outside, V inside; nested P (inner becomes serial); V inside V (inner serial); B on CPU is serial
    src = r"""\kernel k(A: f32[4, 8, 16]) -> (Y: f32[4, 8, 16], Z: f32[4, 8, 16]) {
      P^{4}_{a=0} P^{8}_{b=0} V^{16}_{c=0} [ Y^{f32,g}_{a,b,c} = A^{f32,g}_{a,b,c} + 1.0; ];
      B^{4}_{bx=0} V^{8}_{b=0} V^{16}_{c=0} [ Z^{f32,g}_{bx,b,c} = A^{f32,g}_{bx,b,c}*A^{f32,g}_{bx,b,c}; ];
    }"""
    a = f32(4, 8, 16)
    out = run(src, {"A": a})
    close(out["Y"], a + 1)
    close(out["Z"], a * a)


def test_unroll_small_and_large():
    # U^{4} is unrolled; U^{512} around a loop exceeds the budget and stays a loop (pragma)
    src = r"""\kernel k(A: f32[512, 64]) -> (Y: f32[512, 64], S: f32[512]) {
      L^{512}_{i=0} U^{4}_{j=0} L^{16}_{k=0} [ Y^{f32,g}_{i,j*16+k} = A^{f32,g}_{i,j*16+k} - 1.0; ];
      U^{512}_{i=0} L^{64}_{k=0} [ S^{f32,g}_{i} = S^{f32,g}_{i} + A^{f32,g}_{i,k}; ];
    }"""
    a = f32(512, 64)
    out = run(src, {"A": a})
    close(out["Y"], a - 1)
    close(out["S"], a.sum(1), rtol=1e-5)


def test_nonzero_start():
    src = r"""\kernel k(A: f32[10]) -> (Y: f32[6], I: i64[6]) {
      L^{6}_{i=2} [ Y^{f32,g}_{i-2} = A^{f32,g}_{i+2} + i; I^{i64,g}_{i-2} = i*10; ];
    }"""
    a = f32(10)
    out = run(src, {"A": a})
    idx = np.arange(2, 8)
    close(out["Y"], a[idx + 2] + idx)
    assert out["I"].tolist() == (idx * 10).tolist()


def test_nonzero_start_vector_parallel_bound():
    src = r"""\kernel k(A: f32[4, 24]) -> (Y: f32[4, 16]) {
      P^{4}_{i=0} V^{8}_{j=8} [ Y^{f32,g}_{i,j-8} = A^{f32,g}_{i,j}; ];
      L^{4}_{i=0} B^{8}_{tx=16} [ Y^{f32,g}_{i,tx-8} = A^{f32,g}_{i,tx} + j0; ];
    }""".replace(" + j0", "")
    a = f32(4, 24)
    out = run(src, {"A": a})
    close(out["Y"][:, :8], a[:, 8:16])
    close(out["Y"][:, 8:], a[:, 16:24])


# ---------------------------------------------------------------------------
# reductions


@pytest.mark.parametrize("op,ref", [
    ("+", lambda a: a.sum(1)),
    ("-", lambda a: -a.sum(1)),
    ("*", lambda a: a.prod(1)),
    ("max", lambda a: a.max(1)),
    ("min", lambda a: a.min(1)),
])
def test_reduction_ops(op, ref):
    body = (f"X^{{f32,g}}_{{i}} = {op}(X^{{f32,g}}_{{i}}, A^{{f32,g}}_{{i,j}})" if op in ("max", "min")
            else f"X^{{f32,g}}_{{i}} = X^{{f32,g}}_{{i}} {op} A^{{f32,g}}_{{i,j}}")
    src = f"""\\kernel k(A: f32[6, 10]) -> (X: f32[6]) {{ L^{{6}}_{{i=0}} L^{{10}}_{{j=0}} [ {body}; ]; }}"""
    a = (RNG.random((6, 10)) * 2 - 1 + (0.5 if op == "*" else 0)).astype(np.float32)
    # poison the output: the init nest must overwrite it
    out = run(src, {"A": a}, {"X": np.full(6, np.nan, np.float32)})
    close(out["X"], ref(a.astype(np.float64)), rtol=1e-5)


def test_max_min_identity_infinities():
    # all inputs -inf/+inf-ish: max with -inf identity returns the input, not 0
    src = r"""\kernel k(A: f32[3, 4]) -> (M: f32[3], N: f32[3]) {
      L^{3}_{i=0} L^{4}_{j=0} [ M^{f32,g}_{i} = max(M^{f32,g}_{i}, A^{f32,g}_{i,j}); ];
      L^{3}_{i=0} L^{4}_{j=0} [ N^{f32,g}_{i} = min(N^{f32,g}_{i}, A^{f32,g}_{i,j}); ];
    }"""
    a = -np.abs(f32(3, 4)) - 5
    out = run(src, {"A": a}, {"M": np.zeros(3, np.float32), "N": np.zeros(3, np.float32)})
    close(out["M"], a.max(1))
    b = np.abs(f32(3, 4)) + 5
    out = run(src, {"A": b}, {"M": np.zeros(3, np.float32), "N": np.zeros(3, np.float32)})
    close(out["N"], b.min(1))


def test_integer_reductions_use_dtype_extremes():
    src = r"""\kernel k(A: i32[5, 7]) -> (M: i32[5], S: i64[5], P: i64[5]) {
      L^{5}_{i=0} L^{7}_{j=0} [ M^{i32,g}_{i} = max(M^{i32,g}_{i}, A^{i32,g}_{i,j}); ];
      L^{5}_{i=0} L^{7}_{j=0} [ S^{i64,g}_{i} = S^{i64,g}_{i} + A^{i32,g}_{i,j}; ];
      L^{5}_{i=0} L^{3}_{j=0} [ P^{i64,g}_{i} = P^{i64,g}_{i} * A^{i32,g}_{i,j}; ];
    }"""
    a = RNG.integers(-1000, -10, size=(5, 7)).astype(np.int32)
    out = run(src, {"A": a})
    assert out["M"].tolist() == a.max(1).tolist()
    assert out["S"].tolist() == a.astype(np.int64).sum(1).tolist()
    assert out["P"].tolist() == a[:, :3].astype(np.int64).prod(1).tolist()


def test_reduction_init_loop_not_innermost():
    # init_loop is the outer 'a' loop: X is initialized once before it, not per a
    src = r"""\kernel k(A: f32[4, 8]) -> (X: f32[8]) {
      L^{4}_{a=0} L^{8}_{i=0} [ X^{f32,g}_{i} = X^{f32,g}_{i} + A^{f32,g}_{a,i}; ];
    }"""
    a = f32(4, 8)
    out = run(src, {"A": a}, {"X": np.full(8, 7.0, np.float32)})
    close(out["X"], a.sum(0))


def test_reduction_non_injective_subscript():
    # X_{i//2}: two spatial iterations accumulate into one element (a guarded init would lose one)
    src = r"""\kernel k(A: f32[3, 8]) -> (X: f32[4]) {
      L^{3}_{a=0} L^{8}_{i=0} [ X^{f32,g}_{i//2} = X^{f32,g}_{i//2} + A^{f32,g}_{a,i}; ];
    }"""
    a = f32(3, 8)
    out = run(src, {"A": a}, {"X": np.full(4, np.nan, np.float32)})
    close(out["X"], a.sum(0).reshape(4, 2).sum(1))


def test_reduction_without_reduction_loop_reads_identity():
    src = r"""\kernel k(A: f32[8]) -> (X: f32[8], M: f32[8]) {
      L^{8}_{i=0} [ X^{f32,g}_{i} = X^{f32,g}_{i} + A^{f32,g}_{i}; M^{f32,g}_{i} = max(M^{f32,g}_{i}, A^{f32,g}_{i} - 9.0); ];
    }"""
    a = f32(8)
    out = run(src, {"A": a}, {"X": np.full(8, 100.0, np.float32), "M": np.full(8, 100.0, np.float32)})
    close(out["X"], a)
    close(out["M"], a - 9)


def test_scalar_reduction_and_scalar_io():
    src = r"""\kernel k(A: f32[16], s: f32[]) -> (Y: f32[], Z: f32[16]) {
      L^{16}_{i=0} [ S^{f32,g} = S^{f32,g} + A^{f32,g}_{i}; ];
      Y^{f32,g} = S^{f32,g}*s^{f32,g};
      L^{16}_{i=0} [ Z^{f32,g}_{i} = A^{f32,g}_{i}/S^{f32,g}; ];
    }"""
    a = f32(16)
    s = np.array(3.0, np.float32)
    out = run(src, {"A": a, "s": s})
    close(out["Y"], a.sum() * 3)
    close(out["Z"], a / a.sum())


def test_cross_thread_reduction_on_cpu():
    # a reduction over a B loop (allowed by the checker) is serial on CPU
    src = r"""\kernel k(A: f32[32]) -> (S: f32[]) {
      B^{32}_{tx=0} [ S^{f32,g} = S^{f32,g} + A^{f32,g}_{tx}; ];
    }"""
    a = f32(32)
    close(run(src, {"A": a})["S"], a.sum())


def test_reduction_inside_parallel_and_vector_loops():
    src = r"""\kernel k(A: f32[8, 16, 32]) -> (X: f32[8, 16]) {
      P^{8}_{i=0} V^{16}_{j=0} L^{32}_{k=0} [ X^{f32,g}_{i,j} = X^{f32,g}_{i,j} + A^{f32,g}_{i,j,k}; ];
    }"""
    a = f32(8, 16, 32)
    close(run(src, {"A": a}, {"X": np.full((8, 16), np.nan, np.float32)})["X"], a.sum(2), rtol=1e-5)


def test_commuted_and_chain_reductions():
    src = r"""\kernel k(A: f32[4, 6], B: f32[4, 6]) -> (X: f32[4], Y: f32[4], Z: f32[4]) {
      L^{4}_{i=0} L^{6}_{j=0} [ X^{f32,g}_{i} = A^{f32,g}_{i,j}*B^{f32,g}_{i,j} + X^{f32,g}_{i}; ];
      L^{4}_{i=0} L^{6}_{j=0} [ Y^{f32,g}_{i} = Y^{f32,g}_{i} + A^{f32,g}_{i,j} - B^{f32,g}_{i,j}; ];
      L^{4}_{i=0} L^{6}_{j=0} [ Z^{f32,g}_{i} = max(A^{f32,g}_{i,j}, Z^{f32,g}_{i}); ];
    }"""
    a, b = f32(4, 6), f32(4, 6)
    out = run(src, {"A": a, "B": b})
    close(out["X"], (a * b).sum(1))
    close(out["Y"], (a - b).sum(1), atol=1e-5)
    close(out["Z"], a.max(1))


# ---------------------------------------------------------------------------
# updates and scans


def test_update_accumulates_into_current_values():
    src = r"""\kernel k(A: f32[4, 5], B: f32[4]) -> (X: f32[4]) {
      L^{4}_{i=0} [ X^{f32,g}_{i} = B^{f32,g}_{i}; ];
      L^{4}_{i=0} L^{5}_{j=0} [ X^{f32,g}_{i} = X^{f32,g}_{i} + A^{f32,g}_{i,j}; ];
    }"""
    a, b = f32(4, 5), f32(4)
    close(run(src, {"A": a, "B": b})["X"], b + a.sum(1))


def test_scan_cumsum_with_guard():
    src = r"""\kernel k(X: f32[3, 50]) -> (Y: f32[3, 50]) {
      L^{3}_{i=0} L^{50}_{j=0} [ Y^{f32,g}_{i,j} = if_then_else(1 <= j, Y^{f32,g}_{i,j-1}, 0.0) + X^{f32,g}_{i,j}; ];
    }"""
    x = f32(3, 50)
    close(run(src, {"X": x})["Y"], np.cumsum(x, 1), rtol=1e-5)


def test_scan_reverse_and_prefix_max():
    src = r"""\kernel k(X: f32[40]) -> (R: f32[40], M: f32[40]) {
      L^{40}_{a=0} [ R^{f32,g}_{39-a} = if_then_else(a >= 1, R^{f32,g}_{40-a}, 0.0) + X^{f32,g}_{39-a}; ];
      L^{40}_{a=0} [ M^{f32,g}_{a} = max(if_then_else(a-1<0, -inf, M^{f32,g}_{a-1}), X^{f32,g}_{a}); ];
    }"""
    x = f32(40) - 0.5
    out = run(src, {"X": x})
    close(out["R"], np.cumsum(x[::-1])[::-1], rtol=1e-5)
    close(out["M"], np.maximum.accumulate(x))


def test_online_softmax_prefix_scan():
    # Step-TP's online_softmax output (reference notation §a.10 example 7), at 4 x 64
    src = r"""\kernel k(A: f32[4, 64]) -> (C: f32[4, 64]) {
    B^{4}_{tx=0}L^{64}_{a=0}[D^{f32,g}_{tx,a}=max(if_then_else(a-1<0,-inf,D^{f32,g}_{tx,a-1}),A^{f32,g}_{tx,a});F^{f32,g}_{tx,a}=if_then_else(a-1<0,1,F^{f32,g}_{tx,a-1})*exp(if_then_else(a-1<0,-inf,D^{f32,g}_{tx,a-1})-D^{f32,g}_{tx,a})+exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx,a});];B^{4}_{tx=0}L^{64}_{a=0}[C^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx,63})/F^{f32,g}_{tx,63};];
    }"""
    a = (f32(4, 64) * 10).astype(np.float32)
    e = np.exp(a - a.max(1, keepdims=True))
    close(run(src, {"A": a})["C"], e / e.sum(1, keepdims=True), rtol=1e-5)


# ---------------------------------------------------------------------------
# guards, indirect indexing, scalars


def test_padding_guard_conv():
    src = r"""\kernel k(X: f32[2, 6, 6], W: f32[3, 3]) -> (C: f32[2, 6, 6]) {
      L^{2}_{n=0} L^{8}_{h=0} L^{8}_{w=0} [ Pd^{f32,g}_{n,h,w} = if_then_else(1 <= h < 7 & 1 <= w < 7, X^{f32,g}_{n,h-1,w-1}, 0.0); ];
      L^{2}_{n=0} L^{6}_{i=0} L^{6}_{j=0} L^{3}_{p=0} L^{3}_{q=0} [
        C^{f32,g}_{n,i,j} = C^{f32,g}_{n,i,j} + Pd^{f32,g}_{n,i+p,j+q}*W^{f32,g}_{p,q}; ];
    }"""
    x, w = f32(2, 6, 6), f32(3, 3)
    pd = np.pad(x, ((0, 0), (1, 1), (1, 1)))
    ref = np.zeros((2, 6, 6))
    for p in range(3):
        for q in range(3):
            ref += pd[:, p:p + 6, q:q + 6] * w[p, q]
    close(run(src, {"X": x, "W": w})["C"], ref, rtol=1e-5)


def test_guard_is_lazy_in_vector_loop():
    # the untaken branch would read out of bounds; inside V the guard must stay lazy
    src = r"""\kernel k(A: f32[16]) -> (Y: f32[16]) {
      V^{16}_{i=0} [ Y^{f32,g}_{i} = if_then_else(i >= 1, A^{f32,g}_{i-1}, -1.0) + if_then_else(i < 15, A^{f32,g}_{i+1}, 0.0); ];
    }"""
    a = f32(16)
    ref = np.concatenate([[-1.0], a[:-1]]) + np.concatenate([a[1:], [0.0]])
    close(run(src, {"A": a})["Y"], ref)


def test_gather_with_i64_index_tensor():
    src = r"""\kernel k(A: f32[10, 4], C: i64[6]) -> (Y: f32[6, 4], Z: f32[6]) {
      L^{6}_{i=0} L^{4}_{j=0} [ Y^{f32,g}_{i,j} = A^{f32,g}_{C^{i64,g}_{i},j}; ];
      V^{6}_{i=0} [ Z^{f32,g}_{i} = A^{f32,g}_{C^{i64,g}_{i},i%4}*2.0; ];
    }"""
    a, c = f32(10, 4), np.array([9, 0, 3, 3, 7, 1], np.int64)
    out = run(src, {"A": a, "C": c})
    close(out["Y"], a[c])
    close(out["Z"], a[c, np.arange(6) % 4] * 2)


def test_cross_entropy_like_index_as_value():
    # Step-TP CrossEntropyLoss shape: an index used as a value, i64/f32 mixing, scalar accumulators
    src = r"""\kernel k(A: f32[8, 5], C: i64[8]) -> (D: f32[]) {
    B^{8}_{tx=0}L^{5}_{a=0}[F^{f32,g}_{tx}=max(F^{f32,g}_{tx},A^{f32,g}_{tx,a});];B^{8}_{tx=0}L^{5}_{a=0}[G^{f32,g}_{tx}=G^{f32,g}_{tx}+exp(A^{f32,g}_{tx,a}-F^{f32,g}_{tx});];B^{8}_{tx=0}L^{5}_{a=0}[E^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}-F^{f32,g}_{tx}-log(G^{f32,g}_{tx});];B^{5}_{tx=0}[H^{i64,g}_{tx}=if_then_else(tx!=-100,1,0);];B^{8}_{tx=0}[I^{f32,g}_{tx}=-H^{i64,g}_{C^{i64,g}_{tx}}*E^{f32,g}_{tx,C^{i64,g}_{tx}};];B^{8}_{tx=0}[J^{i64,g}=J^{i64,g}+H^{i64,g}_{C^{i64,g}_{tx}};];B^{8}_{tx=0}[D^{f32,g}=D^{f32,g}+I^{f32,g}_{tx}/J^{i64,g};];
    }"""
    a, c = f32(8, 5), RNG.integers(0, 5, size=8).astype(np.int64)
    ls = a - a.max(1, keepdims=True)
    ls = ls - np.log(np.exp(ls).sum(1, keepdims=True))
    close(run(src, {"A": a, "C": c})["D"], -ls[np.arange(8), c].mean(), rtol=1e-5)


# ---------------------------------------------------------------------------
# types


def test_integer_floor_division_and_modulo():
    src = r"""\kernel k(A: i64[7], B: i64[7]) -> (Q: i64[12], R: i64[12], S: i64[7], T: i64[7], U: f32[12]) {
      L^{12}_{i=0} [ Q^{i64,g}_{i} = (i - 5)//3; R^{i64,g}_{i} = (i - 5)%3; U^{f32,g}_{i} = i/4 + (i - 5)//2; ];
      L^{7}_{i=0} [ S^{i64,g}_{i} = A^{i64,g}_{i}//B^{i64,g}_{i}; T^{i64,g}_{i} = A^{i64,g}_{i}%B^{i64,g}_{i}; ];
    }"""
    a = np.array([7, -7, 7, -7, 5, 0, 9], np.int64)
    b = np.array([2, 2, -2, -2, 0, 3, 3], np.int64)
    out = run(src, {"A": a, "B": b})
    i = np.arange(12)
    assert out["Q"].tolist() == ((i - 5) // 3).tolist()
    assert out["R"].tolist() == ((i - 5) % 3).tolist()
    close(out["U"], i / 4 + (i - 5) // 2)
    with np.errstate(divide="ignore"):
        assert out["S"].tolist() == np.floor_divide(a, b).tolist()  # x // 0 == 0 as in NumPy
        assert out["T"].tolist() == np.remainder(a, b).tolist()


def test_float_floor_division_and_modulo():
    src = r"""\kernel k(A: f32[6]) -> (Q: f32[6], R: f32[6]) {
      L^{6}_{i=0} [ Q^{f32,g}_{i} = A^{f32,g}_{i}//0.75; R^{f32,g}_{i} = A^{f32,g}_{i}%0.75; ];
    }"""
    a = np.array([-2.0, -0.5, 0.0, 0.4, 1.6, 3.1], np.float32)
    out = run(src, {"A": a})
    close(out["Q"], np.floor_divide(a, np.float32(0.75)))
    close(out["R"], np.remainder(a, np.float32(0.75)), atol=1e-6)


def test_casts_and_truncation():
    src = r"""\kernel k(A: f32[6], I: i32[6]) -> (T: i32[6], F: f32[6], B: bool[6], D: f64[6], U: u8[6]) {
      L^{6}_{i=0} [
        T^{i32,g}_{i} = i32(A^{f32,g}_{i});
        F^{f32,g}_{i} = f32(I^{i32,g}_{i})/2;
        B^{bool,g}_{i} = bool(A^{f32,g}_{i});
        D^{f64,g}_{i} = f64(A^{f32,g}_{i})*1e300;
        U^{u8,g}_{i} = u8(I^{i32,g}_{i}%200);
      ];
    }"""
    a = np.array([-2.7, -0.5, 0.0, 0.4, 1.6, 300.9], np.float32)
    ii = np.array([-3, -1, 0, 1, 5, 255], np.int32)
    out = run(src, {"A": a, "I": ii})
    assert out["T"].tolist() == a.astype(np.int32).tolist()
    close(out["F"], ii / 2)
    assert out["B"].tolist() == (a != 0).tolist()
    close(out["D"], a.astype(np.float64) * 1e300, rtol=1e-12)
    assert out["U"].tolist() == (ii % 200).astype(np.uint8).tolist()


def test_mixed_dtypes_and_weak_literals():
    src = r"""\kernel k(A: f32[5], B: f64[5], I: i32[5], H: f16[5], S: i8[5]) -> (X: f64[5], Y: f32[5], Z: f16[5], W: i64[5], V: f32[5]) {
      L^{5}_{i=0} [
        X^{f64,g}_{i} = A^{f32,g}_{i}*B^{f64,g}_{i} + 0.1;
        Y^{f32,g}_{i} = I^{i32,g}_{i} + A^{f32,g}_{i} + i;
        Z^{f16,g}_{i} = H^{f16,g}_{i}*2 + exp(H^{f16,g}_{i});
        W^{i64,g}_{i} = S^{i8,g}_{i}*100 + I^{i32,g}_{i};
        V^{f32,g}_{i} = 1/3 + I^{i32,g}_{i}/2;
      ];
    }"""
    a, b = f32(5), RNG.random(5)
    ii = np.array([-2, -1, 0, 3, 100], np.int32)
    h = (RNG.random(5)).astype(np.float16)
    s = np.array([-128, -1, 0, 1, 127], np.int8)
    out = run(src, {"A": a, "B": b, "I": ii, "H": h, "S": s})
    close(out["X"], a.astype(np.float64) * b + 0.1, rtol=1e-12)
    close(out["Y"], ii + a + np.arange(5))
    close(out["Z"], h.astype(np.float32) * 2 + np.exp(h.astype(np.float32)), rtol=2e-3)
    # i8 * 100 is computed in i8 (weak literal) and wraps, as in NumPy 2
    assert out["W"].tolist() == ((s * np.int8(100)).astype(np.int32) + ii).tolist()
    close(out["V"], 1 / 3 + ii / 2)


def test_bool_inputs_outputs_and_logic():
    src = r"""\kernel k(M: bool[8], A: f32[8]) -> (Y: f32[8], B: bool[8], C: i64[]) {
      L^{8}_{i=0} [
        Y^{f32,g}_{i} = if_then_else(M^{bool,g}_{i}, A^{f32,g}_{i}, -1.0);
        B^{bool,g}_{i} = M^{bool,g}_{i} & (A^{f32,g}_{i} > 0.5) | (i == 3);
      ];
      L^{8}_{i=0} [ C^{i64,g} = C^{i64,g} + M^{bool,g}_{i}; ];
    }"""
    m = RNG.random(8) < 0.5
    a = f32(8)
    out = run(src, {"M": m, "A": a})
    close(out["Y"], np.where(m, a, -1))
    assert out["B"].tolist() == ((m & (a > 0.5)) | (np.arange(8) == 3)).tolist()
    assert int(out["C"]) == int(m.sum())


def test_comparison_chains_and_inf_literal():
    src = r"""\kernel k(A: f32[10]) -> (Y: f32[10]) {
      L^{10}_{i=0} [ Y^{f32,g}_{i} = if_then_else(2 <= i < 7, A^{f32,g}_{i}, if_then_else(A^{f32,g}_{i} > 0.5, inf, -inf)); ];
    }"""
    a = f32(10)
    i = np.arange(10)
    ref = np.where((2 <= i) & (i < 7), a, np.where(a > 0.5, np.inf, -np.inf))
    np.testing.assert_array_equal(run(src, {"A": a})["Y"], ref.astype(np.float32))


@pytest.mark.parametrize("expr,ref", [
    ("exp(A^{f32,g}_{i})", np.exp),
    ("log(A^{f32,g}_{i})", np.log),
    ("sqrt(A^{f32,g}_{i})", np.sqrt),
    ("rsqrt(A^{f32,g}_{i})", lambda a: 1 / np.sqrt(a)),
    ("abs(A^{f32,g}_{i} - 1.0)", lambda a: np.abs(a - 1)),
    ("erf(A^{f32,g}_{i} - 1.0)", lambda a: np.vectorize(math.erf)(a - 1)),
    ("tanh(A^{f32,g}_{i} - 1.0)", lambda a: np.tanh(a - 1)),
    ("sigmoid(A^{f32,g}_{i} - 1.0)", lambda a: 1 / (1 + np.exp(-(a - 1)))),
    ("pow(A^{f32,g}_{i}, 1.5)", lambda a: a ** 1.5),
    ("pow(A^{f32,g}_{i}, 2)", lambda a: a ** 2),
    ("A^{f32,g}_{i}**3", lambda a: a ** 3),
    ("A^{f32,g}_{i}**0.5", np.sqrt),
    ("A^{f32,g}_{i}**A^{f32,g}_{i}", lambda a: a ** a),
    ("floor(A^{f32,g}_{i}*3.0)", lambda a: np.floor(a * 3)),
    ("ceil(A^{f32,g}_{i}*3.0)", lambda a: np.ceil(a * 3)),
    ("max(A^{f32,g}_{i}, 1.0, A^{f32,g}_{i}*0.5)", lambda a: np.maximum(np.maximum(a, 1), a * 0.5)),
    ("min(A^{f32,g}_{i}, 1.0)", lambda a: np.minimum(a, 1)),
    ("if_then_else(A^{f32,g}_{i} > 1.0, A^{f32,g}_{i}, 0.0)", lambda a: np.where(a > 1, a, 0)),
    ("-A^{f32,g}_{i} + 2**i", lambda a: -a + 2.0 ** np.arange(8)),
    ("\\frac{A^{f32,g}_{i}}{2}", lambda a: a / 2),
])
def test_intrinsics(expr, ref):
    src = f"""\\kernel k(A: f32[8]) -> (Y: f32[8]) {{ L^{{8}}_{{i=0}} [ Y^{{f32,g}}_{{i}} = {expr}; ]; }}"""
    a = (RNG.random(8) * 2 + 0.1).astype(np.float32)
    close(run(src, {"A": a})["Y"], ref(a.astype(np.float64)), rtol=2e-6, atol=1e-6)


def test_integer_intrinsics_and_power():
    src = r"""\kernel k(I: i32[6]) -> (A: i32[6], P: i64[6], M: i32[6], F: f32[6]) {
      L^{6}_{i=0} [
        A^{i32,g}_{i} = abs(I^{i32,g}_{i});
        P^{i64,g}_{i} = I^{i32,g}_{i}**3 + i**2;
        M^{i32,g}_{i} = max(I^{i32,g}_{i}, 0) + min(I^{i32,g}_{i}, 1) + floor(I^{i32,g}_{i});
        F^{f32,g}_{i} = pow(I^{i32,g}_{i}, 2) + sqrt(I^{i32,g}_{i}*I^{i32,g}_{i});
      ];
    }"""
    ii = np.array([-3, -1, 0, 1, 5, 20], np.int32)
    out = run(src, {"I": ii})
    i = np.arange(6)
    assert out["A"].tolist() == np.abs(ii).tolist()
    assert out["P"].tolist() == (ii.astype(np.int64) ** 3 + i ** 2).tolist()
    assert out["M"].tolist() == (np.maximum(ii, 0) + np.minimum(ii, 1) + ii).tolist()
    close(out["F"], ii.astype(np.float64) ** 2 + np.abs(ii))


# ---------------------------------------------------------------------------
# structure


def test_regions_and_align_run_in_order():
    src = r"""\kernel k(A: f32[4, 8], C: f32[8, 6]) -> (D: f32[4, 6]) {
      B^{4}_{tx=0}[^{ap_0}L^{8}_{c=0}L^{6}_{a=0}[E^{f32,l}_{tx,c,a}=C^{f32,g}_{c,a};];L^{6}_{a=0}L^{8}_{c=0}[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+A^{f32,g}_{tx,c}*E^{f32,l}_{tx,c,a};];]^{ap_0};
      D = align(0, 4, 5);
    }"""
    a, c = f32(4, 8), f32(8, 6)
    close(run(src, {"A": a, "C": c})["D"], a @ c, rtol=1e-5)


def test_nest_inside_body_and_multiple_statements():
    src = r"""\kernel k(A: f32[4, 8]) -> (Y: f32[4, 8]) {
      L^{4}_{i=0} [
        L^{8}_{j=0} [ M^{f32,g}_{i} = max(M^{f32,g}_{i}, A^{f32,g}_{i,j}); ];
        L^{8}_{j=0} [ T^{f32,l}_{j} = A^{f32,g}_{i,j} - M^{f32,g}_{i}; Y^{f32,g}_{i,j} = T^{f32,l}_{j}*T^{f32,l}_{j}; ];
      ];
    }"""
    a = f32(4, 8)
    close(run(src, {"A": a})["Y"], (a - a.max(1, keepdims=True)) ** 2)


def test_multiple_kernels_in_one_file():
    src = r"""\kernel one(A: f32[4]) -> (Y: f32[4]) { L^{4}_{i=0} [ Y^{f32,g}_{i} = A^{f32,g}_{i} + 1.0; ]; }
    \kernel two(A: f32[4]) -> (Y: f32[4]) { L^{4}_{i=0} [ Y^{f32,g}_{i} = A^{f32,g}_{i} * 3.0; ]; }"""
    a = f32(4)
    close(run(src, {"A": a}, kernel="one")["Y"], a + 1)
    close(run(src, {"A": a}, kernel="two")["Y"], a * 3)


def test_kernel_named_like_a_libm_symbol():
    src = r"""\kernel exp(A: f64[4]) -> (Y: f64[4]) { L^{4}_{i=0} [ Y^{f64,g}_{i} = exp(A^{f64,g}_{i}); ]; }"""
    r = _result(src)
    b = build(r)
    assert b.symbol == "exp_kernel"
    a = RNG.random(4)
    close(b.run({"A": a})["Y"], np.exp(a), rtol=1e-12)


def test_stmt_step_tp_bare_body_lowers():
    from leirc.lang.checker import check_kernel
    from leirc.lang.parser import parse_body

    pr = parse_body("B^{4}_{tx=0}L^{3}_{a=0}[D^{f32,g}_{tx}=D^{f32,g}_{tx}+A^{f32,g}_{tx,a};];",
                    [("A", "torch.float32", [4, 3])], [("D", "torch.float32", [4])])
    r = check_kernel(pr.module.kernels[0])
    a = f32(4, 3)
    close(build(r).run({"A": a})["D"], a.sum(1))


# ---------------------------------------------------------------------------
# API and errors


def test_lower_returns_irmodule_with_named_function():
    r = _result(r"\kernel k(A: f32[4]) -> (Y: f32[4]) { V^{4}_{i=0} [ Y^{f32,g}_{i} = A^{f32,g}_{i}; ]; }")
    mod = lower(r)
    text = mod["k"].script()
    assert "T.vectorized(4)" in text and "def k(" in text


def test_lowering_failure_is_a_diagnostic_with_span():
    # negating a bool has no meaning in TIR: reported as E050 at the negation, not as a traceback
    src = "\\kernel k(M: bool[4]) -> (Y: bool[4]) {\n  L^{4}_{i=0} [ Y^{bool,g}_{i} = -M^{bool,g}_{i}; ];\n}"
    r = _result(src)
    with pytest.raises(LoweringError) as ei:
        build(r)
    d = ei.value.diagnostic
    assert d.code == "E050" and d.span is not None and d.span.line == 2
    assert "Traceback" not in d.message


def test_cuda_lowering_wraps_unbound_nests_and_binds_threads():
    src = r"""\kernel k(A: f32[64, 32]) -> (Y: f32[64, 32], S: f32[]) {
      B^{64}_{bx=0} B^{32}_{tx=0} [ Y^{f32,g}_{bx,tx} = A^{f32,g}_{bx,tx}*2.0; ];
      L^{64}_{i=0} [ S^{f32,g} = S^{f32,g} + A^{f32,g}_{i,0}; ];
    }"""
    b = build(_result(src), "cuda")
    assert b.cuda_source is not None
    assert "blockIdx.x" in b.cuda_source and "threadIdx.x" in b.cuda_source
    assert b.cuda_source.count("__global__") >= 4  # declarations + definitions of 2 kernels
    # the unbound reduction nest runs on one thread, and says so
    assert [d.code for d in b.diagnostics] == ["W051"] and b.diagnostics[0].span.line == 3


def test_build_failure_is_a_diagnostic_with_span():
    # a target TVM cannot compile for: E051 at the first top-level nest that fails alone
    src = ("\\kernel k(A: f32[8]) -> (Y: f32[8]) {\n"
           "  L^{8}_{i=0} [ Y^{f32,g}_{i} = A^{f32,g}_{i}; ];\n}")
    from leirc.lower import BuildError

    with pytest.raises(BuildError) as ei:
        build(_result(src), {"kind": "llvm", "mtriple": "bogus-none-none"})
    d = ei.value.diagnostic
    assert d.code == "E051" and d.span is not None and d.span.line == 2
    assert "bogus-none-none" in d.message and "Traceback" not in d.message


def test_nvcc_rejection_is_e052():
    import shutil

    from leirc.lower import nvcc_compile
    from leirc.driver import BuildOptions, PipelineError, new_build, nvcc_pass, run_pipeline

    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not found")
    ok, log = nvcc_compile("this is not CUDA")
    assert not ok and "error" in log
    st = run_pipeline(new_build(r"\kernel k(A: f32[8]) -> (Y: f32[8]) { B^{8}_{tx=0} [ Y^{f32,g}_{tx} = A^{f32,g}_{tx}; ]; }",
                                file="k.leir", options=BuildOptions(target="cuda")), until="build")
    st.job("k").built.cuda_source = "extern \"C\" __global__ void k() { undeclared_name = 1; }"
    with pytest.raises(PipelineError) as ei:
        nvcc_pass(st)
    (d,) = ei.value.diagnostics
    assert d.code == "E052" and d.file == "k.leir"
