"""Issue #30, item 7: the PyTorch-module oracle derives its tolerance from the arithmetic,
like the interpreter oracle, instead of a flat normwise 1e-5 -- from the *imported*
program's reductions and dtypes, never from the candidate's.

The module below is the shape of BatchNorm followed by a global average pool: a mean
subtracted from values much larger than their spread, then a long sum. The exact result is
0; PyTorch's float32 and any correct kernel land on different roundoff, far apart in
relative terms. The flat rule called that a mismatch."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from leirc.engine.oracles import TorchOracle, verify_model
from leirc.frontend import import_model, verify_against_torch

MODEL = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        m = x.mean(dim=1, keepdim=True)
        return (x - m).sum(dim=1)


def get_inputs():
    return [torch.rand(4, 16384) + 10.0]


def get_init_inputs():
    return []
"""


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("m") / "model.py"
    path.write_text(MODEL)
    return str(path), import_model(str(path))


def wrong(text: str) -> str:
    # the mean is off by one part in a thousand: 10 * 1e-3 * 16384 = 164 away from 0
    out = text.replace("Mean_sum^{f32,g}_{i,0}/16384.0", "Mean_sum^{f32,g}_{i,0}/16367.6")
    assert out != text
    return out


def test_the_in_process_verifier_uses_the_imported_programs_bound(model):
    path, res = model
    flat = verify_against_torch(path, res.text, res.weights, seeds=(0,), rtol=1e-4, norm_tol=1e-5)
    assert not flat.ok  # the false reject of the flat rule
    assert verify_against_torch(path, res.text, res.weights, seeds=(0, 1)).ok
    assert not verify_against_torch(path, wrong(res.text), res.weights, seeds=(0,)).ok


def test_the_sandboxed_module_oracle_uses_the_same_rule(model):
    path, res = model
    oracle = TorchOracle.from_import(path, res, timeout=300)  # one worker run for every check below
    rep = verify_model(path, res.text, res, seeds=(0, 1), target="interp", oracle=oracle)
    assert rep.equal, rep.failures
    assert rep.tolerance.startswith("arithmetic (the imported program's") and "f32 rtol 0.0001" in rep.tolerance
    bad = verify_model(path, wrong(res.text), res, seeds=(0,), target="interp", oracle=oracle)
    assert not bad.equal and "mismatch" in bad.failures[0]
    flat = verify_model(path, res.text, res, seeds=(0,), target="interp", rtol=1e-4, norm_tol=1e-5, oracle=oracle)
    assert not flat.equal and flat.tolerance.startswith("flat")
