"""``leirc apply --verify`` of steps that are all ``bitwise``: the result's compiled build
against the original program's compiled build, bit for bit.

A bitwise rewrite (loop_split, loop_reorder of independent loops, unrolling...) claims that
the new program computes every output element with the same operations in the same order.
Comparing it with the interpreter (the general verifier's oracle) cannot test that claim: the
compiled kernel and the interpreter round differently even for the original program, so the
report read "bitwise=False, max_abs_err=3.25" for a correct step. Here both programs are built
once each (two workers, building side by side) and run on the same inputs; every output must
match bit for bit (NaN matches NaN). No interpreter, no error bound, no timing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

#: the verifier's grid distributions on every seed, plus its non-adaptive probes on the first
DISTS = ("uniform", "normal", "signed")
PROBES = ("mixed", "special")


@dataclass
class BitwiseReport:
    identical: bool
    runs: int = 0
    #: per output that differed: (name, run label, elements that differ, max |a - b| over finite pairs)
    differences: list = field(default_factory=list)
    error: Optional[str] = None  # a build or run failed (of which program, and why)

    def line(self, target: str) -> str:
        if self.error is not None:
            return f"verify on {target}: could not compare with the original's build: {self.error}"
        if self.identical:
            return (f"verify on {target}: equal, bitwise identical to the original program's build "
                    f"({self.runs} runs)")
        name, label, n, err = self.differences[0]
        return (f"verify on {target}: NOT bitwise identical to the original program's build: output {name} differs "
                f"in {n} element(s) ({label}), max_abs_err={err:.3g}")


def compare_builds(original: str, result: str, *, kernel: str, target: str, threads: int,
                   seeds=(0, 1, 2), timeout: float = 300.0) -> BitwiseReport:
    """Build ``original`` and ``result`` (one-kernel LEIR texts) once each and compare their
    outputs bit for bit on the verifier's input grid."""
    import numpy as np

    from ..interp.inputs import random_inputs
    from ..lang.checker import check_text
    from ..lower.device import KernelSession, zero_outputs
    from ..verify import bitwise_equal

    k = check_text(original).results[0].kernel
    runs = [(s, d) for s in seeds for d in DISTS] + [(seeds[0], p) for p in PROBES]
    rep = BitwiseReport(True)
    # both workers start (and build) now, in parallel
    with KernelSession(original, kernel=kernel, target=target, threads=threads, timeout=timeout) as a, \
            KernelSession(result, kernel=kernel, target=target, threads=threads, timeout=timeout) as b:
        for seed, dist in runs:
            label = f"seed {seed}, {dist}"
            inputs = random_inputs(k, seed, dist)
            ra = a.run(inputs, zero_outputs(k))
            if not ra.ok:
                rep.identical, rep.error = False, f"the original program: {ra.error_kind}: {ra.error}"
                return rep
            rb = b.run(inputs, zero_outputs(k))
            if not rb.ok:
                rep.identical, rep.error = False, f"the result: {rb.error_kind}: {rb.error}"
                return rep
            rep.runs += 1
            for p in k.outputs:
                x, y = np.asarray(ra.outputs[p.name]), np.asarray(rb.outputs[p.name])
                if bitwise_equal(y, x):
                    continue
                rep.identical = False
                xf, yf = x.astype(np.float64), y.astype(np.float64)
                both = np.isfinite(xf) & np.isfinite(yf)
                differ = int(np.count_nonzero((xf != yf) & ~(np.isnan(xf) & np.isnan(yf))))
                err = float(np.max(np.abs(xf - yf)[both])) if both.any() else float("nan")
                rep.differences.append((p.name, label, differ, err))
            if not rep.identical:
                return rep  # one differing run answers the question
    return rep
