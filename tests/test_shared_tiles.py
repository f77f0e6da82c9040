"""CUDA shared-memory GEMM tiles with cooperative loads (issue #12).

* E048: a ``local`` tile allocated outside the thread loops that use it is legal when each
  thread axis owns one of its dimensions (subscripted by that thread loop's index alone,
  the same dimension in every access): each element then belongs to one thread.
* The shared form -- a serial ``ko`` loop inside the kernel around cooperative load nests
  and the compute nest -- lowers to one CUDA kernel with ``__shared__`` tiles, barriers and
  a per-thread accumulator of ``tm*tn`` registers, and verifies on llvm.
* ``shared_memory_tiling`` produces it from the -O2 CUDA GEMM form, bitwise.

No GPU here: CUDA sources are compiled with nvcc (skipped without it); the LEIR meaning does
not depend on the target, so results are verified on llvm and in the interpreter."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from strategy_harness import (
    check_docstring_example,
    check_trace_roundtrip,
    kernel_of,
    stdlib_text,
)

from leirc.lang import ast as A
from leirc.lang.checker import check_kernel, check_text
from leirc.lang.parser import parse
from leirc.lang.printer import print_kernel
from leirc.lower import NvccNotFound, build, nvcc_compile
from leirc.opt import o2, o2_cuda
from leirc.strategies import NotApplicable, Step, get, replay
from leirc.strategies.base import plan_step

NAME = "shared_memory_tiling"

NAIVE = r"""\kernel mm(A: f32[128, 64], B: f32[64, 128]) -> (C: f32[128, 128]) {
  L^{128}_{i=0} L^{128}_{j=0} L^{64}_{k=0} [ C^{f32,g}_{i,j} = C^{f32,g}_{i,j} + A^{f32,g}_{i,k}*B^{f32,g}_{k,j}; ];
}"""

#: the shared form of NAIVE written by hand: 64x64 block tiles, 16x16 threads of 4x4, kt = 16
SHARED = r"""\kernel mm(A: f32[128, 64], B: f32[64, 128]) -> (C: f32[128, 128]) {
  B^{2}_{by=0} B^{2}_{bx=0} [
    \alloc As^{f32,s}[64, 16];
    \alloc Bs^{f32,s}[16, 64];
    \alloc D^{f32,l}[16, 16, 4, 4];
    B^{16}_{ty=0} B^{16}_{tx=0} U^{4}_{i=0} U^{4}_{j=0} [ D^{f32,l}_{ty,tx,i,j} = 0.0; ];
    L^{4}_{ko=0} [
      B^{16}_{ty=0} B^{16}_{tx=0} U^{4}_{r=0} [ As^{f32,s}_{ty+16*r,tx} = A^{f32,g}_{by*64+ty+16*r,ko*16+tx}; ];
      B^{16}_{ty=0} B^{16}_{tx=0} U^{4}_{r=0} [ Bs^{f32,s}_{ty,tx+16*r} = B^{f32,g}_{ko*16+ty,bx*64+tx+16*r}; ];
      B^{16}_{ty=0} B^{16}_{tx=0} L^{16}_{ki=0} U^{4}_{i=0} U^{4}_{j=0} [
        D^{f32,l}_{ty,tx,i,j} = D^{f32,l}_{ty,tx,i,j} + As^{f32,s}_{ty*4+i,ki}*Bs^{f32,s}_{ki,tx*4+j};
      ];
    ];
    B^{16}_{ty=0} B^{16}_{tx=0} U^{4}_{i=0} U^{4}_{j=0} [ C^{f32,g}_{by*64+ty*4+i,bx*64+tx*4+j} = D^{f32,l}_{ty,tx,i,j}; ];
  ];
}"""


def diags(src: str) -> list:
    return check_text(src, "t.leir").diagnostics


def errors(src: str) -> list[str]:
    return [d.code for d in diags(src) if d.is_error]


def cuda_of(k: A.Kernel):
    res = check_kernel(k)
    assert res.ok, [f"{d.code} {d.message}" for d in res.diagnostics]
    return build(res, "cuda")


def nvcc_ok(source: str) -> None:
    try:
        ok, log = nvcc_compile(source, "sm_90")
    except NvccNotFound:
        pytest.skip("nvcc is not installed")
    assert ok, log


# -- E048: per-thread partitions of a local tile ----------------------------------------


def test_the_shared_form_checks():
    assert errors(SHARED) == []


def _tile_kernel(*accesses: str) -> str:
    """A block loop allocating ``D^{f32,l}[4, 8]``, then one nest per access text."""
    nests = "".join(f"B^{{4}}_{{ty=0}} B^{{8}}_{{tx=0}} [ {a} ];" for a in accesses)
    return (r"\kernel k(A: f32[4, 8]) -> (C: f32[4, 8]) { B^{2}_{bx=0} [ \alloc D^{f32,l}[4, 8]; "
            + nests + " ]; }")


GOOD_WRITE = "D^{f32,l}_{ty,tx} = A^{f32,g}_{ty,tx};"
GOOD_READ = "C^{f32,g}_{ty,tx} = D^{f32,l}_{ty,tx} + D^{f32,l}_{ty,tx};"


def test_a_partitioned_tile_checks():
    assert errors(_tile_kernel(GOOD_WRITE, GOOD_READ)) == []


@pytest.mark.parametrize("read, why", [
    # a thread index missing from one access: thread tx would read another thread's element
    ("C^{f32,g}_{ty,tx} = D^{f32,l}_{ty,0};", "must be the thread index 'tx'"),
    # the two thread axes swap dimensions between the accesses
    ("C^{f32,g}_{ty,tx} = D^{f32,l}_{tx%4,ty};", "must be the thread index"),
    # a thread index with an offset, or a coefficient: not the loop index itself
    ("C^{f32,g}_{ty,tx} = D^{f32,l}_{ty,(tx+1)%8};", "must be the thread index 'tx'"),
    ("C^{f32,g}_{ty,tx} = D^{f32,l}_{ty,tx//2*2};", "must be the thread index 'tx'"),
])
def test_e048_when_an_element_is_not_owned_by_one_thread(read, why):
    ds = [d for d in diags(_tile_kernel(GOOD_WRITE, read)) if d.code == "E048"]
    assert len(ds) == 1, diags(_tile_kernel(GOOD_WRITE, read))
    assert why in ds[0].message and "allocate it inside the thread loop" in ds[0].notes[0]
    src = _tile_kernel(GOOD_WRITE, read)
    assert (ds[0].span.line, ds[0].span.col) == (1, src.index(read) + read.index("D^{f32,l}") + 1)


def test_e048_first_access_without_its_own_dimensions():
    # the first access has no subscript that is the thread index itself (coefficient 2)
    ds = [d for d in diags(_tile_kernel("D^{f32,l}_{ty,tx//2*2} = A^{f32,g}_{ty,tx};")) if d.code == "E048"]
    assert len(ds) == 1 and "no subscript is the thread index 'tx' itself" in ds[0].message


def test_e048_two_thread_axes_in_one_dimension():
    # dimension 0 belongs to threadIdx.y in the first nest and to threadIdx.x in the second
    src = (r"\kernel k(A: f32[4, 4]) -> (C: f32[4, 4]) { B^{2}_{bx=0} [ \alloc D^{f32,l}[4]; "
           r"B^{4}_{ty=0} [ D^{f32,l}_{ty} = A^{f32,g}_{ty,0}; ]; "
           r"B^{4}_{tx=0} [ C^{f32,g}_{0,tx} = D^{f32,l}_{tx}; ]; ]; }")
    ds = [d for d in diags(src) if d.code == "E048"]
    assert len(ds) == 1 and "different thread axes" in ds[0].message
    # under ty and tx, a one-dimensional tile has no dimension left for the second axis
    src2 = (r"\kernel k(A: f32[4, 4]) -> (C: f32[4, 4]) { B^{2}_{bx=0} [ \alloc D^{f32,l}[4]; "
            r"B^{4}_{ty=0} B^{4}_{tx=0} [ D^{f32,l}_{ty} = A^{f32,g}_{ty,tx}; ]; ]; }")
    ds2 = [d for d in diags(src2) if d.code == "E048"]
    assert len(ds2) == 1 and "no subscript is the thread index 'tx'" in ds2[0].message


def test_e048_access_outside_the_thread_loops():
    src = (r"\kernel k(A: f32[4, 8]) -> (C: f32[4, 8]) { B^{2}_{bx=0} [ \alloc D^{f32,l}[4, 8]; "
           r"B^{4}_{ty=0} B^{8}_{tx=0} [ D^{f32,l}_{ty,tx} = A^{f32,g}_{ty,tx}; ]; "
           r"L^{4}_{i=0} L^{8}_{j=0} [ C^{f32,g}_{i,j} = D^{f32,l}_{i,j}; ]; ]; }")
    ds = [d for d in diags(src) if d.code == "E048"]
    assert len(ds) == 1 and "outside the thread loops" in ds[0].message


def test_a_local_tile_inside_the_thread_loops_is_unaffected():
    src = (r"\kernel k(A: f32[4, 8]) -> (C: f32[4, 8]) { B^{4}_{ty=0} B^{8}_{tx=0} [ \alloc D^{f32,l}[2]; "
           r"L^{2}_{i=0} [ D^{f32,l}_{i} = A^{f32,g}_{ty,tx}*2.0; ]; C^{f32,g}_{ty,tx} = D^{f32,l}_{0} + D^{f32,l}_{1}; ]; }")
    assert errors(src) == []


def test_the_shared_form_runs_in_the_interpreter_and_on_llvm_like_the_naive_matmul():
    from leirc.verify import verify

    interp = verify(SHARED, NAIVE, target="interp", seeds=(0,), dists=("normal",))
    assert interp.equal, interp.failures
    llvm = verify(SHARED, NAIVE, seeds=(0,), dists=("normal",), probes=())
    assert llvm.equal, llvm.failures


# -- lowering ---------------------------------------------------------------------------


def test_the_shared_form_is_one_cuda_kernel_with_shared_tiles_and_barriers():
    b = cuda_of(kernel_of(SHARED))
    src = b.cuda_source
    assert not [d for d in b.diagnostics if d.code == "W051"]
    assert len(re.findall(r'extern "C" __global__ void [^;{]*\{', src)) == 1
    assert re.search(r"__shared__ [^;]*As\w*\[1024\]", src) and re.search(r"__shared__ [^;]*Bs\w*\[1024\]", src)
    assert re.search(r"float D\w*\[16\];", src), "the accumulator is compacted to one thread's 4x4 slice"
    assert "__shared__" not in next(l for l in src.splitlines() if re.search(r"float D\w*\[", l))
    # the serial ko loop is inside the kernel, its loads separated from the reads by barriers
    body = src[src.index("for (int ko = 0; ko < 4; ++ko)"):]
    first_sync, compute = body.index("__syncthreads()"), body.index("for (int ki = 0; ki < 16; ++ki)")
    assert first_sync < compute and body.index("__syncthreads()", compute) > compute
    assert "for (int by" not in b.tir_text and "blockIdx.y" in src
    nvcc_ok(src)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_the_shared_form_compiles_to_an_sm_90_object(tmp_path):
    cu = tmp_path / "k.cu"
    cu.write_text(cuda_of(kernel_of(SHARED)).cuda_source)
    out = subprocess.run(["nvcc", "-arch=sm_90", "-c", "-diag-suppress=177", str(cu), "-o", str(tmp_path / "k.o")],
                         check=False, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr


# -- the strategy -----------------------------------------------------------------------

#: NAIVE in the -O2 CUDA GEMM form (block loops, thread loops, cache_write accumulator)
O2_FORM_GT = o2_cuda.GpuTiles(by=16, bx=16, tm=4, tn=4, kt=0)


def o2_form(src: str = NAIVE, gt=O2_FORM_GT) -> A.Kernel:
    return o2.optimize(kernel_of(src), "cuda", gpu=gt).kernel


def test_docstring_example():
    check_docstring_example(NAME)


def test_sites_and_kt_domain():
    from leirc.strategies.base import Context

    k = o2_form()
    sites = get(NAME).sites(Context(k, check_kernel(k)))
    assert len(sites) == 1 and sites[0].fixed == {"loop": "N0.byio"}
    # every divisor of 64 whose A tile (64 x kt) the 16 x 16 threads cover evenly and that fits 48 KB
    assert sites[0].domains["kt"] == [16, 32]


def test_the_o2_form_becomes_the_shared_form():
    k = o2_form()
    rw = plan_step(k, Step.make(NAME, loop="N0.byio", kt=16))
    assert rw.numerics == "bitwise"
    root = rw.kernel.body[0]
    blk = root.body[0]
    allocs = [it for it in blk.body if isinstance(it, A.Alloc)]
    assert [(a.scope, a.shape) for a in allocs] == [("s", (64, 16)), ("s", (16, 64)), ("l", (16, 16, 4, 4))]
    ko = next(it for it in blk.body if isinstance(it, A.Loop) and it.kind == "L")
    assert (ko.var, ko.extent) == (rw.created["ko"].split(".")[1], 4) and len(ko.body) == 2
    loads, compute = ko.body
    assert (loads.kind, compute.kind) == ("B", "B")
    # one nest of the block's threads loads both tiles: one barrier before the compute
    assert [st.target.scope for st in (n for n in A.walk(loads) if isinstance(n, A.Assign))] == ["s", "s"]


def test_numerics_are_bitwise_against_the_input():
    """Same products added in the same k order per output: bit-identical under the literal
    semantics (the interpreter loop by loop), within tolerance in the verifier's default mode."""
    import numpy as np

    from leirc.interp.core import Interpreter
    from leirc.verify import verify

    small = NAIVE.replace("128", "16").replace("64", "24")  # 16x24 @ 24x16
    k = o2_form(small, o2_cuda.GpuTiles(by=2, bx=2, tm=2, tn=2, kt=0))
    new = plan_step(k, Step.make(NAME, loop="N0.byio", kt=4)).kernel
    rng = np.random.default_rng(0)
    x = {p.name: rng.standard_normal(p.shape).astype(np.float32) for p in k.inputs}
    before = Interpreter(check_kernel(k), vectorize=False).run(x, check_uninit=True)["C"]
    after = Interpreter(check_kernel(new), vectorize=False).run(x, check_uninit=True)["C"]
    assert before.tobytes() == after.tobytes()
    rep = verify(print_kernel(o2_form()), NAIVE, target="interp", seeds=(0,), dists=("normal",))
    assert rep.equal, rep.failures


def test_round_trip_through_the_printer_and_the_parser():
    k = o2_form()
    new = plan_step(k, Step.make(NAME, loop="N0.byio", kt=16)).kernel
    again = parse(print_kernel(new)).module.kernels[0]
    assert print_kernel(again) == print_kernel(new) and check_kernel(again).ok
    steps = o2.optimize(kernel_of(NAIVE), "cuda").steps
    assert steps[-1].name == NAME
    check_trace_roundtrip(NAIVE, steps)


def _na(k: A.Kernel, **args) -> str:
    with pytest.raises(NotApplicable) as e:
        plan_step(k, Step.make(NAME, **args))
    return e.value.reason


def test_rejects_a_loop_not_bound_to_blocks():
    assert "not bound to a block axis" in _na(kernel_of(NAIVE), loop="N0.i", kt=16)
    k = o2_form()
    assert "not bound to a block axis" in _na(k, loop="N0.tyioa", kt=16)


def test_rejects_a_nest_without_a_reduction():
    src = r"""\kernel k(A: f32[64, 64]) -> (C: f32[64, 64]) {
      B^{4}_{by=0} B^{4}_{bx=0} B^{4}_{ty=0} B^{4}_{tx=0} [ \alloc D^{f32,l}[4, 4];
        L^{4}_{i=0} L^{4}_{j=0} [ D^{f32,l}_{i,j} = A^{f32,g}_{by*16+ty*4+i,bx*16+tx*4+j}; ];
        L^{4}_{i=0} L^{4}_{j=0} [ C^{f32,g}_{by*16+ty*4+i,bx*16+tx*4+j} = D^{f32,l}_{i,j}; ];
      ];
    }"""
    assert "no reduction over loop" in _na(kernel_of(src), loop="N0.by", kt=2)


def test_rejects_a_tile_that_does_not_divide():
    k = o2_form()
    assert "does not divide" in _na(k, loop="N0.byio", kt=5)
    # 8 columns of A per step cannot be spread over 16 threads along x, one element each
    assert "cannot be loaded" in _na(k, loop="N0.byio", kt=8)


def test_rejects_a_footprint_beyond_48_kb():
    src = NAIVE.replace("64, 128]", "1024, 128]").replace("[128, 64]", "[128, 1024]").replace("L^{64}_{k=0}", "L^{1024}_{k=0}")
    k = o2_form(src)
    assert "more than the 49152 bytes" in _na(k, loop="N0.byio", kt=128)


# -- -O2 --------------------------------------------------------------------------------


def test_o2_matmul_square_uses_shared_tiles():
    res = o2.optimize(kernel_of(stdlib_text("matmul_square")), "cuda")
    assert res.steps[-1] == Step.make(NAME, loop="N0.byio", kt=o2_cuda.GpuTiles().kt)
    b = cuda_of(res.kernel)
    src = b.cuda_source
    assert not [d for d in b.diagnostics if d.code == "W051"]
    shared = re.findall(r"__shared__ [^;]*\[(\d+)\];", src)
    assert shared == ["1024", "1024"] and src.count("__syncthreads()") >= 2
    assert re.search(r"float D\w*\[16\];", src)
    nvcc_ok(src)


def test_kt_is_a_launch_argument():
    res = o2.optimize(kernel_of(NAIVE), "cuda", gpu=o2_cuda.GpuTiles(kt=32))
    assert res.steps[-1] == Step.make(NAME, loop="N0.byio", kt=32)
    off = o2.optimize(kernel_of(NAIVE), "cuda", gpu=o2_cuda.GpuTiles(kt=0))
    assert all(s.name != NAME for s in off.steps)
    # a kt the tile does not allow leaves the register-tiled form, with the reason logged
    bad = o2.optimize(kernel_of(NAIVE), "cuda", gpu=o2_cuda.GpuTiles(kt=8))
    assert all(s.name != NAME for s in bad.steps) and any("cannot be loaded" in line for line in bad.log)
    assert replay(kernel_of(NAIVE), res.steps) == res.kernel


def test_block_only_subscripts_stay_as_written():
    # sdpa's batch and head loops are fused over blockIdx.z: Q_{bzh//4, bzh%4, ...} is not
    # affine, but those terms are fixed per block and are copied into the load unchanged
    res = o2.optimize(kernel_of(stdlib_text("sdpa")), "cuda")
    assert [s.name for s in res.steps].count(NAME) == 2
    loads = [st for st in (n for n in A.walk(res.kernel) if isinstance(n, A.Assign)) if st.target.scope == "s"]
    assert {st.value.name for st in loads} == {"Q", "K", "P", "V"}
    q = next(st.value for st in loads if st.value.name == "Q")
    assert print_kernel(res.kernel).count("Q^{f32,g}_{bzh//4,bzh%4,") == 1 and len(q.indices) == 4
