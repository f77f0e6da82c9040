"""The interpreter executes every Step-TP compat program that checks clean.

* Emitted level-1 programs: all of those with at most ``MAX_ITERATIONS`` statement
  iterations (sum over statements of the product of their loop extents) run on uniform
  inputs and produce finite, fully written outputs; the larger ones (big matmuls and
  convolutions, the O(n^2) cumsum formulations, up to 2.8e11 iterations) are covered at
  reduced size in test_interp_torch.py. Each program also runs with tiny blocks
  (max_elements) and must give the same result.
* Strategy outputs (semantics-preserving rewrites of matmul, softmax, Tanh, LayerNorm):
  the verifier with the interpreter on both sides must find each rewrite equal to its
  original program.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from leirc.interp import Interpreter, random_inputs
from leirc.interp import dtypes as D
from leirc.lang.checker import check_kernel
from leirc.lang.parser import parse_record
from leirc.lang.printer import print_kernel
from leirc.verify import verify

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
EMITTED = SHARED / "compat" / "steptp_emitted_level1.jsonl"
STRATEGY = SHARED / "compat" / "steptp_strategy_outputs.jsonl"

#: statement iterations above which an emitted program is not run at full size here
MAX_ITERATIONS = 1.5e8


def _load(path: Path) -> list:
    if not path.is_file():
        pytest.skip(f"compat corpus not found at {path} (it lives in ../shared next to the repository)")
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _iterations(result) -> int:
    return sum(math.prod(l.extent for l in si.loops) for si in result.stmts)


def _checked(rec: dict, program=None):
    pr = parse_record(rec, program=program)
    if not pr.ok:
        return None
    r = check_kernel(pr.module.kernels[0])
    return r if r.ok else None


def _emitted_models() -> list:
    if not EMITTED.is_file():
        return ["(compat corpus missing)"]
    return [json.loads(line)["model"] for line in EMITTED.open(encoding="utf-8") if line.strip()]


@pytest.mark.parametrize("model", _emitted_models())
def test_emitted_program_runs(model):
    rec = next((r for r in _load(EMITTED) if r["model"] == model), None)
    assert rec is not None
    r = _checked(rec)
    assert r is not None, "every emitted level-1 program checks clean"
    n = _iterations(r)
    interp = Interpreter(r)  # compiles and plans every program, also the ones too big to run here
    if n > MAX_ITERATIONS:
        pytest.skip(f"{n:.2g} iterations > {MAX_ITERATIONS:.2g} (covered at reduced size elsewhere)")
    ins = random_inputs(r.kernel, 0, "uniform")
    outs = interp.run(ins)
    for p in r.kernel.outputs:
        y = outs[p.name]
        assert y.shape == tuple(p.shape) and y.dtype == D.np_dtype(p.dtype)
        assert not D.poison_mask(y, p.dtype).any(), f"{p.name} not fully written"
        if D.is_float(p.dtype):
            assert np.isfinite(y).all(), f"{p.name} has NaN/Inf"
    if n <= 2e7:
        # the same program in ~20 blocks per vectorized nest (chunking must not change results)
        small = Interpreter(r, max_elements=max(1000, n // 20)).run(ins)
        for p in r.kernel.outputs:
            np.testing.assert_allclose(small[p.name].astype(np.float64), outs[p.name].astype(np.float64),
                                       rtol=1e-5, atol=1e-6 * float(np.abs(outs[p.name]).max() or 1))


def _strategy_cases() -> list:
    if not STRATEGY.is_file() or not EMITTED.is_file():
        return [("(compat corpus missing)", 0, 0)]
    cases = []
    for i, line in enumerate(STRATEGY.open(encoding="utf-8")):
        if not line.strip():
            continue
        rec = json.loads(line)
        if rec["model"] in ("softmax", "Tanh", "Standard_matrix_multiplication", "LayerNorm"):
            for j, _ in enumerate(rec["transformed"]):
                cases.append((f"{rec['model']}-{rec['strategy']}", i, j))
    return cases


@pytest.mark.parametrize("name,i,j", _strategy_cases(), ids=[f"{c[0]}-{c[2]}" for c in _strategy_cases()])
def test_strategy_output_equals_original(name, i, j):
    recs = _load(STRATEGY)
    emitted = {r["model"]: r for r in _load(EMITTED)}
    rec = recs[i]
    base = emitted[rec["model"]]
    orig = _checked(base, rec["original"])
    new = _checked(base, rec["transformed"][j]) if rec["transformed"][j] else None
    if orig is None or new is None:
        pytest.skip("the original or the rewrite does not check clean (reference defects, see docs/language.md)")
    if max(_iterations(orig), _iterations(new)) > 2e7:
        pytest.skip("too large for the unit tests")
    rep = verify(print_kernel(new.kernel), print_kernel(orig.kernel), target="interp", seeds=(0,), dists=("normal",))
    assert rep.equal, rep.failures
