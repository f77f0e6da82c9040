"""-O2 (leirc.opt.o2): register blocking of GEMM-like nests, then -O1.

Every result is verified against the original program like -O1's (compiled for llvm,
against the interpreter)."""

from __future__ import annotations

from pathlib import Path

import pytest

from leirc.lang import ast as A
from leirc.lang.affine import affine
from leirc.lang.checker import check_kernel
from leirc.lang.parser import parse
from leirc.lang.printer import print_kernel
from leirc.opt import o1, o2
from leirc.strategies import replay
from strategy_harness import kernel_of

STDLIB = Path(__file__).resolve().parents[1] / "stdlib"


def stdlib(name: str) -> A.Kernel:
    return parse((STDLIB / f"{name}.leir").read_text()).module.kernels[0]


def allocs(k: A.Kernel) -> list[tuple[A.Alloc, int]]:
    """(alloc item, number of enclosing loops)"""
    out = []

    def walk(items, depth):
        for it in items:
            if isinstance(it, A.Alloc):
                out.append((it, depth))
            elif isinstance(it, A.Loop):
                walk(it.body, depth + 1)
            elif isinstance(it, A.Region):
                walk(it.body, depth)

    walk(k.body, 0)
    return out


def test_matmul_is_register_blocked():
    k = stdlib("matmul_standard")
    res = o2.optimize(k, tiles=o2.Tiles(mr=8, nr=32, lanes=16))
    [(al, depth)] = allocs(res.kernel)
    assert al.shape == (8, 32) and al.scope == "l" and depth == 2
    root = res.kernel.body[0]
    assert root.kind == "P"
    acc = root.body[0].body[1]  # the accumulation nest after the \alloc
    kinds = []
    node = acc
    while isinstance(node, A.Loop):
        kinds.append((node.var, node.kind, node.extent))
        node = node.body[0]
    assert kinds == [("k", "L", 1024), ("i", "U", 8), ("joa", "U", 2), ("j", "V", 16)]
    # the steps are the program: replaying them gives the same kernel
    assert replay(k, res.steps) == res.kernel
    assert check_kernel(res.kernel).ok


def test_tiles_are_arguments():
    res = o2.optimize(stdlib("batched_matmul"), tiles=o2.Tiles(mr=4, nr=16, lanes=8))
    [(al, _)] = allocs(res.kernel)
    assert al.shape == (4, 16)
    # a tile that divides nothing, with a remainder too large to peel, leaves the nest to -O1
    # (matmul_irregular's 741 columns are peeled: tests/strategies/test_loop_peel.py)
    odd = kernel_of(r"\kernel k(A:f32[7,48],B:f32[48,20])->(C:f32[7,20]){L^{7}_{i=0}L^{20}_{j=0}L^{48}_{k=0}"
                    r"[C^{f32,g}_{i,j}=C^{f32,g}_{i,j}+A^{f32,g}_{i,k}*B^{f32,g}_{k,j};];}")
    res = o2.optimize(odd, tiles=o2.Tiles())
    assert not allocs(res.kernel)
    assert res.kernel == o1.optimize(odd).kernel
    assert any("no register tile" in line for line in res.log)


def test_default_tiles_follow_the_vector_width():
    # host_vector_lanes reads cpuinfo *text* (leirc.target.Target.host), the flags the OS grants
    assert o2.host_vector_lanes("processor : 0\nflags : fpu sse2 avx avx2 fma\n") == 8
    assert o2.host_vector_lanes("flags : fpu sse2 avx2 avx512f\n") == 16
    assert o2.host_vector_lanes("flags : fpu sse2\n") == 4 and o2.host_vector_lanes("") == 4
    t = o2.default_tiles()
    assert t.nr == 2 * t.lanes and t.nr % t.lanes == 0


def test_only_gemm_like_nests_are_blocked():
    k = stdlib("gemv")  # one spatial index: no tile of two
    r = check_kernel(k)
    assert o2.gemm_like(k, r, 0) is None
    # a transposed operand (W_{j,k}) is not unit stride in j: not blocked (-O1 instead)
    k = stdlib("gemm_bias_relu")
    assert o2.gemm_like(k, check_kernel(k), 0) is None
    k = stdlib("conv2d")
    g = o2.gemm_like(k, check_kernel(k), 1)
    assert g is not None and (g.i, g.j, g.reductions) == ("i", "j", ["c", "p", "q"])
    # the CPU pipeline's rows: the output channels, which the input Pd_{n,c,i+p,j+q} does not use
    g = o2.gemm_like(k, check_kernel(k), 1, reuse_row=True)
    assert (g.batch, g.i, g.j) == (["n", "i"], "o", "j")


def test_a_reduction_that_reuses_no_operand_is_blocked_only_while_it_fits_in_l2():
    # S_{n,h,w} += X_{n,c,h,w}**2: X reads both tile indices, so the tile reuses no load
    def rms(n):
        return kernel_of(rf"\kernel k(X: f32[{n}, 64, 64, 64]) -> (S: f32[{n}, 64, 64]) {{"
                         r"L^{%d}_{n=0} L^{64}_{h=0} L^{64}_{w=0} L^{64}_{c=0} [" % n +
                         r"S^{f32,g}_{n,h,w} = S^{f32,g}_{n,h,w} + X^{f32,g}_{n,c,h,w}**2; ]; }")

    tiles = o2.Tiles(mr=8, nr=32, lanes=16)
    big, small = rms(16), rms(1)  # 16 MiB and 1 MiB of X
    g = o2.gemm_like(big, check_kernel(big), 0, reuse_row=True)
    assert g is not None and not o2.tile_reuses_an_operand(big, g)
    res = o2.optimize(big, tiles=tiles)
    assert not allocs(res.kernel) and res.kernel == o1.optimize(big).kernel
    assert any("streamed from memory" in line for line in res.log)
    assert allocs(o2.optimize(small, tiles=tiles).kernel)  # in L2 the registers still pay
    # a GEMM reuses both operands across the tile whatever its size
    mm = stdlib("matmul_standard")
    assert o2.tile_reuses_an_operand(mm, o2.gemm_like(mm, check_kernel(mm), 0, reuse_row=True))


def test_a_convolution_is_blocked_over_output_channels():
    k = stdlib("pointwise_conv2d")
    res = o2.optimize(k, tiles=o2.Tiles(mr=8, nr=32, lanes=16))
    [(al, _)] = allocs(res.kernel)
    assert al.shape == (8, 32)
    st = next(n for n in A.walk(res.kernel) if isinstance(n, A.Assign) and n.target.name == al.name
              and isinstance(n.value, A.BinOp))
    w = next(n for n in A.walk(st.value) if isinstance(n, A.Access) and n.name == "W")
    # one broadcast weight per row of the tile: W's first subscript runs over the rows
    assert "o" in {v.name for v in A.walk(w.indices[0]) if isinstance(v, A.Var)}
    assert replay(k, res.steps) == res.kernel


def test_a_transposed_operand_is_packed_then_blocked():
    k = stdlib("gemm_bias_relu")  # X_{i,k} * W_{j,k}: j is not W's last dimension
    r = check_kernel(k)
    g = o2.gemm_like(k, r, 0, unit_stride=False, reuse_row=True)
    assert o2.transposed_operands(k, r, g) == [("W", 0)]
    res = o2.optimize(k, tiles=o2.Tiles(mr=8, nr=32, lanes=16))
    packs = [s for s in res.steps if s.name == "pack_input"]
    assert [(s.kwargs["tensor"], s.kwargs["dim"], s.kwargs["factor"]) for s in packs] == [("W", 0, 32)]
    [(al, _)] = allocs(res.kernel)
    assert al.shape == (8, 32)
    assert replay(k, res.steps) == res.kernel and check_kernel(res.kernel).ok
    # an operand indexed by both tile rows and columns along a non-last dimension cannot be packed
    src = (r"\kernel k(A:f32[16,32],B:f32[32,16,8])->(C:f32[16,32]){L^{16}_{i=0}L^{32}_{j=0}L^{8}_{k=0}"
           r"[C^{f32,g}_{i,j}=C^{f32,g}_{i,j}+A^{f32,g}_{i,j}*B^{f32,g}_{j,i,k};];}")
    k = parse(src).module.kernels[0]
    r = check_kernel(k)
    assert o2.transposed_operands(k, r, o2.gemm_like(k, r, 0, unit_stride=False, reuse_row=True)) is None


#: a 3x3 convolution whose output width (6) has no vector tile of 8
NARROW_CONV = (r"\kernel k(X:f32[2,4,8,8],W:f32[32,4,3,3])->(C:f32[2,32,6,6]){L^{2}_{n=0}L^{32}_{o=0}L^{6}_{h=0}"
               r"L^{6}_{w=0}L^{4}_{c=0}L^{3}_{p=0}L^{3}_{q=0}[C^{f32,g}_{n,o,h,w}=C^{f32,g}_{n,o,h,w}"
               r"+X^{f32,g}_{n,c,h+p,w+q}*W^{f32,g}_{o,c,p,q};];}")


def test_a_convolution_too_narrow_for_a_vector_is_blocked_with_the_vector_over_output_channels():
    from leirc.verify import verify

    k = parse(NARROW_CONV).module.kernels[0]
    r = check_kernel(k)
    assert o2.gemm_like(k, r, 0, reuse_row=True).j == "w"  # the first choice, which no tile of 8 divides
    g = o2.gemm_like(k, r, 0, unit_stride=False, reuse_row=True, j="o")
    assert (g.i, g.j) == ("w", "o") and o2.transposed_operands(k, r, g) == [("W", 0)]
    res = o2.optimize(k, tiles=o2.Tiles(mr=4, nr=16, lanes=8))
    assert [(s.kwargs["tensor"], s.kwargs["dim"]) for s in res.steps if s.name == "pack_input"] == [("W", 0)]
    [cw] = [s for s in res.steps if s.name == "cache_write"]
    assert cw.kwargs["layout"] == "loops"
    [(al, _)] = allocs(res.kernel)
    assert al.shape == (3, 16)  # rows over w (mr 4 does not divide 6: 3), the vector over o last
    vec = [l for l in A.walk(res.kernel) if isinstance(l, A.Loop) and l.kind == "V" and l.var == "o"]
    acc = [n for l in vec for n in A.walk(l) if isinstance(n, A.Access) and n.name == al.name]
    # the tile is read and written at unit stride along the vector loop
    assert acc and all(affine(a.indices[-1])[0].get("o") == 1 and affine(a.indices[0])[0].get("o") is None
                       for a in acc)
    assert replay(k, res.steps) == res.kernel
    rep = verify(print_kernel(res.kernel), NARROW_CONV, target="interp", seeds=(0, 1), dists=("normal",))
    assert rep.equal, rep.failures


def test_output_channels_that_fit_one_vector_are_one_tile_with_only_the_rows_tiled():
    from leirc.verify import verify

    # 8 output channels: no tile below the extent is a multiple of the vector width
    src = NARROW_CONV.replace("32,4,3,3", "8,4,3,3").replace("2,32,6,6", "2,8,6,6").replace("L^{32}_{o=0}", "L^{8}_{o=0}")
    k = parse(src).module.kernels[0]
    assert o2.fit_tile(8, 16, 8) is None
    res = o2.optimize(k, tiles=o2.Tiles(mr=4, nr=16, lanes=8))
    assert not any(s.name == "loop_tiling" for s in res.steps)
    [split] = [s for s in res.steps if s.name == "loop_split" and s.kwargs["loop"].endswith(".w")]
    assert split.kwargs["factor"] == 3
    [(al, _)] = allocs(res.kernel)
    assert al.shape == (3, 8)  # all 8 channels in one vector, rows over w
    assert any(isinstance(l, A.Loop) and l.kind == "V" and l.var == "o" and l.extent == 8 for l in A.walk(res.kernel))
    assert replay(k, res.steps) == res.kernel
    rep = verify(print_kernel(res.kernel), src, target="interp", seeds=(0, 1), dists=("normal",))
    assert rep.equal, rep.failures
    # a half vector is the narrowest tile (4 of 8 lanes): 2 channels stay with -O1
    src2 = src.replace("8,4,3,3", "2,4,3,3").replace("2,8,6,6", "2,2,6,6").replace("L^{8}_{o=0}", "L^{2}_{o=0}")
    assert not allocs(o2.optimize(parse(src2).module.kernels[0], tiles=o2.Tiles(mr=4, nr=16, lanes=8)).kernel)


def test_a_column_reduction_runs_blocks_of_columns_in_parallel_not_one_region_per_row():
    from leirc.verify import verify

    # a batch norm's mean: the sum over the 64 rows of each of 256 columns
    src = (r"\kernel k(M: f32[64, 256]) -> (S: f32[256]) {L^{256}_{i=0} L^{64}_{j=0} ["
           r"S^{f32,g}_{i} = S^{f32,g}_{i} + M^{f32,g}_{j,i}; ]; }")
    k = parse(src).module.kernels[0]
    before = o1.optimize(k).kernel.body[0]
    assert (before.kind, nest_kinds(before)) == ("L", ["L", "P"])  # -O1: a parallel region per row
    res = o2.optimize(k, tiles=o2.Tiles(mr=8, nr=32, lanes=16))
    nest = res.kernel.body[0]
    assert [(l.kind, l.extent) for l in nest_loops(nest)] == [("P", 16), ("L", 64), ("V", 16)]
    assert replay(k, res.steps) == res.kernel
    rep = verify(print_kernel(res.kernel), src, target="interp", seeds=(0, 1), dists=("normal",))
    assert rep.equal, rep.failures
    # with a spatial loop outside (rows of a 3-d tensor, 4 MiB: not register-blocked either),
    # -O1's parallel outer loop stays
    src3 = (r"\kernel k(M: f32[64, 64, 256]) -> (S: f32[64, 256]) {L^{64}_{n=0} L^{256}_{i=0} L^{64}_{j=0} ["
            r"S^{f32,g}_{n,i} = S^{f32,g}_{n,i} + M^{f32,g}_{n,j,i}; ]; }")
    k3 = parse(src3).module.kernels[0]
    assert o2.optimize(k3).kernel == o1.optimize(k3).kernel


def test_an_intrinsic_fused_with_a_reduction_along_its_loop_is_split_off_and_vectorized():
    from leirc.verify import verify

    # GELU then a sum over each row of 30: -O1 fuses the two, and the sum keeps j serial
    src = (r"\kernel k(X: f32[16, 30]) -> (S: f32[16]) {"
           r"L^{16}_{i=0} L^{30}_{j=0} [ G^{f32,g}_{i,j} = 0.5*X^{f32,g}_{i,j}*(1.0 + erf(X^{f32,g}_{i,j}*0.7071067811865476)); ];"
           r"L^{16}_{i=0} L^{30}_{j=0} [ S^{f32,g}_{i} = S^{f32,g}_{i} + G^{f32,g}_{i,j}; ]; }")
    k = parse(src).module.kernels[0]
    fused = o1.optimize(k).kernel
    assert len(fused.body) == 1 and not any(l.kind == "V" for l in A.walk(fused) if isinstance(l, A.Loop))
    res = o2.optimize(k, tiles=o2.Tiles(mr=8, nr=32, lanes=16))
    assert [s.name for s in res.steps][-2:] == ["operator_fission", "loop_vectorization"]
    first, second = res.kernel.body
    assert nest_loops(first)[-1].kind == "V" and nest_loops(first)[-1].extent == 30
    assert any(isinstance(n, A.Call) and n.func == "erf" for n in A.walk(first))
    assert all(l.kind != "V" for l in nest_loops(second))  # the sum reads G back, serially
    assert replay(k, res.steps) == res.kernel
    rep = verify(print_kernel(res.kernel), src, target="interp", seeds=(0, 1), dists=("normal",))
    assert rep.equal, rep.failures
    # without an intrinsic the fused loop (one pass) stays as -O1 left it
    cheap = src.replace("erf(X^{f32,g}_{i,j}*0.7071067811865476)", "X^{f32,g}_{i,j}")
    kc = parse(cheap).module.kernels[0]
    assert not any(s.name == "operator_fission" for s in o2.optimize(kc).steps)


def nest_loops(loop: A.Loop) -> list:
    out = []
    while isinstance(loop, A.Loop):
        out.append(loop)
        loop = loop.body[0] if len(loop.body) == 1 else None
    return out


def nest_kinds(loop: A.Loop) -> list:
    return [l.kind for l in nest_loops(loop)]


def test_a_blocked_nest_runs_its_first_loop_of_more_than_one_iteration_in_parallel():
    k = stdlib("conv_transpose2d")  # a batch of 1
    res = o2.optimize(k, tiles=o2.Tiles(mr=8, nr=32, lanes=16))
    hot = res.kernel.body[-1]
    assert (hot.var, hot.extent, hot.kind) == ("n", 1, "L") and (hot.body[0].kind, hot.body[0].extent) == ("P", 66)


def test_the_tile_loop_order_is_an_argument():
    k = stdlib("matmul_standard")
    by_panel = o2.optimize(k, tiles=o2.Tiles(mr=8, nr=32, lanes=16, outer="j")).kernel
    by_rows = o2.optimize(k, tiles=o2.Tiles(mr=8, nr=32, lanes=16, outer="i")).kernel
    assert [by_panel.body[0].var, by_panel.body[0].body[0].var] == ["jo", "io"]
    assert [by_rows.body[0].var, by_rows.body[0].body[0].var] == ["io", "jo"]


def test_small_gemm_verifies_in_the_interpreter():
    from leirc.verify import verify

    src = (r"\kernel k(A:f32[16,8],B:f32[8,32])->(C:f32[16,32]){L^{16}_{i=0}L^{32}_{j=0}L^{8}_{k=0}"
           r"[C^{f32,g}_{i,j}=C^{f32,g}_{i,j}+A^{f32,g}_{i,k}*B^{f32,g}_{k,j};];}")
    k = parse(src).module.kernels[0]
    res = o2.optimize(k, tiles=o2.Tiles(mr=4, nr=16, lanes=8))
    assert allocs(res.kernel)
    rep = verify(print_kernel(res.kernel), src, target="interp", seeds=(0, 1), dists=("normal",))
    assert rep.equal, rep.failures


#: the stdlib kernels -O2 changes beyond -O1 (checked by test_o2_changes_exactly_these)
BLOCKED = ["batched_matmul", "conv2d", "conv2d_strided_dilated", "conv_transpose2d", "gemm_bias_relu",
           "matmul_gelu_softmax", "matmul_irregular", "matmul_square", "matmul_standard", "matmul_transposed_b", "matmul_upper_triangular",
           "pointwise_conv2d", "sdpa"]
PARTIAL = ["gemv", "groupnorm", "layernorm", "log_softmax", "mse_loss", "softmax"]
ALL = sorted(p.stem for p in STDLIB.glob("*.leir"))


def test_o2_changes_exactly_these():
    blocked, partial = [], []
    for name in ALL:
        res = o2.optimize(stdlib(name))
        names = {s.name for s in res.steps}
        if "cache_write" in names:
            blocked.append(name)
        elif "vectorized_partial_sums" in names:
            partial.append(name)
    assert blocked == BLOCKED and partial == PARTIAL


def test_partial_sums_of_a_gemv():
    k = stdlib("gemv")
    res = o2.optimize(k, tiles=o2.Tiles(mr=8, nr=32, lanes=16))
    [(al, depth)] = allocs(res.kernel)
    assert al.shape == (16,) and depth == 1
    lane = res.kernel.body[0].body[1].body[0]
    assert (lane.kind, lane.extent) == ("V", 16)
    assert replay(k, res.steps) == res.kernel


GEMV_COLUMN = (r"\kernel k(A:f32[64,2048],B:f32[2048,{n}])->(Y:f32[64,1]){{"
               r"L^{{64}}_{{i=0}}L^{{2048}}_{{k=0}}[Y^{{f32,g}}_{{i,0}}=Y^{{f32,g}}_{{i,0}}+A^{{f32,g}}_{{i,k}}*B^{{f32,g}}_{{k,0}};];}}")


def test_partial_sums_of_a_gemv_whose_vector_is_a_column():
    # torch's A @ B with B of shape [K, 1] reads B_{k,0}: unit stride in memory although k is not
    # in B's last subscript (l1_004_gemv had its sum vectorized across rows, read at stride 128)
    k = kernel_of(GEMV_COLUMN.format(n=1))
    res = o2.optimize(k, tiles=o2.Tiles(mr=8, nr=32, lanes=16))
    assert [s.name for s in res.steps][:2] == ["vectorized_partial_sums", "loop_vectorization"]
    assert replay(k, res.steps) == res.kernel
    # a column of a wider matrix is strided (4 elements per k): no vector partial sums
    res = o2.optimize(kernel_of(GEMV_COLUMN.format(n=4)), tiles=o2.Tiles(mr=8, nr=32, lanes=16))
    assert "vectorized_partial_sums" not in [s.name for s in res.steps]


@pytest.mark.slow
@pytest.mark.parametrize("name", ALL)
def test_every_stdlib_kernel_builds_and_verifies_on_llvm(name):
    from leirc.verify import verify

    res = o2.optimize(stdlib(name))
    src = (STDLIB / f"{name}.leir").read_text()
    rep = verify(print_kernel(res.kernel), src, seeds=(0,), dists=("normal",), probes=())
    assert rep.equal, rep.failures


def _calls(k: A.Kernel, func: str) -> int:
    return sum(1 for n in A.walk(k) if isinstance(n, A.Call) and n.func == func)


def test_a_repeated_libm_call_is_computed_once():
    # softmax computes exp(X - Rmax) for the normalizer and again for the output: -O2 stores it once
    k = stdlib("softmax")
    assert _calls(k, "exp") == 2
    res = o2.optimize(k, tiles=o2.Tiles(mr=8, nr=32, lanes=16))
    assert [s.name for s in res.steps].count("common_subexpression_elimination") == 1
    assert _calls(res.kernel, "exp") == 1
    [e] = [n for n in A.walk(res.kernel) if isinstance(n, A.Assign) and isinstance(n.value, A.Call)
           and n.value.func == "exp"]
    readers = [n for n in A.walk(res.kernel) if isinstance(n, A.Access) and n.name == e.target.name]
    assert len(readers) == 3  # its own store, the normalizer's partial sums, the output
    # the normalizer's sum of the stored values still gets vector partial sums
    assert "vectorized_partial_sums" in [s.name for s in res.steps]
    assert replay(k, res.steps) == res.kernel and check_kernel(res.kernel).ok
    # one exp only (log_softmax's output has log, not exp): nothing to share
    res = o2.optimize(stdlib("log_softmax"))
    assert "common_subexpression_elimination" not in [s.name for s in res.steps]


def test_a_repeated_cheap_operand_is_not_stored():
    # X - M occurs twice, but a subtraction is cheaper than a memory pass; exp(X) occurs once
    src = (r"\kernel k(X:f32[64,64],M:f32[64])->(C:f32[64,64],D:f32[64,64]){"
           r"L^{64}_{i=0}L^{64}_{j=0}[C^{f32,g}_{i,j}=(X^{f32,g}_{i,j}-M^{f32,g}_{i})*2.0;];"
           r"L^{64}_{i=0}L^{64}_{j=0}[D^{f32,g}_{i,j}=exp(X^{f32,g}_{i,j})+(X^{f32,g}_{i,j}-M^{f32,g}_{i});];}")
    k = parse(src).module.kernels[0]
    res = o2.optimize(k, tiles=o2.Tiles(mr=8, nr=32, lanes=16))
    assert "common_subexpression_elimination" not in [s.name for s in res.steps]
    assert res.kernel == o1.optimize(k).kernel


def test_a_libm_call_that_fusion_brings_into_one_body_is_not_stored():
    # -O1 fuses the two nests; LLVM then computes exp(X) once per iteration without a copy in memory
    src = (r"\kernel k(X:f32[64,64])->(C:f32[64,64],D:f32[64,64]){"
           r"L^{64}_{i=0}L^{64}_{j=0}[C^{f32,g}_{i,j}=exp(X^{f32,g}_{i,j})+1.0;];"
           r"L^{64}_{i=0}L^{64}_{j=0}[D^{f32,g}_{i,j}=exp(X^{f32,g}_{i,j})*2.0;];}")
    k = parse(src).module.kernels[0]
    res = o2.optimize(k, tiles=o2.Tiles(mr=8, nr=32, lanes=16))
    assert "common_subexpression_elimination" not in [s.name for s in res.steps]
    assert res.kernel == o1.optimize(k).kernel and _calls(res.kernel, "exp") == 2


def test_a_shared_libm_call_verifies_in_the_interpreter():
    from leirc.verify import verify

    src = (r"\kernel k(X:f32[8,64])->(Y:f32[8,64]){L^{8}_{i=0}L^{64}_{j=0}[R^{f32,g}_{i}=max(R^{f32,g}_{i},X^{f32,g}_{i,j});];"
           r"L^{8}_{i=0}L^{64}_{j=0}[S^{f32,g}_{i}=S^{f32,g}_{i}+exp(X^{f32,g}_{i,j}-R^{f32,g}_{i});];"
           r"L^{8}_{i=0}L^{64}_{j=0}[Y^{f32,g}_{i,j}=exp(X^{f32,g}_{i,j}-R^{f32,g}_{i})/S^{f32,g}_{i};];}")
    k = parse(src).module.kernels[0]
    res = o2.optimize(k, tiles=o2.Tiles(mr=4, nr=16, lanes=8))
    assert _calls(res.kernel, "exp") == 1
    rep = verify(print_kernel(res.kernel), src, target="interp", seeds=(0, 1), dists=("normal",))
    assert rep.equal, rep.failures


def _innermost(k: A.Kernel) -> list[A.Loop]:
    return [n for n in A.walk(k) if isinstance(n, A.Loop) and all(isinstance(b, A.Assign) for b in n.body)]


def test_softmax_passes_share_one_row_loop_and_every_row_pass_is_vector_code():
    """softmax's max, exp, sum and normalisation read each row in turn: -O2 fuses their row
    loops (one parallel nest; the row is in L2 for the later passes) and vectorizes every
    pass over the row, the element-wise ones that -O1 leaves serial inside the fused loop too."""
    k = stdlib("softmax")
    res = o2.optimize(k, tiles=o2.Tiles(mr=8, nr=32, lanes=16))
    names = [s.name for s in res.steps]
    assert names.count("outer_fusion") == 3 and len(res.kernel.body) == 1 and res.kernel.body[0].kind == "P"
    passes = [(lp.kind, lp.body[0].target.name) for lp in _innermost(res.kernel)]
    # the max and sum partials (private lanes), the stored exp, the output: vector loops; the
    # two 16-lane folds into Rmax and Rsum: serial
    assert sorted(kind for kind, t in passes if t not in ("Rmax", "Rsum")) == ["V"] * 4, print_kernel(res.kernel)
    assert sorted(t for kind, t in passes if kind == "L") == ["Rmax", "Rsum"]
    assert replay(k, res.steps) == res.kernel and check_kernel(res.kernel).ok


def test_rows_are_fused_only_when_a_row_fits_in_l2_and_the_second_pass_reads_the_first():
    def kernel(cols):
        return parse(rf"\kernel k(X:f32[16,{cols}])->(Y:f32[16,{cols}]){{"
                     rf"L^{{16}}_{{i=0}}L^{{{cols}}}_{{j=0}}[R^{{f32,g}}_{{i}}=max(R^{{f32,g}}_{{i}},X^{{f32,g}}_{{i,j}});];"
                     rf"L^{{16}}_{{i=0}}L^{{{cols}}}_{{j=0}}[Y^{{f32,g}}_{{i,j}}=X^{{f32,g}}_{{i,j}}-R^{{f32,g}}_{{i}};];}}"
                     ).module.kernels[0]

    def fused(k):
        return "outer_fusion" in [s.name for s in o2.optimize(k, tiles=o2.Tiles(mr=4, nr=16, lanes=8)).steps]

    small = kernel(1024)  # 8 KiB of X and of Y per row
    assert fused(small)
    big = o2.ROW_FOOTPRINT // 8  # X and Y rows: 8 bytes per column, twice the limit
    assert not fused(kernel(big))
    independent = parse(r"\kernel k(X:f32[16,64])->(Y:f32[16,64],Z:f32[16,64]){"
                        r"L^{16}_{i=0}L^{64}_{j=0}[Y^{f32,g}_{i,j}=X^{f32,g}_{i,j}*2.0;];"
                        r"L^{16}_{i=0}L^{64}_{j=0}[Z^{f32,g}_{i,j}=X^{f32,g}_{i,j}+1.0;];}").module.kernels[0]
    assert not fused(independent)  # nothing passes from one to the other (-O1 fuses these whole)
    # hinge loss: a per-row partial sum, then its sum over the rows into a scalar; fusing the two
    # would make the row loop serial
    scalar = parse(r"\kernel k(X:f32[16,64])->(Y:f32[]){"
                   r"L^{16}_{i=0}L^{64}_{j=0}[P^{f32,g}_{i}=P^{f32,g}_{i}+max(1-X^{f32,g}_{i,j},0);];"
                   r"L^{16}_{i=0}[S^{f32,g}=S^{f32,g}+P^{f32,g}_{i};];Y^{f32,g}=S^{f32,g}/1024.0;}").module.kernels[0]
    assert check_kernel(scalar).ok and not fused(scalar)
    # two element-wise passes: -O1's operator_fusion makes them one loop body, row fusion stays out
    chain = parse(r"\kernel k(X:f32[16,64])->(Y:f32[16,64]){"
                  r"L^{16}_{i=0}L^{64}_{j=0}[T^{f32,g}_{i,j}=X^{f32,g}_{i,j}*2.0;];"
                  r"L^{16}_{i=0}L^{64}_{j=0}[Y^{f32,g}_{i,j}=T^{f32,g}_{i,j}+1.0;];}").module.kernels[0]
    res = o2.optimize(chain, tiles=o2.Tiles(mr=4, nr=16, lanes=8))
    assert "outer_fusion" not in [s.name for s in res.steps] and len(res.kernel.body) == 1


def test_fused_row_passes_verify_in_the_interpreter():
    from leirc.verify import verify

    src = (r"\kernel k(X:f32[16,64])->(Y:f32[16,64]){L^{16}_{i=0}L^{64}_{j=0}[M^{f32,g}_{i}=M^{f32,g}_{i}+X^{f32,g}_{i,j};];"
           r"L^{16}_{i=0}L^{64}_{j=0}[Y^{f32,g}_{i,j}=X^{f32,g}_{i,j}-M^{f32,g}_{i}/64.0;];}")
    k = parse(src).module.kernels[0]
    res = o2.optimize(k, tiles=o2.Tiles(mr=4, nr=16, lanes=8))
    assert "outer_fusion" in [s.name for s in res.steps]
    assert any(lp.kind == "V" and lp.body[0].target.name == "Y" for lp in _innermost(res.kernel))
    rep = verify(print_kernel(res.kernel), src, target="interp", seeds=(0, 1), dists=("normal",))
    assert rep.equal, rep.failures
