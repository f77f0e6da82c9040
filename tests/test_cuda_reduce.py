"""Cross-thread reductions on CUDA (leirc/lower/tir.py, ``AllReduce``).

A reduction whose outermost reduction loop is thread-bound lowers through TVM's thread
allreduce (warp shuffles, then shared memory) instead of a single-thread launch (W051).
No GPU here: the TIR and the CUDA source are inspected and compiled with
``nvcc -arch=sm_90 -ptx`` (skipped without nvcc). The LEIR meaning does not depend on the
mapping: the bound forms are verified against the serial programs with the interpreter."""

from __future__ import annotations

import re

import pytest

from leirc.lang.checker import check_text
from leirc.lower import NvccNotFound, build, nvcc_compile


def cuda(src: str):
    cf = check_text(src, "<test>")
    errs = [d for d in cf.diagnostics if d.is_error]
    assert not errs, "\n".join(f"{d.code} {d.message}" for d in errs)
    b = build(cf.results[0], "cuda")
    try:
        ok, log = nvcc_compile(b.cuda_source)
    except NvccNotFound:
        ok, log = True, ""
    assert ok, log
    return b


def kernels(src: str) -> list[str]:
    """Bodies of the __global__ functions."""
    out = []
    for m in re.finditer(r'extern "C" __global__ void [^;{]*\{', src):
        depth, i = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(src[i], 0)
            i += 1
        out.append(src[m.start():i])
    return out


ROWMAX = r"""\kernel rowmax(X: f32[64, 4096]) -> (M: f32[64]) {
  B^{64}_{bx=0} B^{256}_{tx=0} L^{16}_{jo=0} [ M^{f32,g}_{bx} = max(M^{f32,g}_{bx}, X^{f32,g}_{bx,jo*256+tx}); ];
}"""


def test_row_reduction_uses_the_thread_allreduce():
    b = cuda(ROWMAX)
    assert not b.diagnostics  # no W051
    assert "tvm_thread_allreduce" in b.tir_text
    (k,) = kernels(b.cuda_source)
    assert "__launch_bounds__(256)" in k and "__shfl_down_sync" in k and "__syncthreads()" in k
    # every thread folds its 16 elements serially, thread 0 stores the row's result
    assert "for (int jo = 0; jo < 16; ++jo)" in k
    assert re.search(r"if \(\(\(int\)threadIdx\.x\) == 0\) \{\s*M_ptr\[", k)
    # the max combines partial results NaN-propagating, like the serial loop
    assert "2143289344" in k.split("__shfl_down_sync", 1)[1]


def test_scalar_sum_needs_no_init_launch():
    b = cuda(r"""\kernel k(A: f32[256]) -> (S: f32[]) {
      B^{256}_{tx=0} [ S^{f32,g} = S^{f32,g} + A^{f32,g}_{tx}; ];
    }""")
    assert not b.diagnostics
    (k,) = kernels(b.cuda_source)  # the identity store would have been a launch of its own
    assert "__launch_bounds__(256)" in k and "__shfl_down_sync" in k


def test_threads_beyond_the_loop_contribute_the_identity():
    # the kernel launches 256 threads for the second loop; the reduction runs over 128
    b = cuda(r"""\kernel k(X: f32[16, 1024]) -> (S: f32[16], Y: f32[16, 256]) {
      B^{16}_{bx=0} [
        B^{128}_{tx=0} L^{8}_{jo=0} [ S^{f32,g}_{bx} = S^{f32,g}_{bx} + X^{f32,g}_{bx,jo*128+tx}; ];
        B^{256}_{tx=0} [ Y^{f32,g}_{bx,tx} = X^{f32,g}_{bx,tx} * S^{f32,g}_{bx}; ];
      ];
    }""")
    assert not b.diagnostics
    assert re.search(r"tvm_thread_allreduce\(T\.uint32\(1\), \w+, tx < 128", b.tir_text)  # the guard is the allreduce's condition
    (k,) = kernels(b.cuda_source)
    assert "< 128) ? " in k  # threads 128..255 feed the identity instead of skipping the barrier
    assert k.count("__syncthreads()") >= 2  # the result is published before the second loop reads it


def test_spatial_thread_axis_reduces_its_own_elements():
    b = cuda(r"""\kernel k(X: f32[8, 32, 16]) -> (S: f32[8, 16]) {
      B^{8}_{bx=0} B^{32}_{tx=0} B^{16}_{ty=0} [ S^{f32,g}_{bx,ty} = S^{f32,g}_{bx,ty} + X^{f32,g}_{bx,tx,ty}; ];
    }""")
    assert not b.diagnostics
    call = re.search(r"tvm_thread_allreduce\(([^\n]*)\)", b.tir_text).group(1)
    assert call.rstrip().endswith(", tx")  # only tx is reduced; ty tells the groups apart


@pytest.mark.parametrize("dtype,op", [("i32", "+"), ("f64", "-"), ("u32", "*"), ("i64", "min")])
def test_integer_and_other_reductions(dtype, op):
    upd = {"+": "S + A", "-": "S - A", "*": "S * A", "min": "min(S, A)"}[op]
    upd = upd.replace("S", f"S^{{{dtype},g}}").replace("A", f"A^{{{dtype},g}}_{{k*128+tx}}")
    b = cuda(rf"""\kernel k(A: {dtype}[512]) -> (S: {dtype}[]) {{
      B^{{128}}_{{tx=0}} U^{{4}}_{{k=0}} [ S^{{{dtype},g}} = {upd}; ];
    }}""")
    assert not b.diagnostics and "tvm_thread_allreduce" in b.tir_text


def test_one_block_softmax_has_three_allreduce_phases():
    b = cuda(r"""\kernel softmax(X: f32[32, 2048]) -> (Y: f32[32, 2048]) {
      B^{32}_{bx=0} [
        B^{256}_{tx=0} L^{8}_{jo=0} [ M^{f32,s}_{bx} = max(M^{f32,s}_{bx}, X^{f32,g}_{bx,jo*256+tx}); ];
        B^{256}_{tx=0} L^{8}_{jo=0} [ E^{f32,s}_{bx} = E^{f32,s}_{bx} + exp(X^{f32,g}_{bx,jo*256+tx} - M^{f32,s}_{bx}); ];
        B^{256}_{tx=0} L^{8}_{jo=0} [ Y^{f32,g}_{bx,jo*256+tx} = exp(X^{f32,g}_{bx,jo*256+tx} - M^{f32,s}_{bx})/E^{f32,s}_{bx}; ];
      ];
    }""")
    assert not b.diagnostics
    assert b.tir_text.count("tvm_thread_allreduce") == 2
    (k,) = kernels(b.cuda_source)  # max, sum and normalisation in one launch, M and E in shared memory
    assert re.search(r"__shared__ [^;]*M[^;]*\[1\]", k) and re.search(r"__shared__ [^;]*E[^;]*\[1\]", k)


@pytest.mark.parametrize("src,why", [
    (r"""\kernel k(A: f32[256]) -> (S: f32[]) { B^{256}_{bx=0} [ S^{f32,g} = S^{f32,g} + A^{f32,g}_{bx}; ]; }""",
     "block-bound loop 'bx'"),
    (r"""\kernel k(A: f32[4, 256]) -> (S: f32[]) { L^{4}_{k=0} B^{256}_{tx=0} [ S^{f32,g} = S^{f32,g} + A^{f32,g}_{k,tx}; ]; }""",
     "host loop"),
    (r"""\kernel k(A: f16[256]) -> (S: f16[]) { B^{256}_{tx=0} [ S^{f16,g} = S^{f16,g} + A^{f16,g}_{tx}; ]; }""",
     "of f16"),
    (r"""\kernel k(A: f32[4, 256]) -> (S: f32[]) { B^{4}_{by=0} L^{256}_{k=0} B^{4}_{tx=0} [ S^{f32,g} = S^{f32,g} + A^{f32,g}_{by,k+tx-tx}; ]; }""",
     "block-bound loop 'by'"),
    (r"""\kernel k(A: f32[64, 8]) -> (S: f32[8]) { L^{64}_{r=0} B^{8}_{tx=0} [ S^{f32,g}_{tx} = S^{f32,g}_{tx} + A^{f32,g}_{r,tx}; ]; }""",
     None),
])
def test_other_forms_are_serialized_and_say_why(src, why):
    b = cuda(src)
    if why is None:  # not a cross-thread reduction at all (tx is spatial): plain threads
        assert not b.diagnostics
        return
    (d,) = b.diagnostics
    assert d.code == "W051" and why in d.message
    assert "tvm_thread_allreduce" not in b.tir_text


def test_bound_reductions_mean_what_the_serial_ones_mean():
    """The mapping changes nothing in LEIR: the bound softmax verifies against the serial one."""
    from leirc.verify import verify

    serial = r"""\kernel softmax(X: f32[8, 512]) -> (Y: f32[8, 512]) {
      L^{8}_{i=0} L^{512}_{j=0} [ M^{f32,g}_{i} = max(M^{f32,g}_{i}, X^{f32,g}_{i,j}); ];
      L^{8}_{i=0} L^{512}_{j=0} [ E^{f32,g}_{i} = E^{f32,g}_{i} + exp(X^{f32,g}_{i,j} - M^{f32,g}_{i}); ];
      L^{8}_{i=0} L^{512}_{j=0} [ Y^{f32,g}_{i,j} = exp(X^{f32,g}_{i,j} - M^{f32,g}_{i})/E^{f32,g}_{i}; ];
    }"""
    bound = r"""\kernel softmax(X: f32[8, 512]) -> (Y: f32[8, 512]) {
      B^{8}_{bx=0} [
        B^{128}_{tx=0} L^{4}_{jo=0} [ M^{f32,s}_{bx} = max(M^{f32,s}_{bx}, X^{f32,g}_{bx,jo*128+tx}); ];
        B^{128}_{tx=0} L^{4}_{jo=0} [ E^{f32,s}_{bx} = E^{f32,s}_{bx} + exp(X^{f32,g}_{bx,jo*128+tx} - M^{f32,s}_{bx}); ];
        B^{128}_{tx=0} L^{4}_{jo=0} [ Y^{f32,g}_{bx,jo*128+tx} = exp(X^{f32,g}_{bx,jo*128+tx} - M^{f32,s}_{bx})/E^{f32,s}_{bx}; ];
      ];
    }"""
    assert not cuda(bound).diagnostics
    rep = verify(bound, serial, target="interp", seeds=(0, 1), dists=("normal",))
    assert rep.equal, rep.failures


def test_max_with_an_integer_literal_compiles():
    # the weak literal 0 is f32(0): bound by a let it reached CUDA as a bit cast of a
    # literal (no address), which nvcc rejects (Step-TP's TripletMarginLoss)
    b = cuda(r"""\kernel k(A: f32[128]) -> (H: f32[128]) {
      B^{128}_{tx=0} [ H^{f32,g}_{tx} = max(A^{f32,g}_{tx} + 1.0, 0); ];
    }""")
    assert "&(0x0p+0f" not in b.cuda_source
