"""The design space (leirc.search.space): -O1 and -O2 are points of it, knobs change the program
they claim to change, traces replay (through Program.apply and `leirc apply --trace`), and
sampling is seeded."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from leirc.engine.program import Program
from leirc.lang import ast as A
from leirc.lang.canonical import fingerprint
from leirc.opt import o1, o2
from leirc.search.space import KNOBS, Space, SpaceError
from leirc.strategies import trace_from_json, trace_to_json

ROOT = Path(__file__).resolve().parent.parent
MATMUL = r"""\kernel mm(A: f32[128, 96], B: f32[96, 64]) -> (C: f32[128, 64]) {
  L^{128}_{i=0} L^{64}_{j=0} L^{96}_{k=0} [ C^{f32,g}_{i,j} = C^{f32,g}_{i,j} + A^{f32,g}_{i,k}*B^{f32,g}_{k,j}; ];
}"""
ROWSUM = r"""\kernel rowsum(A: f32[64, 1024]) -> (Y: f32[64]) {
  L^{64}_{i=0} L^{1024}_{j=0} [ Y^{f32,g}_{i} = Y^{f32,g}_{i} + A^{f32,g}_{i,j}; ];
}"""


def prog(text: str) -> Program:
    p = Program.from_text(text)
    assert p.ok, p
    return p


def replay(p: Program, steps) -> Program:
    for st in steps:
        p = p.apply(st).program
    return p


def kinds(p: Program) -> list[str]:
    return [n.kind for n in A.walk(p.kernel) if isinstance(n, A.Loop)]


@pytest.mark.parametrize("text", [MATMUL, ROWSUM, (ROOT / "stdlib" / "softmax.leir").read_text()])
def test_o1_and_o2_are_points_of_the_space(text):
    p = prog(text)
    space = Space("llvm")
    for point, ref in ((space.o2_point(), o2.optimize(p.kernel, "llvm", p.result)),
                       (space.o1_point(), o1.optimize(p.kernel, "llvm", p.result))):
        r = space.realize(p, point)
        assert list(r.steps) == list(ref.steps)
        assert replay(p, r.steps).fingerprint == r.fingerprint == fingerprint(ref.kernel)
    # every register tile variant the -O2 proposer tries is a point too
    for t in o2.tile_variants("llvm"):
        r = space.realize(p, space.o2_point(t))
        assert r.fingerprint == replay(p, o2.optimize(p.kernel, "llvm", p.result, tiles=t).steps).fingerprint


def test_knobs_change_what_they_name():
    p = prog(MATMUL)
    space = Space("llvm")
    base = space.o2_point()
    default = space.realize(p, base)
    assert any(t.private for t in default.result.tensors.values())  # a register tile
    unblocked = space.realize(p, base | {"block": False})
    assert not any(t.private for t in unblocked.result.tensors.values())
    small = space.realize(p, base | {"mr": 4, "nv": 1})
    assert small.fingerprint != default.fingerprint
    tile = next(t for t in small.result.tensors.values() if t.private)
    assert tile.shape == (4, base["lanes"])
    serial = space.realize(p, space.o1_point() | {"parallel": "none"})
    assert "P" not in kinds(replay(p, serial.steps))
    scalar = space.realize(p, space.o1_point() | {"vector": 0})
    assert "V" not in kinds(replay(p, scalar.steps))
    jammed = space.realize(p, space.o1_point() | {"jam": 4})
    assert "unroll_and_jam" in [s.name for s in jammed.steps] and "U" in kinds(replay(p, jammed.steps))
    grain = space.realize(p, space.o1_point() | {"grain": 16})
    par = next(n for n in A.walk(replay(p, grain.steps).kernel) if isinstance(n, A.Loop) and n.kind == "P")
    assert par.extent == 128 // 16
    assert space.realize(p, {"level": 0}).steps == ()


def test_bad_points_are_refused_with_the_knob_named():
    space = Space("llvm")
    with pytest.raises(SpaceError, match="unknown knob"):
        space.canonical({"tilez": 3})
    with pytest.raises(SpaceError, match="parallel"):
        space.canonical({"parallel": "sideways"})
    with pytest.raises(SpaceError, match="block"):
        space.canonical({"block": 1})


def test_sampling_is_seeded_and_points_are_canonical():
    space = Space("llvm")
    a = [space.sample(random.Random(7)) for _ in range(3)]
    b = [space.sample(random.Random(7)) for _ in range(3)]
    assert a == b
    r1 = random.Random(1)
    pts = [space.sample(r1) for _ in range(20)]
    r2, r3 = random.Random(5), random.Random(5)
    assert [space.mutate(x, r2) for x in pts] == [space.mutate(x, r3) for x in pts]
    # a level-1 point keeps none of -O2's knobs: two such points differing there are one point
    p1 = space.canonical({"level": 1, "mr": 4})
    assert p1 == space.canonical({"level": 1, "mr": 16}) and p1["mr"] == space.default()["mr"]
    rng = random.Random(3)
    for x in pts:
        m = space.mutate(x, rng)
        assert m != x
        c = space.crossover(x, m, rng)
        assert all(c[k] in (x[k], m[k], space.default()[k]) for k in KNOBS)


def test_a_points_trace_replays_with_leirc_apply(tmp_path):
    p = prog(MATMUL)
    space = Space("llvm")
    r = space.realize(p, space.o2_point() | {"mr": 4, "outer": "i", "unroll": False})
    src = tmp_path / "mm.leir"
    src.write_text(MATMUL)
    trace = tmp_path / "mm.trace.json"
    trace.write_text(trace_to_json(list(r.steps), kernel="mm"))
    assert trace_from_json(trace.read_text()) == list(r.steps)
    out = subprocess.run([sys.executable, "-m", "leirc", "apply", str(src), "--trace", str(trace)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert Program.from_text(out.stdout).fingerprint == r.fingerprint
