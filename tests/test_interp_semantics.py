"""Reference interpreter: semantics on small hand-written programs.

Every program is also run in two other execution modes -- tiny blocks (max_elements=3, so
every vectorized loop is chunked) and fully serial (vectorize=False: every loop iterates,
statements are evaluated literally element by element) -- and the three must agree: the
vectorized plan (loop distribution, vectorized reductions, chunking) may not change the
meaning.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from leirc.interp import InterpError, Interpreter, check_source, describe_plan, index_ranges, random_inputs, run
from leirc.interp import dtypes as D


def K(body: str, sig: str) -> str:
    return f"\\kernel k({sig}) {{\n{body}\n}}\n"


def run_all_modes(src: str, inputs=None, *, seed=0, dist="normal", rtol=1e-5, atol=1e-6):
    """Run in the three modes, assert agreement, return (outputs+intermediates, inputs)."""
    r = check_source(src)
    ins = inputs if inputs is not None else random_inputs(r.kernel, seed, dist)
    results = [Interpreter(r, **kw).run(ins, intermediates=True)
               for kw in ({}, {"max_elements": 3}, {"vectorize": False})]
    for name in results[0]:
        a = results[0][name]
        for other, label in ((results[1][name], "chunked"), (results[2][name], "serial")):
            assert a.shape == other.shape and a.dtype == other.dtype
            if a.dtype.kind in "fV" or a.dtype == D.BF16:
                np.testing.assert_allclose(a.astype(np.float64), other.astype(np.float64), rtol=rtol, atol=atol,
                                           err_msg=f"{name}: vectorized vs {label}")
            else:
                np.testing.assert_array_equal(a, other, err_msg=f"{name}: vectorized vs {label}")
    return results[0], ins


# ---------------------------------------------------------------------------
# statement kinds


def test_matmul_reduction_init_and_value():
    src = K("L^{4}_{i=0} L^{5}_{j=0} L^{6}_{k=0} [ C^{f32,g}_{i,j} = C^{f32,g}_{i,j} + A^{f32,g}_{i,k}*B^{f32,g}_{k,j}; ];",
            "A: f32[4, 6], B: f32[6, 5]) -> (C: f32[4, 5]")
    out, ins = run_all_modes(src)
    np.testing.assert_allclose(out["C"], ins["A"].astype(np.float64) @ ins["B"], rtol=1e-6)


def test_reduction_init_at_init_loop_entry_per_outer_iteration():
    # init loop is k (outermost loop not in the subscript); j is inside it: every (i) entry of k
    # initializes C[i, 0..4]; the sum then spans k and m.
    src = K("L^{3}_{i=0} L^{4}_{k=0} L^{5}_{j=0} L^{2}_{m=0} [ C^{f32,g}_{i,j} = C^{f32,g}_{i,j} + A^{f32,g}_{i,k,j,m}; ];",
            "A: f32[3, 4, 5, 2]) -> (C: f32[3, 5]")
    out, ins = run_all_modes(src)
    np.testing.assert_allclose(out["C"], ins["A"].astype(np.float64).sum(axis=(1, 3)), rtol=1e-6)


def test_reduce_without_reduction_loop_reads_identity():
    src = K("L^{4}_{i=0} L^{6}_{j=0} [ Y^{f32,g}_{i,j} = Y^{f32,g}_{i,j} + A^{f32,g}_{i,j}; ];",
            "A: f32[4, 6]) -> (Y: f32[4, 6]")
    out, ins = run_all_modes(src)
    np.testing.assert_array_equal(out["Y"], ins["A"])
    src = K("L^{4}_{i=0} [ Y^{f32,g}_{i} = max(Y^{f32,g}_{i}, A^{f32,g}_{i}); ];", "A: f32[4]) -> (Y: f32[4]")
    out, ins = run_all_modes(src)
    np.testing.assert_array_equal(out["Y"], ins["A"])


def test_non_injective_reduction_target_and_no_init_overwrite():
    # X_{i//2} accumulates over j (reduction loop) for a fixed i; i is spatial, so pairs of i
    # write the same element: the init happens per i (entry of j), the second i of a pair
    # re-initializes -- exactly what the literal semantics says.
    src = K("L^{8}_{i=0} L^{6}_{j=0} [ Y^{f32,g}_{i//2} = Y^{f32,g}_{i//2} + A^{f32,g}_{i,j}; ];",
            "A: f32[8, 6]) -> (Y: f32[4]")
    out, ins = run_all_modes(src)
    np.testing.assert_allclose(out["Y"], ins["A"].astype(np.float64).sum(axis=1)[1::2], rtol=1e-6)


def test_reduction_chain_reassociated():
    src = K("L^{4}_{i=0} L^{6}_{j=0} [ Y^{f32,g}_{i} = Y^{f32,g}_{i} + A^{f32,g}_{i,j} - B^{f32,g}_{i,j}*2.0; ];",
            "A: f32[4, 6], B: f32[4, 6]) -> (Y: f32[4]")
    out, ins = run_all_modes(src)
    np.testing.assert_allclose(out["Y"], (ins["A"].astype(np.float64) - 2 * ins["B"]).sum(axis=1), rtol=1e-5, atol=1e-6)


def test_product_chain_and_min_and_subtract_reductions():
    src = K("L^{5}_{i=0} L^{3}_{j=0} [ Y^{f32,g}_{i} = min(Y^{f32,g}_{i}, A^{f32,g}_{i,j}); "
            "P^{f32,g}_{i} = P^{f32,g}_{i} * A^{f32,g}_{i,j} / 2.0; ];\n"
            "L^{5}_{i=0} L^{3}_{j=0} [ M^{f32,g}_{j} = M^{f32,g}_{j} - A^{f32,g}_{i,j}; ];",
            "A: f32[5, 3]) -> (Y: f32[5], P: f32[5], M: f32[3]")
    out, ins = run_all_modes(src)
    a = ins["A"].astype(np.float64)
    np.testing.assert_array_equal(out["Y"], ins["A"].min(axis=1))
    np.testing.assert_allclose(out["P"], (a / 2).prod(axis=1), rtol=1e-6)
    np.testing.assert_allclose(out["M"], -a.sum(axis=0), rtol=1e-6)


def test_update_accumulates_into_previous_value():
    src = K("L^{3}_{i=0} [ Y^{f32,g}_{i} = B^{f32,g}_{i}; ];\n"
            "L^{3}_{i=0} L^{10}_{j=0} [ Y^{f32,g}_{i} = Y^{f32,g}_{i} + A^{f32,g}_{i,j}; ];",
            "A: f32[3, 10], B: f32[3]) -> (Y: f32[3]")
    out, ins = run_all_modes(src)
    np.testing.assert_allclose(out["Y"], ins["B"] + ins["A"].astype(np.float64).sum(axis=1), rtol=1e-6)


def test_update_not_in_reduction_form_iterates_in_order():
    src = K("L^{3}_{i=0} [ Y^{f32,g}_{i} = B^{f32,g}_{i}; ];\n"
            "L^{3}_{i=0} L^{10}_{j=0} [ Y^{f32,g}_{i} = Y^{f32,g}_{i} * 0.5 + A^{f32,g}_{i,j}; ];",
            "A: f32[3, 10], B: f32[3]) -> (Y: f32[3]")
    out, ins = run_all_modes(src)
    y = ins["B"].copy()
    for j in range(10):
        y = (y * np.float32(0.5) + ins["A"][:, j]).astype(np.float32)
    np.testing.assert_array_equal(out["Y"], y)
    r = check_source(src)
    assert "L^{10}_{j}: iter" in describe_plan(r)


def test_scan_prefix_sum_guarded_boundary():
    src = K("L^{3}_{i=0} L^{10}_{j=0} [ Y^{f32,g}_{i,j} = if_then_else(1 <= j, Y^{f32,g}_{i,j-1}, 0.0) + A^{f32,g}_{i,j}; ];",
            "A: f32[3, 10]) -> (Y: f32[3, 10]")
    out, ins = run_all_modes(src)
    np.testing.assert_allclose(out["Y"], np.cumsum(ins["A"], axis=1), rtol=1e-5, atol=1e-6)
    plan = describe_plan(check_source(src))
    assert "L^{3}_{i}: vec" in plan and "L^{10}_{j}: iter" in plan


def test_fused_body_reading_partial_accumulator():
    # Z reads the running sum inside the reduction loop: j must iterate (Z ends with the full sum)
    src = K("L^{4}_{i=0} L^{6}_{j=0} [ S^{f32,g}_{i} = S^{f32,g}_{i} + A^{f32,g}_{i,j}; "
            "Z^{f32,g}_{i,j} = S^{f32,g}_{i} * 2.0; ];",
            "A: f32[4, 6]) -> (Z: f32[4, 6]")
    out, ins = run_all_modes(src)
    np.testing.assert_allclose(out["Z"], 2 * np.cumsum(ins["A"], axis=1), rtol=1e-5, atol=1e-6)
    assert "iter" in describe_plan(check_source(src))


def test_argmax_fused_init_and_update():
    src = K("L^{4}_{t=0} L^{7}_{a=0} L^{5}_{c=0} [ D^{f32,g}_{t,c} = max(D^{f32,g}_{t,c}, A^{f32,g}_{t,a,c}); C^{i64,g}_{t,c} = 0; ];\n"
            "L^{4}_{t=0} L^{7}_{a=0} L^{5}_{c=0} [ C^{i64,g}_{t,c} = if_then_else(A^{f32,g}_{t,a,c} >= D^{f32,g}_{t,c}, a, C^{i64,g}_{t,c}); ];",
            "A: f32[4, 7, 5]) -> (C: i64[4, 5]")
    out, ins = run_all_modes(src)
    assert out["C"].dtype == np.int64
    np.testing.assert_array_equal(out["C"], ins["A"].argmax(axis=1))


def test_scalar_output_and_transposed_store():
    src = K("L^{5}_{i=0} L^{7}_{j=0} [ Y^{f32,g}_{j,i} = A^{f32,g}_{i,j} * 2.0; ];\n"
            "L^{5}_{i=0} L^{7}_{j=0} [ S^{f32,g} = S^{f32,g} + A^{f32,g}_{i,j}; ];\n"
            "T^{f32,g} = S^{f32,g} / 35.0;",
            "A: f32[5, 7]) -> (Y: f32[7, 5], T: f32[]")
    out, ins = run_all_modes(src)
    np.testing.assert_array_equal(out["Y"], ins["A"].T * 2)
    assert out["T"].shape == ()
    np.testing.assert_allclose(out["T"], ins["A"].astype(np.float64).mean(), rtol=1e-6)


def test_reverse_and_loop_start():
    src = K("L^{6}_{i=0} L^{4}_{j=0} [ Y^{f32,g}_{i,j} = A^{f32,g}_{5-i,3-j}; ];\n"
            "L^{8}_{i=0} [ Z^{f32,g}_{i} = 0.0; ];\nL^{4}_{i=2} [ Z^{f32,g}_{i} = B^{f32,g}_{i} + i; ];",
            "A: f32[6, 4], B: f32[8]) -> (Y: f32[6, 4], Z: f32[8]")
    out, ins = run_all_modes(src)
    np.testing.assert_array_equal(out["Y"], ins["A"][::-1, ::-1])
    z = np.zeros(8, np.float32)
    z[2:6] = ins["B"][2:6] + np.arange(2, 6)
    np.testing.assert_array_equal(out["Z"], z)


def test_regions_and_align_run_in_order():
    src = K("[^{ap_0} L^{4}_{i=0} [ T^{f32,g}_{i} = A^{f32,g}_{i} + 1.0; ]; ]^{ap_0};\nT=align(0,4,0);\n"
            "L^{4}_{i=0} [ Y^{f32,g}_{i} = T^{f32,g}_{i} * 2.0; ];", "A: f32[4]) -> (Y: f32[4]")
    out, ins = run_all_modes(src)
    np.testing.assert_array_equal(out["Y"], (ins["A"] + 1) * 2)


def test_scalar_temporary_inside_loop_iterates():
    src = K("L^{6}_{i=0} [ T^{f32,l} = A^{f32,g}_{i} * 3.0; Y^{f32,g}_{i} = T^{f32,l} + 1.0; ];",
            "A: f32[6]) -> (Y: f32[6]")
    out, ins = run_all_modes(src)
    np.testing.assert_array_equal(out["Y"], ins["A"] * np.float32(3) + np.float32(1))


def test_cross_thread_reduction_over_b_loop():
    src = K("B^{16}_{tx=0} L^{32}_{a=0} [ G^{f32,g} = G^{f32,g} + A^{f32,g}_{tx,a}; ];\nL^{f32,g} = G^{f32,g} / 512.0;",
            "A: f32[16, 32]) -> (L: f32[]")
    out, ins = run_all_modes(src)
    np.testing.assert_allclose(out["L"], ins["A"].astype(np.float64).mean(), rtol=1e-6)


# ---------------------------------------------------------------------------
# if_then_else laziness and bounds


def test_guarded_out_of_range_reads_are_not_errors():
    src = K("L^{8}_{i=0} [ Y^{f32,g}_{i} = if_then_else(1 <= i < 7, A^{f32,g}_{i-1}, -inf) "
            "+ if_then_else(i < 6, A^{f32,g}_{i}*2.0, 0.0); ];", "A: f32[6]) -> (Y: f32[8]")
    out, ins = run_all_modes(src)
    a = ins["A"]
    exp = np.full(8, -np.inf, np.float32)
    exp[1:7] = a
    exp[:6] += a * 2
    np.testing.assert_array_equal(out["Y"], exp)


def test_padding_copy_maxpool_minus_inf():
    src = K("L^{2}_{c=0} L^{7}_{h=0} L^{7}_{w=0} [ P^{f32,g}_{c,h,w} = if_then_else(1 <= h < 6 & 1 <= w < 6, X^{f32,g}_{c,h-1,w-1}, -inf); ];\n"
            "L^{2}_{c=0} L^{3}_{i=0} L^{3}_{j=0} L^{3}_{p=0} L^{3}_{q=0} [ C^{f32,g}_{c,i,j} = max(C^{f32,g}_{c,i,j}, P^{f32,g}_{c,i*2+p,j*2+q}); ];",
            "X: f32[2, 5, 5]) -> (C: f32[2, 3, 3]")
    out, ins = run_all_modes(src)
    torch = pytest.importorskip("torch")
    ref = torch.nn.functional.max_pool2d(torch.from_numpy(ins["X"])[None], 3, stride=2, padding=1)[0].numpy()
    np.testing.assert_array_equal(out["C"], ref)


def test_data_dependent_gather_and_scatter():
    src = K("L^{5}_{i=0} [ Y^{f32,g}_{i} = if_then_else(i < 3, A^{f32,g}_{i, L^{i64,g}_{i}}, 0.0); ];",
            "A: f32[5, 3], L: i64[5]) -> (Y: f32[5]")
    A = np.arange(15, dtype=np.float32).reshape(5, 3)
    out, _ = run_all_modes(src, {"A": A, "L": np.array([0, 1, 2, -1, 100])})
    np.testing.assert_array_equal(out["Y"], [0, 4, 8, 0, 0])
    r = check_source(src)
    with pytest.raises(InterpError, match=r"out-of-range access A\^\{f32,g\}_\{i,L\^\{i64,g\}_\{i\}\}: subscript 2 is 3, outside \[0, 3\) \(at i=2\)"):
        run(r, {"A": A, "L": np.array([0, 1, 3, 0, 0])})
    with pytest.raises(InterpError) as ei:
        Interpreter(r, vectorize=False).run({"A": A, "L": np.array([0, 1, 3, 0, 0])})
    assert ei.value.span is not None and ei.value.span.line == 2

    src = K("L^{5}_{i=0} L^{3}_{j=0} [ Y^{f32,g}_{L^{i64,g}_{i}, j} = A^{f32,g}_{i, j}; ];",
            "A: f32[5, 3], L: i64[5]) -> (Y: f32[5, 3]")
    out, _ = run_all_modes(src, {"A": A, "L": np.array([4, 3, 2, 1, 0])})
    np.testing.assert_array_equal(out["Y"], A[::-1])
    with pytest.raises(InterpError, match="subscript 1 is 5"):
        run(check_source(src), {"A": A, "L": np.array([4, 3, 2, 1, 5])})


def test_unwritten_output_elements_keep_the_poison():
    # a data-dependent scatter may leave holes: they keep the NaN-payload poison
    src = K("L^{2}_{i=0} [ Y^{f32,g}_{L^{i64,g}_{i}} = A^{f32,g}_{i}; ];", "A: f32[2], L: i64[2]) -> (Y: f32[3]")
    r = check_source(src)
    y = run(r, {"A": np.array([1, 2], np.float32), "L": np.array([0, 2])})["Y"]
    assert D.poison_mask(y, "f32").tolist() == [False, True, False]
    y = run(r, {"A": np.array([1, 2], np.float32), "L": np.array([0, 2])}, poison=False)["Y"]
    assert y.tolist() == [1, 0, 2]


# ---------------------------------------------------------------------------
# types


def test_types_follow_promotion_rules():
    src = K("L^{5}_{i=0} [ Y^{f32,g}_{i} = A^{i32,g}_{i} / 2 + B^{f32,g}_{i} * i + 0.1; ];\n"
            "L^{5}_{i=0} [ Z^{i32,g}_{i} = A^{i32,g}_{i} // 3 + A^{i32,g}_{i}%3 - (i - 2) // 2; ];\n"
            "L^{5}_{i=0} [ W^{f64,g}_{i} = f64(B^{f32,g}_{i}) * 0.1 + exp(B^{f32,g}_{i}); ];\n"
            "L^{5}_{i=0} [ V^{i64,g}_{i} = A^{i32,g}_{i} ** 2 + i ** 3; ];",
            "A: i32[5], B: f32[5]) -> (Y: f32[5], Z: i32[5], W: f64[5], V: i64[5]")
    A = np.array([6, 2, 0, -4, -3], np.int32)
    B = np.array([0.1, -0.5, 0.36, 1.3, 0.9], np.float32)
    out, _ = run_all_modes(src, {"A": A, "B": B})
    i = np.arange(5)
    f32 = np.float32
    np.testing.assert_array_equal(out["Y"], (A.astype(f32) / f32(2)) + B * i.astype(f32) + f32(0.1))
    np.testing.assert_array_equal(out["Z"], A // 3 + A % 3 - (i - 2) // 2)
    assert out["Z"].dtype == np.int32
    np.testing.assert_array_equal(out["W"], B.astype(np.float64) * 0.1 + np.exp(B).astype(np.float64))
    np.testing.assert_array_equal(out["V"], A.astype(np.int64) ** 2 + i ** 3)


def test_f32_literal_arithmetic_is_f32():
    # 1/3 in f32 differs from the f64 value rounded once
    src = K("L^{1}_{i=0} [ Y^{f32,g}_{i} = (A^{f32,g}_{i} + 1.0) / 3.0 * 3.0; ];", "A: f32[1]) -> (Y: f32[1]")
    A = np.array([0.1], np.float32)
    out, _ = run_all_modes(src, {"A": A})
    assert out["Y"][0] == (A[0] + np.float32(1)) / np.float32(3) * np.float32(3)


def test_float_stored_into_int_truncates_and_bool_arithmetic():
    src = K("L^{4}_{i=0} [ C^{i32,g}_{i} = A^{f32,g}_{i} * 2.0; Y^{f32,g}_{i} = A^{f32,g}_{i} * M^{bool,g}_{i}; "
            "Z^{bool,g}_{i} = A^{f32,g}_{i} > 0 & M^{bool,g}_{i}; ];",
            "A: f32[4], M: bool[4]) -> (C: i32[4], Y: f32[4], Z: bool[4]")
    A = np.array([1.7, -1.7, 2.2, -0.4], np.float32)
    M = np.array([True, True, False, True])
    out, _ = run_all_modes(src, {"A": A, "M": M})
    assert out["C"].tolist() == [3, -3, 4, 0]
    np.testing.assert_array_equal(out["Y"], A * M)
    assert out["Z"].tolist() == [True, False, False, False]


def test_half_precision_types():
    src = K("L^{5}_{i=0} L^{3}_{j=0} [ Y^{f16,g}_{i} = Y^{f16,g}_{i} + A^{f16,g}_{i,j} * 0.1; ];\n"
            "L^{5}_{i=0} L^{3}_{j=0} [ Z^{bf16,g}_{i} = max(Z^{bf16,g}_{i}, B^{bf16,g}_{i,j} + 1.0); ];\n"
            "L^{5}_{i=0} L^{3}_{j=0} [ W^{f32,g}_{i} = W^{f32,g}_{i} + f32(A^{f16,g}_{i,j}) * f32(B^{bf16,g}_{i,j}); ];",
            "A: f16[5, 3], B: bf16[5, 3]) -> (Y: f16[5], Z: bf16[5], W: f32[5]")
    out, ins = run_all_modes(src, rtol=2e-3, atol=2e-3)  # serial f16 rounds every step
    assert out["Y"].dtype == np.float16 and out["Z"].dtype == D.BF16
    a = ins["A"].astype(np.float64)
    b = ins["B"].astype(np.float64)
    np.testing.assert_allclose(out["Y"].astype(np.float64), (a * np.float16(0.1)).sum(axis=1), rtol=2e-3)
    np.testing.assert_array_equal(out["Z"].astype(np.float64), (ins["B"] + D.BF16.type(1.0)).astype(np.float64).max(axis=1))
    np.testing.assert_allclose(out["W"], (a * b).sum(axis=1), rtol=1e-6)


def test_intrinsics_against_numpy():
    src = K("L^{7}_{i=0} [ Y^{f64,g}_{i,0} = erf(A^{f64,g}_{i}); Y^{f64,g}_{i,1} = tanh(A^{f64,g}_{i}); "
            "Y^{f64,g}_{i,2} = sigmoid(A^{f64,g}_{i}); Y^{f64,g}_{i,3} = rsqrt(abs(A^{f64,g}_{i}) + 1.0); "
            "Y^{f64,g}_{i,4} = pow(abs(A^{f64,g}_{i}), 1.5) + floor(A^{f64,g}_{i}) + ceil(A^{f64,g}_{i}); "
            "Y^{f64,g}_{i,5} = log(abs(A^{f64,g}_{i})) + sqrt(abs(A^{f64,g}_{i})) + max(A^{f64,g}_{i}, 0.5, -1.0) "
            "+ min(A^{f64,g}_{i}, 0.0); ];",
            "A: f64[7]) -> (Y: f64[7, 6]")
    A = np.array([-3.5, -1.0, -0.3, 1e-8, 0.7, 2.5, 7.0])
    out, _ = run_all_modes(src, {"A": A})
    Y = out["Y"]
    np.testing.assert_allclose(Y[:, 0], [math.erf(x) for x in A], rtol=1e-15, atol=1e-300)
    np.testing.assert_allclose(Y[:, 1], np.tanh(A), rtol=1e-15)
    np.testing.assert_allclose(Y[:, 2], 1 / (1 + np.exp(-A)), rtol=1e-15)
    np.testing.assert_allclose(Y[:, 3], 1 / np.sqrt(np.abs(A) + 1), rtol=1e-15)
    np.testing.assert_allclose(Y[:, 4], np.abs(A) ** 1.5 + np.floor(A) + np.ceil(A), rtol=1e-15)
    np.testing.assert_allclose(Y[:, 5], np.log(np.abs(A)) + np.sqrt(np.abs(A)) + np.maximum(A, 0.5) + np.minimum(A, 0),
                               rtol=1e-14)


def test_erf_accuracy_float32_and_float64():
    from leirc.interp.mathfns import erf

    x = np.concatenate([np.linspace(-7, 7, 20001), [0.0, -0.0, 1e-30, np.inf, -np.inf]])
    ref = np.array([math.erf(v) for v in x])
    rel = np.abs(erf(x) - ref) / np.maximum(np.abs(ref), 1e-300)
    assert rel.max() < 2e-15
    rel32 = np.abs(erf(x, precise=False) - ref) / np.maximum(np.abs(ref), 1e-300)
    assert rel32.max() < 2e-9
    assert np.isnan(erf(np.array([np.nan])))[0]


def test_floor_division_and_modulo_of_floats_and_negative_ints():
    src = K("L^{4}_{i=0} [ Y^{f32,g}_{i} = A^{f32,g}_{i} // 2.0 + A^{f32,g}_{i}%2.0; Z^{i64,g}_{i} = (i - 2) // 3 + (i - 2)%3; ];",
            "A: f32[4]) -> (Y: f32[4], Z: i64[4]")
    A = np.array([-3.5, -1.0, 2.5, 5.0], np.float32)
    out, _ = run_all_modes(src, {"A": A})
    np.testing.assert_array_equal(out["Y"], A // 2 + A % 2)
    i = np.arange(4)
    np.testing.assert_array_equal(out["Z"], (i - 2) // 3 + (i - 2) % 3)


def test_overflow_to_inf_is_a_value():
    src = K("L^{2}_{i=0} [ Y^{f32,g}_{i} = exp(A^{f32,g}_{i}); ];", "A: f32[2]) -> (Y: f32[2]")
    out, _ = run_all_modes(src, {"A": np.array([100.0, 1.0], np.float32)})
    assert np.isinf(out["Y"][0]) and out["Y"][1] == np.exp(np.float32(1))


# ---------------------------------------------------------------------------
# errors and inputs


def test_bad_inputs_and_program_errors():
    src = K("L^{4}_{i=0} [ Y^{f32,g}_{i} = A^{f32,g}_{i}; ];", "A: f32[4]) -> (Y: f32[4]")
    r = check_source(src)
    with pytest.raises(InterpError, match="missing input 'A'"):
        run(r, {})
    with pytest.raises(InterpError, match="shape"):
        run(r, {"A": np.zeros(5, np.float32)})
    with pytest.raises(InterpError, match="unknown input"):
        run(r, {"A": np.zeros(4, np.float32), "Q": np.zeros(1)})
    assert run(r, {"A": np.arange(4)})["Y"].dtype == np.float32  # ints convert
    with pytest.raises(InterpError, match="E012"):
        check_source(K("L^{4}_{i=0} [ Y^{f32,g}_{i} = A^{f32,g}_{q}; ];", "A: f32[4]) -> (Y: f32[4]"))


def test_random_inputs_deterministic_and_distributions():
    src = K("L^{1000}_{i=0} [ Y^{f32,g}_{i} = A^{f32,g}_{i} + f32(N^{i32,g}_{i}) + f32(U^{u8,g}_{i}) * f32(M^{bool,g}_{i}) "
            "+ S^{f64,g}; ];", "A: f32[1000], N: i32[1000], U: u8[1000], M: bool[1000], S: f64) -> (Y: f32[1000]")
    k = check_source(src).kernel
    a = random_inputs(k, 3, "uniform")
    b = random_inputs(k, 3, "uniform")
    for n in a:
        np.testing.assert_array_equal(a[n], b[n])
        assert a[n].dtype == D.np_dtype(k.param(n).dtype)
        assert a[n].shape == tuple(k.param(n).shape)
    assert a["S"].shape == ()
    assert not np.array_equal(random_inputs(k, 4, "uniform")["A"], a["A"])
    assert 0 <= a["A"].min() and a["A"].max() < 1
    assert 0.3 < a["M"].mean() < 0.7
    n = random_inputs(k, 3, "normal")["A"]
    assert n.min() < -1 and 0.8 < n.std() < 1.2
    s = random_inputs(k, 3, "signed")["A"]
    assert -1 <= s.min() < -0.5 and 0.5 < s.max() < 1
    assert 500 < random_inputs(k, 3, "large")["A"].std() < 2000
    assert 5e-4 < random_inputs(k, 3, "small")["A"].std() < 2e-3
    assert random_inputs(k, 3, "signed")["N"].min() < 0 <= random_inputs(k, 3, "uniform")["N"].min()
    with pytest.raises(ValueError):
        random_inputs(k, 0, "cauchy")


def test_index_inputs_are_in_range():
    src = K("L^{64}_{i=0} [ Y^{f32,g}_{i} = A^{f32,g}_{i, L^{i64,g}_{i}} + W^{f32,g}_{L^{i64,g}_{i} + 2}; ];",
            "A: f32[64, 10], L: i64[64], W: f32[9]) -> (Y: f32[64]")
    k = check_source(src).kernel
    assert index_ranges(k) == {"L": (0, 7)}
    for seed in range(3):
        for dist in ("uniform", "normal", "signed"):
            ins = random_inputs(k, seed, dist)
            assert 0 <= ins["L"].min() and ins["L"].max() < 7
            run(check_source(src), ins)  # never out of range


def test_plan_modes():
    r = check_source(K("L^{4}_{i=0} L^{5}_{j=0} L^{6}_{k=0} [ C^{f32,g}_{i,j} = C^{f32,g}_{i,j} + A^{f32,g}_{i,k}*B^{f32,g}_{k,j}; ];",
                       "A: f32[4, 6], B: f32[6, 5]) -> (C: f32[4, 5]"))
    assert describe_plan(r).split("\n") == ["L^{4}_{i}: vec", "  L^{5}_{j}: vec", "    L^{6}_{k}: rvec"]


def test_integer_accumulator_of_float_values_truncates_every_step():
    # X (i32) = X + e (f32): the f32 sum is truncated at every step, which does not
    # reassociate, so the reduction loop iterates
    src = K("L^{3}_{i=0} L^{4}_{j=0} [ Y^{i32,g}_{i} = Y^{i32,g}_{i} + A^{f32,g}_{i,j}; ];", "A: f32[3, 4]) -> (Y: i32[3]")
    A = np.full((3, 4), 0.75, np.float32)
    out, _ = run_all_modes(src, {"A": A})
    assert out["Y"].tolist() == [0, 0, 0]
    assert "L^{4}_{j}: iter" in describe_plan(check_source(src))
    src = K("L^{3}_{i=0} L^{4}_{j=0} [ Y^{i64,g}_{i} = Y^{i64,g}_{i} + N^{i32,g}_{i,j}; ];", "N: i32[3, 4]) -> (Y: i64[3]")
    N = np.arange(12, dtype=np.int32).reshape(3, 4)
    out, _ = run_all_modes(src, {"N": N})
    assert out["Y"].tolist() == N.sum(axis=1).tolist()
    assert "L^{4}_{j}: rvec" in describe_plan(check_source(src))


# ---------------------------------------------------------------------------
# randomized programs: loop orders, fusion, loop kinds -- the three modes must agree

_STMTS = [
    # (loop vars, statement text, tensors it reads that must be written earlier)
    ("ijk", "T1^{f32,g}_{i,j} = T1^{f32,g}_{i,j} + A^{f32,g}_{i,j,k}*B^{f32,g}_{j,k}", ()),
    ("ijk", "T2^{f32,g}_{j} = max(T2^{f32,g}_{j}, A^{f32,g}_{i,j,k})", ()),
    ("ijk", "T3^{f32,g}_{i,j,k} = A^{f32,g}_{i,j,k} - B^{f32,g}_{j,k}", ()),
    ("ij", "T4^{f32,g}_{i,j} = if_then_else(j >= 1, T4^{f32,g}_{i,j-1}, 0.0) + A^{f32,g}_{i,j,0}", ()),
    ("ik", "T5^{f32,g}_{k} = T5^{f32,g}_{k} + V^{f32,g}_{k} * i", ()),
    ("ij", "U1^{f32,g}_{i,j} = T1^{f32,g}_{i,j} * 2.0 + T2^{f32,g}_{j}", ("T1", "T2")),
    ("ijk", "U2^{f32,g}_{i} = U2^{f32,g}_{i} + T3^{f32,g}_{i,j,k} * T3^{f32,g}_{i,4-j,5-k}", ("T3",)),
    ("ik", "U3^{f32,g}_{k,i} = if_then_else(k < 5, T5^{f32,g}_{k+1}, -inf) + T4^{f32,g}_{i,4}", ("T4", "T5")),
    ("ij", "U4^{f32,g}_{i,j} = U4^{f32,g}_{i,j} * A^{f32,g}_{i,j,1}", ()),
    ("ijk", "U5^{f32,g}_{i*5+j} = min(U5^{f32,g}_{i*5+j}, A^{f32,g}_{i,j,k} + T2^{f32,g}_{j})", ("T2",)),
]
_EXT = {"i": 4, "j": 5, "k": 6}


def _random_program(rng) -> str:
    order = list(range(len(_STMTS)))
    rng.shuffle(order)
    written: set = set()
    chosen = []
    for s in order:
        vars_, text, needs = _STMTS[s]
        if all(n in written for n in needs) and rng.random() < 0.8:
            chosen.append((vars_, text))
            written.add(text.split("^")[0])
    items = []
    n = 0
    while n < len(chosen):
        vars_, text = chosen[n]
        body = [text]
        # fuse the next statement into this nest when it has the same loops
        if n + 1 < len(chosen) and chosen[n + 1][0] == vars_ and rng.random() < 0.5:
            body.append(chosen[n + 1][1])
            n += 1
        n += 1
        vs = list(vars_)
        rng.shuffle(vs)
        heads = "".join(f"{rng.choice('LLLU')}^{{{_EXT[v]}}}_{{{v}=0}}" for v in vs)
        items.append(heads + "[" + "".join(b + ";" for b in body) + "];")
    items.append("O^{f32,g} = 1.0;")
    return ("\\kernel r(A: f32[4, 5, 6], B: f32[5, 6], V: f32[6]) -> (O: f32[]) {\n  "
            + "\n  ".join(items) + "\n}\n")


@pytest.mark.parametrize("seed", range(40))
def test_random_programs_agree_across_modes(seed):
    import random

    src = _random_program(random.Random(seed))
    from leirc.lang.checker import check_text

    cf = check_text(src)
    assert cf.ok, (src, [d.message for d in cf.diagnostics if d.is_error])
    out, _ = run_all_modes(src, seed=seed, dist="normal", rtol=1e-5, atol=1e-5)
    assert out["O"] == 1.0
