"""The size clustering shared by the shrinker (``leirc.interp.shrink``) and the dataset's
shape instances (``leirc.dataset.shapes``): one implementation, its invariants, and what
each user does differently with comments."""

from __future__ import annotations

import inspect
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from leirc.dataset import shapes
from leirc.interp import shrink as S
from leirc.lang import ast as A
from leirc.lang.canonical import fingerprint
from leirc.lang.checker import check_text
from leirc.lang.printer import PRETTY, print_kernel

ROOT = Path(__file__).resolve().parent.parent

SRC = r"""% padded input: n and n+2 move together
\kernel pad(X: f32[64, 66]) -> (Y: f32[64, 64]) {
  % the window
  L^{64}_{i=0} L^{64}_{j=0} [
    Y^{f32,g}_{i,j} = X^{f32,g}_{i,j+2}*0.5;
  ];
}
"""


def _kernel(text: str = SRC) -> A.Kernel:
    return check_text(text).results[0].kernel


def test_the_dataset_uses_the_shrinkers_clustering():
    """No second copy: the shape instances call the functions of the lower layer."""
    src = inspect.getsource(shapes)
    for name in ("sizes_of", "clusters", "size_map", "resize"):
        assert f"def {name}(" not in src and f"def _{name}(" not in src
    assert "def _rebuild(" not in src and "def _mapper(" not in src
    assert {"clusters", "size_map", "resize", "sizes_of"} <= set(S.__all__)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=300), max_size=30), st.integers(min_value=1, max_value=16))
def test_clusters_partition_the_big_sizes_into_runs_of_near_neighbours(sizes, keep):
    cl = S.clusters(sizes, keep)
    big = sorted({s for s in sizes if s > keep})
    members = [[s for s in big if lo <= s <= hi] for lo, hi in cl]
    assert [s for m in members for s in m] == big  # every big size in exactly one cluster, in order
    for (lo, hi), m in zip(cl, members):
        assert m[0] == lo and m[-1] == hi
        assert all(b - a <= S.GAP for a, b in zip(m, m[1:]))
    assert all(b[0] - a[1] > S.GAP for a, b in zip(cl, cl[1:]))


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=9, max_value=200), st.integers(min_value=0, max_value=6),
       st.integers(min_value=1, max_value=64), st.integers(min_value=-S.GAP, max_value=6 + S.GAP))
def test_size_map_moves_a_cluster_rigidly_and_keeps_small_sizes(lo, width, base, offset):
    hi = lo + width
    f = S.size_map([(lo, hi, base)])
    n = lo + offset
    if n <= S.KEEP or offset > width + S.GAP:
        assert f(n) == n  # small, or too far from the cluster to belong to it
    elif base + offset > 0:
        assert f(n) == base + offset  # offsets within the cluster (n, n+2) survive
    else:
        assert f(n) == n  # a size that would vanish stays
    assert all(f(k) == k for k in range(1, S.KEEP + 1))
    assert f(hi + S.GAP + 1) == hi + S.GAP + 1 or hi + S.GAP + 1 <= S.KEEP


def test_resize_maps_shapes_extents_and_integers_and_keeps_comments_unless_asked():
    k = _kernel()
    f = S.size_map([(64, 66, 8)])
    kept = S.resize(k, f)
    dropped = S.resize(k, f, drop_comments=True)
    for out in (kept, dropped):
        assert out.inputs[0].shape == (8, 10) and out.outputs[0].shape == (8, 8)
        assert [n.extent for n in A.walk(out) if isinstance(n, A.Loop)] == [8, 8]
        assert check_text(print_kernel(out, PRETTY)).ok
        floats = [n.value for n in A.walk(out) if isinstance(n, A.Const) and not n.is_int]
        assert floats == [0.5]  # a float literal is not a size
    assert "%" in print_kernel(kept, PRETTY)
    assert "%" not in print_kernel(dropped, PRETTY)
    assert S.resize(k, lambda n: n) == k


def test_shrink_keeps_comments_and_instances_drop_them():
    """The shrinker makes a stand-in of the same file (its comments still orient a reader);
    a shape instance is a new program whose sizes the comments would misstate."""
    text = (ROOT / "stdlib" / "softmax.leir").read_text()
    r = check_text(text).results[0]
    small, moved = S.shrink(r.kernel)
    assert moved and "%" in print_kernel(small.kernel, PRETTY)
    assert S.iterations(small) < S.iterations(r)
    insts = shapes.instances(r, 3, seed=1, key="softmax")
    assert insts and insts[0].how == "shrunk"
    assert all("%" not in print_kernel(i.kernel, PRETTY) for i in insts)
    # instance 0 is the shrunk kernel itself, less its comments
    assert fingerprint(insts[0].kernel) == fingerprint(S.resize(small.kernel, lambda n: n, drop_comments=True))


def test_instances_move_clusters_found_by_the_shared_clustering():
    r = check_text(SRC).results[0]
    found = S.clusters(S.sizes_of(r.kernel))
    assert found == [(64, 66)]
    for inst in shapes.instances(r, 4, seed=2, key="pad"):
        for lo, hi, base in inst.moved:
            assert (lo, hi) in found and base % 8 == lo % 8
        n, m = inst.kernel.inputs[0].shape
        assert m == n + 2  # the padded size still follows the size
