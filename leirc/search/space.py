"""The schedule design space: -O1's and -O2's decisions as knobs that a search varies jointly.

A **point** is a dict of knob values (:data:`KNOBS`); :meth:`Space.realize` turns it into a
trace, a list of checked strategy steps, by running the pipeline its ``level`` names with those
decisions as arguments (:class:`leirc.opt.o1.Choices`, :class:`leirc.opt.o2.Choices`,
:class:`leirc.opt.o2.Tiles`). Every step of the pipeline is planned and re-checked
(``plan_step``), so a point's trace is legal by construction and replays through
``Program.apply`` or ``leirc apply --trace``; a knob that does not apply to the kernel (a tile
for a kernel with no GEMM-like nest) changes nothing, which is why points are told apart by the
*program* they give (its fingerprint), not by their knobs.

``level`` 0 is the input, ``level`` 1 is -O1 (its knobs: fusion, reordering, which loop is
parallel and its grain, unroll-and-jam, the widest vector split), ``level`` 2 is -O2 (besides
-O1's knobs for the -O1 pass it runs in the middle: the register tile ``mr`` rows × ``nv``
vectors of ``lanes``, which tile loop is outside, packing, unrolling, and each of its phases on
or off: libm sharing, row fusion (``outer_fusion``), register blocking, vector partial sums,
column reductions, row privatization, fission of an intrinsic off a reduction, vector loops
inside row loops). :meth:`Space.o1_point` and :meth:`Space.o2_point` are the fixed pipelines:
their traces are exactly ``opt.o1.optimize``'s and ``opt.o2.optimize``'s.

Sampling, mutation and crossover draw from a caller's seeded ``random.Random``; nothing here
draws on its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..lang.canonical import fingerprint
from ..opt import o1 as O1
from ..opt import o2 as O2
from ..strategies import NotApplicable, Step

#: every knob and its values; the first value of a knob that -O1/-O2 fix is not necessarily
#: their default (the defaults come from the target: :meth:`Space.o2_point`)
KNOBS: dict[str, tuple] = {
    "level": (0, 1, 2),
    # -O1 (and the -O1 pass inside -O2)
    "fuse": (True, False),
    "reorder": (True, False),
    "parallel": ("outer", "inner", "none"),
    "grain": (1, 4, 16),
    "jam": (1, 2, 4),
    "vector": (16, 8, 4, 0),
    # -O2's register tile
    "mr": (4, 6, 8, 12, 16),
    "nv": (1, 2, 3, 4),
    "lanes": (4, 8, 16),
    "outer": ("j", "i"),
    # -O2's phases
    "cse": (True, False),
    "outer_fusion": (True, False),
    "block": (True, False),
    "pack": (True, False),
    "unroll": (True, False),
    "partial_sums": (True, False),
    "column_reductions": (True, False),
    "privatize": (True, False),
    "fission": (True, False),
    "vectorize_inner": (True, False),
}
O1_KNOBS = ("fuse", "reorder", "parallel", "grain", "jam", "vector")
O2_KNOBS = ("mr", "nv", "lanes", "outer", "cse", "outer_fusion", "block", "pack", "unroll", "partial_sums",
            "column_reductions", "privatize", "fission", "vectorize_inner")
#: the knobs each level reads (the others are set to their defaults in :meth:`Space.canonical`)
LEVEL_KNOBS = {0: (), 1: O1_KNOBS, 2: O1_KNOBS + O2_KNOBS}


class SpaceError(ValueError):
    """A point with an unknown knob or a value outside the knob's domain."""


@dataclass(frozen=True)
class Realized:
    """A point's trace on one program: the steps, the program they give and its fingerprint."""

    point: dict
    steps: tuple
    kernel: object
    result: object  # the kernel's CheckResult
    fingerprint: str


class Space:
    """The design space for one target (``llvm``: the CPU pipelines; CUDA has its own -O2 and
    only ``level`` varies there)."""

    def __init__(self, target: str = "llvm"):
        self.target = "cuda" if str(target).startswith("cuda") else "llvm"
        tiles = O2.default_tiles(self.target)
        lanes = tiles.lanes if tiles.lanes in KNOBS["lanes"] else 8
        self._defaults = {"level": 2, **{k: getattr(O1.Choices(), k) for k in O1_KNOBS},
                          **{k: getattr(O2.Choices(), k) for k in O2_KNOBS if hasattr(O2.Choices(), k)},
                          "mr": tiles.mr if tiles.mr in KNOBS["mr"] else 8,
                          "nv": max(1, min(4, tiles.nr // max(1, tiles.lanes))), "lanes": lanes,
                          "outer": tiles.outer}
        self.knobs = {k: v for k, v in KNOBS.items()} if self.target == "llvm" else {"level": KNOBS["level"]}
        self._cache: dict = {}

    # -- points ----------------------------------------------------------------------------
    def default(self, level: int = 2) -> dict:
        return dict(self._defaults, level=level)

    def o1_point(self) -> dict:
        """The fixed -O1 pipeline."""
        return self.canonical(self.default(1))

    def o2_point(self, tiles: Optional[O2.Tiles] = None) -> dict:
        """The fixed -O2 pipeline (with ``tiles``: one of its register-tile variants)."""
        p = self.default(2)
        if tiles is not None:
            p.update(mr=tiles.mr, nv=max(1, tiles.nr // tiles.lanes), lanes=tiles.lanes, outer=tiles.outer)
        return self.canonical(p)

    def check(self, point: dict) -> dict:
        """``point`` with every knob known and in its domain (missing knobs: the defaults)."""
        bad = [k for k in point if k not in KNOBS]
        if bad:
            raise SpaceError(f"unknown knob(s) {', '.join(sorted(bad))} (known: {', '.join(KNOBS)})")
        out = dict(self._defaults)
        for k, v in point.items():
            if k in ("mr", "nv", "grain", "jam") and isinstance(v, int) and not isinstance(v, bool) and v >= 1:
                out[k] = v  # tile sizes and factors outside the sampled grid are fine as given
                continue
            if v not in KNOBS[k] or (isinstance(v, bool) != isinstance(KNOBS[k][0], bool)):
                raise SpaceError(f"knob {k}={v!r}: one of {', '.join(map(repr, KNOBS[k]))}")
            out[k] = v
        return out

    def canonical(self, point: dict) -> dict:
        """``point`` with the knobs its level does not read set to their defaults (two points
        that differ only there are one point)."""
        p = self.check(point)
        used = LEVEL_KNOBS[p["level"]] if self.target == "llvm" else ()
        return {k: (p[k] if k == "level" or k in used else self._defaults[k]) for k in KNOBS}

    def key(self, point: dict) -> tuple:
        return tuple(sorted(self.canonical(point).items()))

    def sample(self, rng) -> dict:
        """A uniformly drawn point (knobs in :data:`KNOBS` order, so a seed gives one point)."""
        return self.canonical({k: rng.choice(v) for k, v in self.knobs.items()})

    def mutate(self, point: dict, rng, rate: float = 0.05) -> dict:
        """``point`` with at least one of the knobs its level reads (or the level) redrawn;
        each other such knob redrawn with probability ``rate``."""
        p = self.canonical(point)
        names = ["level"] + [k for k in LEVEL_KNOBS[p["level"]] if k in self.knobs]
        forced = rng.choice(names)
        for k in names:
            if k == forced or rng.random() < rate:
                others = [v for v in self.knobs[k] if v != p[k]]
                if others:
                    p[k] = rng.choice(others)
        return self.canonical(p)

    def neighbors(self, point: dict) -> list[dict]:
        """Every point that differs from ``point`` in one knob its level reads (or the level),
        in knob order: a local search's next moves."""
        p = self.canonical(point)
        out = []
        for k in ["level"] + [k for k in LEVEL_KNOBS[p["level"]] if k in self.knobs]:
            for v in self.knobs[k]:
                if v != p[k]:
                    out.append(self.canonical(dict(p, **{k: v})))
        return out

    def crossover(self, a: dict, b: dict, rng) -> dict:
        """Each knob from ``a`` or ``b`` with equal probability (knob order fixed)."""
        a, b = self.check(a), self.check(b)
        return self.canonical({k: (a[k] if rng.random() < 0.5 else b[k]) for k in KNOBS})

    # -- traces ----------------------------------------------------------------------------
    def tiles(self, point: dict) -> O2.Tiles:
        p = self.check(point)
        return O2.Tiles(mr=p["mr"], nr=p["nv"] * p["lanes"], lanes=p["lanes"], outer=p["outer"])

    def choices(self, point: dict) -> O2.Choices:
        p = self.check(point)
        o1 = O1.Choices(**{k: p[k] for k in O1_KNOBS})
        return O2.Choices(o1=o1, **{k: p[k] for k in O2_KNOBS if k not in ("mr", "nv", "lanes", "outer")})

    def steps(self, program, point: dict) -> list[Step]:
        """The trace of ``point`` on ``program`` (a :class:`leirc.engine.Program` or anything
        with ``.kernel`` and ``.result``)."""
        return list(self.realize(program, point).steps)

    def realize(self, program, point: dict) -> Realized:
        """Run the pipeline ``point`` names on ``program`` (cached per program and point)."""
        p = self.canonical(point)
        key = (fingerprint(program.kernel), self.key(p))
        got = self._cache.get(key)
        if got is not None:
            return got
        kernel, result, steps = program.kernel, program.result, ()
        try:
            if p["level"] == 1:
                res = O1.optimize(program.kernel, self.target, program.result,
                                  choices=self.choices(p).o1 if self.target == "llvm" else O1.Choices())
                kernel, result, steps = res.kernel, res.result, tuple(res.steps)
            elif p["level"] == 2:
                if self.target == "llvm":
                    res = O2.optimize(program.kernel, self.target, program.result, tiles=self.tiles(p),
                                      choices=self.choices(p))
                else:
                    res = O2.optimize(program.kernel, self.target, program.result)
                kernel, result, steps = res.kernel, res.result, tuple(res.steps)
        except NotApplicable:
            kernel, result, steps = program.kernel, program.result, ()
        got = self._cache[key] = Realized(p, steps, kernel, result, fingerprint(kernel))
        return got

    def size(self) -> int:
        """Points in the grid (not programs: many points give one program)."""
        n = 0
        for level, used in LEVEL_KNOBS.items():
            m = 1
            for k in used:
                if k in self.knobs:
                    m *= len(self.knobs[k])
            n += m
        return n


def point_to_json(point: dict) -> dict:
    return {k: point[k] for k in KNOBS if k in point}


__all__ = ["KNOBS", "LEVEL_KNOBS", "O1_KNOBS", "O2_KNOBS", "Realized", "Space", "SpaceError", "point_to_json"]
