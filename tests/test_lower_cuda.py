"""CUDA lowering structure (no GPU here: the generated source is inspected and compiled
with ``nvcc -arch=sm_90 -ptx``; the nvcc part skips when nvcc is absent)."""

from __future__ import annotations

import re


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


def test_unbound_nests_run_on_the_device_in_a_single_thread_launch():
    b = cuda(r"""\kernel k(A: f32[16]) -> (S: f32[], Y: f32[16]) {
      L^{16}_{i=0} [ S^{f32,g} = S^{f32,g} + A^{f32,g}_{i}; ];
      P^{16}_{i=0} [ Y^{f32,g}_{i} = A^{f32,g}_{i}/S^{f32,g}; ];
    }""")
    ks = kernels(b.cuda_source)
    assert len(ks) == 1  # one single-thread launch for the run of unbound nests
    assert "S_ptr[0] = 0x0p+0f" in ks[0] and "for (int i" in ks[0]
    assert "(int i = 0; i < 16" in b.cuda_source


def test_bound_loops_become_thread_and_block_indices():
    b = cuda(r"""\kernel k(A: f32[8, 64, 4]) -> (Y: f32[8, 64, 4]) {
      B^{8}_{bx=0} B^{64}_{tx=0} V^{4}_{c=0} [ Y^{f32,g}_{bx,tx,c} = A^{f32,g}_{bx,tx,c}*2.0; ];
    }""")
    (k,) = kernels(b.cuda_source)
    assert "__launch_bounds__(64)" in k and "blockIdx.x" in k and "threadIdx.x" in k
    assert "float4" in k  # V^{4} on f32 is a vector load/store


def test_host_loop_around_kernels_and_nonzero_start():
    b = cuda(r"""\kernel k(A: f32[4, 64]) -> (Y: f32[4, 64]) {
      L^{4}_{g=0} B^{32}_{tx=32} [ Y^{f32,g}_{g,tx} = A^{f32,g}_{g,tx} + g; ];
      L^{4}_{g=0} B^{32}_{tx=0} [ Y^{f32,g}_{g,tx} = A^{f32,g}_{g,tx}; ];
    }""")
    ks = kernels(b.cuda_source)
    assert len(ks) == 2
    assert "+ 32" in ks[0]  # tx runs 32..63


def test_statements_outside_thread_loops_are_guarded_and_synchronized():
    b = cuda(r"""\kernel mix(A: f32[64, 32]) -> (D: f32[64, 32], S: f32[64]) {
      B^{64}_{bx=0} [
        B^{32}_{tx=0} [ W^{f32,s}_{bx,tx} = A^{f32,g}_{bx,tx}*2.0; ];
        S^{f32,g}_{bx} = W^{f32,s}_{bx,0};
        B^{16}_{tx=0} [ D^{f32,g}_{bx,tx} = W^{f32,s}_{bx,31-tx}; ];
        B^{16}_{tx=16} [ D^{f32,g}_{bx,tx} = W^{f32,s}_{bx,31-tx} + S^{f32,g}_{bx}; ];
      ];
    }""")
    (k,) = kernels(b.cuda_source)
    assert "((int)threadIdx.x) == 0" in k  # the statement outside the tx loops runs once per block
    assert "((int)threadIdx.x) < 16" in k  # shorter sibling loops are guarded
    assert k.count("__syncthreads()") >= 3
    assert re.search(r"__shared__ [^;]*W[^;]*\[32\]", k)  # compacted to one block's row
    assert not b.diagnostics


def test_local_tensor_lives_in_registers_of_its_thread():
    b = cuda(r"""\kernel k(A: f32[128, 64], C: f32[64, 48]) -> (D: f32[128, 48]) {
      B^{128}_{tx=0} L^{48}_{a=0} [
        L^{64}_{c=0} [ F^{f32,l}_{tx,a} = F^{f32,l}_{tx,a} + A^{f32,g}_{tx,c}*C^{f32,g}_{c,a}; ];
        D^{f32,g}_{tx,a} = F^{f32,l}_{tx,a};
      ];
    }""")
    (k,) = kernels(b.cuda_source)
    assert re.search(r"float F[^;]*\[48\];", k)
    assert not b.diagnostics


def test_scopes_spanning_kernels_are_demoted_with_a_warning():
    b = cuda(r"""\kernel k(A: f32[16, 32]) -> (C: f32[16, 32]) {
      B^{16}_{tx=0} L^{32}_{a=0} [ D^{f32,s}_{tx} = max(D^{f32,s}_{tx}, A^{f32,g}_{tx,a}); ];
      B^{16}_{tx=0} L^{32}_{a=0} [ C^{f32,g}_{tx,a} = A^{f32,g}_{tx,a} - D^{f32,s}_{tx}; ];
    }""")
    assert [d.code for d in b.diagnostics] == ["W050"]
    assert "__shared__" not in b.cuda_source


def test_cross_block_reduction_is_serialized_with_a_warning():
    # cross-thread reductions use the thread allreduce (tests/test_cuda_reduce.py); blocks
    # cannot combine results within a kernel: that form still runs on one thread
    b = cuda(r"""\kernel k(A: f32[256]) -> (S: f32[]) {
      B^{256}_{bx=0} [ S^{f32,g} = S^{f32,g} + A^{f32,g}_{bx}; ];
    }""")
    assert [d.code for d in b.diagnostics] == ["W051"]
    assert "(int bx = 0; bx < 256" in b.cuda_source


def test_block_level_dependence_is_serialized():
    b = cuda(r"""\kernel k(A: f32[8, 32]) -> (Y: f32[8, 32], Z: f32[8, 32]) {
      B^{32}_{tx=0} [
        B^{8}_{bx=0} [ Y^{f32,g}_{bx,tx} = A^{f32,g}_{bx,tx} + 1.0; ];
        B^{8}_{bx=0} [ Z^{f32,g}_{bx,tx} = Y^{f32,g}_{7-bx,tx}; ];
      ];
    }""")
    assert [d.code for d in b.diagnostics] == ["W051"]


def test_unroll_and_parallel_inside_kernels():
    b = cuda(r"""\kernel k(A: f32[32, 4, 8]) -> (Y: f32[32, 4, 8]) {
      B^{32}_{tx=0} U^{4}_{u=0} P^{8}_{p=0} [ Y^{f32,g}_{tx,u,p} = exp(A^{f32,g}_{tx,u,p}); ];
    }""")
    (k,) = kernels(b.cuda_source)
    assert k.count("__expf(") + k.count("expf(") >= 4  # U^{4} unrolled, P serial inside the thread
    assert "for (int p" in k


def test_every_intrinsic_and_dtype_compiles():
    cuda(r"""\kernel k(A: f32[8], D: f64[8], H: f16[8], I: i64[8], M: bool[8], C: i64[8]) -> (Y: f32[8], Z: f64[8], W: f16[8], J: i64[8]) {
      B^{8}_{tx=0} [
        Y^{f32,g}_{tx} = exp(A^{f32,g}_{tx}) + log(A^{f32,g}_{tx}) + sqrt(A^{f32,g}_{tx}) + rsqrt(A^{f32,g}_{tx})
          + abs(A^{f32,g}_{tx}) + erf(A^{f32,g}_{tx}) + tanh(A^{f32,g}_{tx}) + sigmoid(A^{f32,g}_{tx})
          + pow(A^{f32,g}_{tx}, 1.5) + A^{f32,g}_{tx}**3 + floor(A^{f32,g}_{tx}) + ceil(A^{f32,g}_{tx})
          + max(A^{f32,g}_{tx}, 0.0, -inf) + min(A^{f32,g}_{tx}, inf)
          + if_then_else(M^{bool,g}_{tx} & tx < 4, A^{f32,g}_{C^{i64,g}_{tx}}, 0.0) + tx/3 + A^{f32,g}_{tx}//0.5 + A^{f32,g}_{tx}%0.5;
        Z^{f64,g}_{tx} = erf(D^{f64,g}_{tx}) + D^{f64,g}_{tx}**D^{f64,g}_{tx} + f64(I^{i64,g}_{tx});
        W^{f16,g}_{tx} = exp(H^{f16,g}_{tx})*H^{f16,g}_{tx} + erf(H^{f16,g}_{tx});
        J^{i64,g}_{tx} = I^{i64,g}_{tx}//C^{i64,g}_{tx} + I^{i64,g}_{tx}%3 + I^{i64,g}_{tx}**2 + i64(M^{bool,g}_{tx});
      ];
    }""")


def test_oversized_local_tensor_is_demoted():
    # a single-thread launch would need 32 KiB of local memory for T: kept in global memory
    b = cuda(r"""\kernel k(A: f32[64, 128]) -> (Y: f32[64, 128]) {
      L^{64}_{i=0} L^{128}_{j=0} [ T^{f32,l}_{i,j} = A^{f32,g}_{i,j}*2.0; ];
      L^{64}_{i=0} L^{128}_{j=0} [ Y^{f32,g}_{i,j} = T^{f32,l}_{127-i%128,j} + 1.0; ];
    }""".replace("127-i%128", "63-i"))
    # the whole kernel is one single-thread launch (no B loop): W051 says so
    assert [d.code for d in b.diagnostics] == ["W050", "W051"]
    assert "bytes" in b.diagnostics[0].message


def test_vector_loop_outside_thread_loops_stays_correct():
    # V directly under a block loop whose kernel also launches threads: guarded, not vectorized
    b = cuda(r"""\kernel k(A: f32[4, 32]) -> (S: f32[4, 4], Y: f32[4, 32]) {
      B^{4}_{bx=0} [
        V^{4}_{v=0} [ S^{f32,g}_{bx,v} = A^{f32,g}_{bx,v}; ];
        B^{32}_{tx=0} [ Y^{f32,g}_{bx,tx} = A^{f32,g}_{bx,tx} + S^{f32,g}_{bx,0}; ];
      ];
    }""")
    (k,) = kernels(b.cuda_source)
    assert "((int)threadIdx.x) == 0" in k and "__syncthreads()" in k
