"""-O1: the heuristic pipeline applies only checked strategy steps, records a replayable
trace, and its result verifies against the original (llvm), also through `leirc build`."""

from __future__ import annotations

import json

import pytest

from conftest import STDLIB
from leirc.cli.main import main
from leirc.lang.checker import check_kernel
from leirc.lang.parser import parse
from leirc.opt.o1 import optimize
from leirc.strategies import replay, trace_from_json, trace_to_json

KERNELS = sorted(p.stem for p in STDLIB.glob("*.leir"))


def _kernel(name):
    return parse((STDLIB / f"{name}.leir").read_text()).module.kernels[0]


@pytest.mark.parametrize("target", ["llvm", "cuda"])
@pytest.mark.parametrize("name", KERNELS)
def test_o1_result_checks_and_trace_replays(name, target):
    k = _kernel(name)
    res = optimize(k, target)
    assert check_kernel(res.kernel).ok
    assert replay(_kernel(name), trace_from_json(trace_to_json(res.steps))) == res.kernel
    if target == "llvm":
        assert any(s.name == "loop_parallelization" for s in res.steps), res.log
        assert not any(lp.kind == "B" for lp in _loops(res.kernel))
    else:
        assert not any(lp.kind in ("P", "V") for lp in _loops(res.kernel))


def _loops(k):
    from leirc.lang import ast as A

    return [n for n in A.walk(k) if isinstance(n, A.Loop)]


def test_o1_matmul_is_reordered_parallel_and_vectorized():
    res = optimize(_kernel("matmul_square"), "llvm")
    assert [str(s) for s in res.steps] == [
        "loop_reorder(loop=N0.i, order=i,k,j)", "loop_parallelization(loop=N0.i)",
        "loop_split(factor=16, loop=N0.j)", "loop_vectorization(loop=N0.j)"]


def test_o1_cuda_binds_spatial_loops_only():
    res = optimize(_kernel("gemv"), "cuda")
    assert all("axis=tx" not in str(s) or "loop=N0.k" not in str(s) for s in res.steps)
    assert any(s.name == "loop_binding" for s in res.steps)


@pytest.mark.parametrize("name", ["relu", "softmax", "mean_reduce_dim1"])
def test_build_O1_verifies_and_writes_trace(name, tmp_path):
    assert main(["build", str(STDLIB / f"{name}.leir"), "-O1", "-o", str(tmp_path)]) == 0
    trace = json.loads((tmp_path / f"{name}.trace.json").read_text())
    assert trace["pipeline"] == "-O1" and trace["steps"]
    assert (tmp_path / f"{name}.so").exists()
    assert check_kernel(parse((tmp_path / f"{name}.O1.leir").read_text()).module.kernels[0]).ok


def test_build_rejects_unknown_level(tmp_path, capsys):
    assert main(["build", str(STDLIB / "relu.leir"), "-O3", "-o", str(tmp_path)]) == 2


def test_o1_cuda_binds_the_inner_part_through_forwarded_handles():
    """The split names both parts; binding the outer one renames it (``io`` -> ``bxio``),
    and the inner part's handle is carried over that rewrite (Rewrite.forward) before it is
    bound to threadIdx.x: the thread loop is the split's inner loop, directly inside the
    block loop, with the split's factor as extent."""
    from leirc.strategies.rewrite import iter_loops

    res = optimize(_kernel("relu"), "cuda")
    names = [s.name for s in res.steps]
    assert names[-3:] == ["loop_split", "loop_binding", "loop_binding"], res.log
    split, bx, tx = res.steps[-3:]
    assert bx.kwargs["axis"] == "bx" and tx.kwargs["axis"] == "tx"
    factor = split.kwargs["factor"]
    loops = {ref: (lp, path) for ref, lp, path in iter_loops(res.kernel)}
    (tx_loop, tx_path), = [(lp, p) for lp, p in loops.values() if lp.kind == "B" and lp.var.startswith("tx")]
    (bx_loop, bx_path), = [(lp, p) for lp, p in loops.values() if lp.kind == "B" and lp.var.startswith("bx")]
    assert tx_path == bx_path + (0,) and tx_loop.extent == factor
    assert replay(_kernel("relu"), res.steps) == res.kernel


def test_o1_steps_name_loops_by_reference_not_spelling():
    """Every loop argument of every -O1 step is a reference that exists in the kernel the
    step is applied to (handles or references computed from paths, never rebuilt from an
    index name)."""
    from leirc.strategies import apply_step
    from leirc.strategies.rewrite import iter_loops

    for name in ("matmul_square", "softmax", "layernorm"):
        for target in ("llvm", "cuda"):
            k = _kernel(name)
            for step in optimize(k, target).steps:
                if "loop" in step.kwargs:
                    assert step.kwargs["loop"] in {ref for ref, _, _ in iter_loops(k)}, (name, target, step)
                k = apply_step(k, step)


def _text_kernel(src):
    return parse(src).module.kernels[0]


def test_o1_keeps_a_streaming_innermost_loop():
    """Every access of the pooling window's innermost loop ``q`` is invariant in it or reads it
    at unit stride (``Pd_{n,c,i+p,j+q}``): -O1 does not move ``j`` inside ``p, q``, which would
    load and store ``C`` once per window element instead of keeping it in a register."""
    res = optimize(_kernel("maxpool2d"), "llvm")
    assert not any(s.name == "loop_reorder" for s in res.steps), res.log
    pool = res.kernel.body[1]
    assert [lp.var for lp in _chain(pool)] == ["n", "c", "i", "j", "p", "q"]
    window = _text_kernel("""\\kernel w(X: f32[64, 67]) -> (C: f32[64, 64]) {
  L^{64}_{i=0} L^{64}_{j=0} L^{4}_{q=0} [
    C^{f32,g}_{i,j} = max(C^{f32,g}_{i,j}, X^{f32,g}_{i,j+q});
  ];
}""")
    assert not any(s.name == "loop_reorder" for s in optimize(window, "llvm").steps)


STRIDED = """\\kernel w(X: f32[64, 80], W: f32[8, 64]) -> (C: f32[64, 64]) {
  L^{64}_{i=0} L^{64}_{j=0} L^{8}_{q=0} [
    C^{f32,g}_{i,j} = VALUE;
  ];
}"""


@pytest.mark.parametrize("value", ["C^{f32,g}_{i,j} + X^{f32,g}_{i,q}*W^{f32,g}_{q,j}",
                                   "max(C^{f32,g}_{i,j}, X^{f32,g}_{i,j+2*q})"])
def test_o1_still_reorders_a_strided_innermost_loop(value):
    """The negative of the streaming rule: ``W_{q,j}`` is strided along the innermost ``q``, and
    so is ``X_{i,j+2*q}`` (coefficient 2): ``j`` still moves innermost."""
    res = optimize(_text_kernel(STRIDED.replace("VALUE", value)), "llvm")
    assert any(s.name == "loop_reorder" for s in res.steps), res.log
    assert _chain(res.kernel.body[0])[-1].var == "j"


def _chain(item):
    from leirc.strategies.rewrite import nest_chain

    return nest_chain(item)


def test_o1_vectorizes_f32_erf_but_not_f64_erf():
    """In f32 the lowering computes ``erf`` inline (vector code): gelu's row loop is split and
    vectorized. In f64 TVM emits a ``V`` loop calling ``erf`` as a scalar loop: -O1 neither
    splits nor vectorizes it (the loop is still parallel)."""
    res = optimize(_kernel("gelu"), "llvm")
    assert any(lp.kind == "V" for lp in _loops(res.kernel)), res.log
    f64 = _text_kernel("""\\kernel e(X: f64[256, 24576]) -> (Y: f64[256, 24576]) {
  L^{256}_{i=0} L^{24576}_{j=0} [
    Y^{f64,g}_{i,j} = 0.5*X^{f64,g}_{i,j}*(1.0 + erf(X^{f64,g}_{i,j}/sqrt(2.0)));
  ];
}""")
    res = optimize(f64, "llvm")
    assert [s.name for s in res.steps] == ["loop_parallelization"], res.log
    assert not any(lp.kind == "V" for lp in _loops(res.kernel))
