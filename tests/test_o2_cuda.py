"""-O2 on CUDA (leirc.opt.o2_cuda.optimize_cuda): per nest family a launch shape that keeps the
device busy, every result one kernel per nest with no host loop, verified against the
original program (the LEIR meaning does not depend on the target; B loops run serially in
the interpreter and on llvm). No GPU here: the CUDA source is compiled with
``nvcc -arch=sm_90 -ptx`` (skipped without nvcc)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from leirc.lang import ast as A
from leirc.lang.checker import check_text
from leirc.lang.parser import parse
from leirc.lang.printer import print_kernel
from leirc.lower import NvccNotFound, build, nvcc_compile
from leirc.opt import o2, o2_cuda
from leirc.strategies import NotApplicable, replay

STDLIB = Path(__file__).resolve().parents[1] / "stdlib"
ALL = sorted(p.stem for p in STDLIB.glob("*.leir"))


def kernel_of(src: str) -> A.Kernel:
    return parse(src).module.kernels[0]


def stdlib(name: str) -> A.Kernel:
    return kernel_of((STDLIB / f"{name}.leir").read_text())


def cuda_build(k: A.Kernel):
    cf = check_text(print_kernel(k), "<o2>")
    assert cf.results and cf.results[0].ok, [f"{d.code} {d.message}" for d in cf.diagnostics]
    b = build(cf.results[0], "cuda")
    try:
        ok, log = nvcc_compile(b.cuda_source, "sm_90")
    except NvccNotFound:
        ok, log = True, ""
    assert ok, log
    return b


def launches(cuda_source: str) -> int:
    return len(re.findall(r'extern "C" __global__ void [^;{]*\{', cuda_source))


def host_loops(tir_text: str) -> list[str]:
    """Loops of the PrimFunc body that are not thread bindings: on CUDA those run on the
    host, around kernel launches (statement-level lines at the function's indentation)."""
    body = tir_text.split("def ", 1)[1].splitlines()[1:]
    return [l.strip() for l in body if re.match(r"    for ", l) and "T.thread_binding" not in l]


def bound_chain(item: A.Loop) -> list[tuple[str, str, int]]:
    out = []
    while isinstance(item, A.Loop):
        out.append((item.kind, item.var, item.extent))
        item = item.body[0] if len(item.body) == 1 else None
    return out


def test_softmax_is_one_launch_of_one_block_per_row():
    k = stdlib("softmax")  # 256 rows of 24576
    res = o2.optimize(k, "cuda")
    (root,) = res.kernel.body
    assert (root.kind, root.var[:2], root.extent) == ("B", "bx", 256)
    # max, sum and normalisation: each 256 threads over the row, each thread 96 elements
    phases = [bound_chain(p) for p in root.body]
    assert [[(c[0], c[1][:2], c[2]) for c in ph] for ph in phases] == [[("B", "tx", 256), ("L", "jo", 96)]] * 3
    # the row's max and sum live in the block's shared memory
    scopes = {a.name: a.scope for a in A.walk(root) if isinstance(a, A.Access)}
    assert scopes["Rmax"] == scopes["Rsum"] == "s"
    b = cuda_build(res.kernel)
    # the Done-when line: no W051, no host loop
    assert not [d for d in b.diagnostics if d.code == "W051"]
    assert host_loops(b.tir_text) == []
    assert launches(b.cuda_source) == 1
    assert b.tir_text.count("tvm_thread_allreduce") == 2 and "__shfl_down_sync" in b.cuda_source
    assert re.search(r"__shared__ [^;]*Rmax[^;]*\[1\]", b.cuda_source)
    assert b.cuda_source.count("__syncthreads()") >= 4  # each phase publishes its result before the next reads it
    assert replay(k, res.steps) == res.kernel


def test_few_rows_keep_separate_launches():
    # 16 samples: one block per sample would leave most of the device idle in the
    # element-wise phase, which gets its own launch over every element instead
    res = o2.optimize(stdlib("layernorm"), "cuda")
    assert len(res.kernel.body) == 5 and not any("outer_fusion" in s.name for s in res.steps)
    last = bound_chain(res.kernel.body[-1])
    assert [c[0] for c in last] == ["B"] * len(last) and math.prod(c[2] for c in last) == 16 * 16 * 64 * 64


def test_outer_fusion_docstring_and_negatives():
    from strategy_harness import check_docstring_example

    from leirc.strategies import Step
    from leirc.strategies.base import plan_step

    check_docstring_example("outer_fusion")

    def na(src):
        with pytest.raises(NotApplicable) as e:
            plan_step(kernel_of(src), Step.make("outer_fusion", nest=0))
        return e.value.reason

    # the second nest reads another row's result: fusing would read it before it is written
    assert "different iterations" in na(r"""\kernel k(A:f32[4,8])->(C:f32[4,8]){
      B^{4}_{bx=0}B^{8}_{tx=0}[D^{f32,g}_{bx}=D^{f32,g}_{bx}+A^{f32,g}_{bx,tx};];
      B^{4}_{bxa=0}B^{8}_{tx=0}[C^{f32,g}_{bxa,tx}=A^{f32,g}_{bxa,tx}/D^{f32,g}_{3-bxa};];}""")
    assert "differ" in na(r"""\kernel k(A:f32[4,8])->(C:f32[4,8]){
      L^{4}_{i=0}L^{8}_{j=0}[D^{f32,g}_{i,j}=A^{f32,g}_{i,j};];
      L^{2}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i,j}=D^{f32,g}_{i,j};];
      L^{2}_{i=2}L^{8}_{j=0}[C^{f32,g}_{i,j}=D^{f32,g}_{i,j};];}""")
    assert "different axes" in na(r"""\kernel k(A:f32[4,8])->(C:f32[4,8]){
      B^{4}_{bx=0}B^{8}_{tx=0}[D^{f32,g}_{bx,tx}=A^{f32,g}_{bx,tx};];
      B^{4}_{by=0}B^{8}_{tx=0}[C^{f32,g}_{by,tx}=D^{f32,g}_{by,tx};];}""")
    # serial loops fuse too, where the nests meet within an iteration
    rw = plan_step(kernel_of(r"""\kernel k(A:f32[4,8])->(C:f32[4,8]){
      L^{4}_{i=0}L^{8}_{j=0}[D^{f32,g}_{i,j}=A^{f32,g}_{i,j}*2.0;];
      L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i,j}=D^{f32,g}_{i,7-j};];}"""), Step.make("outer_fusion", nest=0))
    assert len(rw.kernel.body) == 1 and len(rw.kernel.body[0].body) == 2


def test_one_launch_per_nest_whose_axes_are_all_bound():
    """A nest with every spatial loop bound is one kernel; a serial loop around bound loops
    (what -O1 leaves for the softmax's last nest) is a host loop launching once per row."""
    all_bound = cuda_build(kernel_of(r"""\kernel k(X: f32[256, 24576]) -> (Y: f32[256, 24576]) {
      B^{256}_{by=0} B^{96}_{bx=0} B^{256}_{tx=0} [ Y^{f32,g}_{by,bx*256+tx} = exp(X^{f32,g}_{by,bx*256+tx}); ];
    }"""))
    assert launches(all_bound.cuda_source) == 1 and host_loops(all_bound.tir_text) == []
    host = cuda_build(kernel_of(r"""\kernel k(X: f32[256, 24576]) -> (Y: f32[256, 24576]) {
      L^{256}_{i=0} B^{96}_{bx=0} B^{256}_{tx=0} [ Y^{f32,g}_{i,bx*256+tx} = exp(X^{f32,g}_{i,bx*256+tx}); ];
    }"""))
    assert launches(host.cuda_source) == 1 and host_loops(host.tir_text) == ["for i in range(256):"]


def test_gemm_gets_block_and_register_tiles():
    k = stdlib("matmul_standard")  # 256 x 1024 @ 1024 x 512
    res = o2.optimize(k, "cuda")
    root = res.kernel.body[0]
    assert [(h[0], h[1][:2], h[2]) for h in bound_chain(root)] == [("B", "by", 4), ("B", "bx", 8)]
    block = root.body[0].body
    # the block's 64x16 slices of A and 16x64 of B in shared memory, each thread's 4x4
    # accumulator (local, indexed by the thread) initialised, then 1024/16 serial steps
    allocs = [(a.scope, a.shape) for a in block if isinstance(a, A.Alloc)]
    assert allocs == [("s", (64, 16)), ("s", (16, 64)), ("l", (16, 16, 4, 4))]
    init, ko, back = block[3:]
    assert [(c[0], c[1][:2], c[2]) for c in bound_chain(init)] == [("B", "ty", 16), ("B", "tx", 16), ("U", "i", 4), ("U", "j", 4)]
    assert (ko.kind, ko.extent, len(ko.body)) == ("L", 64, 2)  # the loads, then the compute
    assert [(c[0], c[2]) for c in bound_chain(ko.body[1])] == [("B", 16), ("B", 16), ("L", 16), ("U", 4), ("U", 4)]
    assert bound_chain(back)[:2] == bound_chain(init)[:2]
    b = cuda_build(res.kernel)
    assert not b.diagnostics and host_loops(b.tir_text) == [] and launches(b.cuda_source) == 1
    assert re.search(r"float \w+\[16\];", b.cuda_source)  # the thread's 4x4 accumulator, a local array
    assert len(re.findall(r"__shared__ [^;]*\[1024\];", b.cuda_source)) == 2 and "__syncthreads()" in b.cuda_source
    assert replay(k, res.steps) == res.kernel


def test_launch_shape_is_an_argument():
    k = stdlib("gemv")
    res = o2.optimize(k, "cuda", gpu=o2_cuda.GpuTiles(threads=128))
    assert [(c[0], c[2]) for c in bound_chain(res.kernel.body[0])] == [("B", 128), ("B", 128), ("L", 512)]
    mm = o2.optimize(stdlib("matmul_standard"), "cuda", gpu=o2_cuda.GpuTiles(by=8, bx=32, tm=2, tn=2))
    assert [c[2] for c in bound_chain(mm.kernel.body[0])[:4]] == [16, 8, 8, 32]


def test_many_outputs_with_a_strided_reduction_get_a_thread_each():
    # sum over the middle dimension: threads over d read consecutive addresses, threads
    # over r would not; there are enough outputs to fill the device
    k = kernel_of(r"""\kernel k(X: f32[256, 16384]) -> (S: f32[16384]) {
      L^{256}_{r=0} L^{16384}_{d=0} [ S^{f32,g}_{d} = S^{f32,g}_{d} + X^{f32,g}_{r,d}; ];
    }""")
    res = o2.optimize(k, "cuda")
    chain = bound_chain(res.kernel.body[0])
    assert [(c[0], c[1][:2], c[2]) for c in chain] == [("B", "bx", 64), ("B", "tx", 256), ("L", "r", 256)]
    assert "tvm_thread_allreduce" not in cuda_build(res.kernel).tir_text


def test_reductions_are_not_fused_into_element_wise_chains():
    from leirc.lang.checker import check_kernel

    res = o2.optimize(stdlib("matmul_gelu_softmax"), "cuda")
    r = check_kernel(res.kernel)
    groups: dict = {}  # statements that share their innermost loop
    for si in r.stmts:
        if si.loops:
            groups.setdefault(id(si.loops[-1]), set()).add(si.kind)
    for kinds in groups.values():
        assert not ("reduce" in kinds and kinds - {"reduce"}), kinds
    assert any("fuse into a reduction nest" in line for line in res.log)


SMALL = {
    "softmax": r"""\kernel softmax(X: f32[8, 512]) -> (Y: f32[8, 512]) {
      L^{8}_{i=0} L^{512}_{j=0} [ M^{f32,g}_{i} = max(M^{f32,g}_{i}, X^{f32,g}_{i,j}); ];
      L^{8}_{i=0} L^{512}_{j=0} [ E^{f32,g}_{i} = E^{f32,g}_{i} + exp(X^{f32,g}_{i,j} - M^{f32,g}_{i}); ];
      L^{8}_{i=0} L^{512}_{j=0} [ Y^{f32,g}_{i,j} = exp(X^{f32,g}_{i,j} - M^{f32,g}_{i})/E^{f32,g}_{i}; ];
    }""",
    "matmul": r"""\kernel mm(A: f32[64, 32], B: f32[32, 128]) -> (C: f32[64, 128]) {
      L^{64}_{i=0} L^{128}_{j=0} L^{32}_{k=0} [ C^{f32,g}_{i,j} = C^{f32,g}_{i,j} + A^{f32,g}_{i,k}*B^{f32,g}_{k,j}; ];
    }""",
    "norm": r"""\kernel norm(X: f32[4, 8, 64]) -> (Y: f32[4, 8, 64]) {
      L^{4}_{n=0} L^{8}_{c=0} L^{64}_{w=0} [ S^{f32,g}_{n} = S^{f32,g}_{n} + X^{f32,g}_{n,c,w}; ];
      L^{4}_{n=0} L^{8}_{c=0} L^{64}_{w=0} [ Y^{f32,g}_{n,c,w} = X^{f32,g}_{n,c,w} - S^{f32,g}_{n}/512.0; ];
    }""",
}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_small_results_verify_in_the_interpreter(name):
    from leirc.verify import verify

    src = SMALL[name]
    res = o2.optimize(kernel_of(src), "cuda", gpu=o2_cuda.GpuTiles(threads=64, by=4, bx=8, tm=4, tn=4))
    assert any(isinstance(n, A.Loop) and n.kind == "B" for n in A.walk(res.kernel))
    b = cuda_build(res.kernel)
    assert not b.diagnostics and host_loops(b.tir_text) == []
    rep = verify(print_kernel(res.kernel), src, target="interp", seeds=(0, 1), dists=("normal",))
    assert rep.equal, rep.failures


@pytest.mark.parametrize("name", ALL)
def test_every_stdlib_kernel_builds_for_cuda_and_compiles_with_nvcc(name):
    res = o2.optimize(stdlib(name), "cuda")
    b = cuda_build(res.kernel)
    assert not [d for d in b.diagnostics if d.code == "W051"], [d.message for d in b.diagnostics]
    assert host_loops(b.tir_text) == []
    assert launches(b.cuda_source) <= len(res.kernel.body)


@pytest.mark.slow
@pytest.mark.parametrize("name", ALL)
def test_every_stdlib_result_verifies_on_llvm(name):
    from leirc.verify import verify

    res = o2.optimize(stdlib(name), "cuda")
    src = (STDLIB / f"{name}.leir").read_text()
    rep = verify(print_kernel(res.kernel), src, seeds=(0,), dists=("normal",), probes=())
    assert rep.equal, rep.failures
