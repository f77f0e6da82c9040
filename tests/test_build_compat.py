"""Step-TP compatibility corpus (``../shared/compat/steptp_emitted_level1.jsonl``): every
program lowers and builds for llvm.

Reduction rule for running (LEIR programs have literal extents, so they cannot be shrunk
consistently in general): a program whose total number of statement executions (per
statement, the product of its enclosing loop extents, summed over statements) is at most
``RUN_LIMIT`` = 3e7 runs **at full size** and is compared with the reference interpreter
(:mod:`leirc.interp`) on random inputs; every other program is built only. A few programs
with distinctive structure (cross-thread reductions, B loops inside serial loops, scans,
gathers) are also compiled for CUDA and checked with nvcc.

The tests skip when ``../shared`` (next to the repository) is absent.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from leirc.lang import ast as A
from leirc.lang.checker import check_kernel
from leirc.lang.parser import parse_record
from leirc.lower import NvccNotFound, build, nvcc_compile

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "compat" / "steptp_emitted_level1.jsonl"
RUN_LIMIT = 3e7
CUDA_SAMPLE = ("CrossEntropyLoss", "BatchNorm", "cumsum_exclusive", "masked_cumsum", "KLDivLoss", "Argmax_over_a_dimension",
               "conv_standard_2D_square_input_asymmetric_kernel___dilated____padded")


def _records():
    if not CORPUS.exists():
        return []
    return [json.loads(l) for l in CORPUS.read_text(encoding="utf-8").splitlines() if l.strip()]


RECORDS = _records()
pytestmark = pytest.mark.skipif(not CORPUS.exists(), reason=f"compat corpus not found at {CORPUS} (../shared absent)")


def statement_executions(kernel: A.Kernel) -> int:
    total = 0

    def rec(items, mult):
        nonlocal total
        for it in items:
            if isinstance(it, A.Loop):
                rec(it.body, mult * it.extent)
            elif isinstance(it, A.Region):
                rec(it.body, mult)
            elif isinstance(it, A.Assign):
                total += mult

    rec(kernel.body, 1)
    return total


def _checked(rec):
    pr = parse_record(rec)
    if not pr.ok:
        pytest.skip(f"{rec['model']}: does not parse ({pr.diagnostics[0].message}) -- not a lowering issue")
    r = check_kernel(pr.module.kernels[0])
    if not r.ok:
        d = next(d for d in r.diagnostics if d.is_error)
        pytest.skip(f"{rec['model']}: rejected by the checker ({d.code}) -- not a lowering issue")
    return r


def _ids(recs):
    return [f"{i}-{r['model']}" for i, r in enumerate(recs)]


@pytest.mark.parametrize("rec", RECORDS, ids=_ids(RECORDS))
def test_compat_program_builds_and_cheap_ones_match_interpreter(rec):
    r = _checked(rec)
    b = build(r, "llvm")
    if statement_executions(r.kernel) > RUN_LIMIT:
        return
    interp = pytest.importorskip("leirc.interp")
    ins = interp.random_inputs(r.kernel, seed=0)
    outs = b.run(ins, {p.name: _poison(p) for p in r.kernel.outputs})
    ref = interp.run(r, ins)
    for p in r.kernel.outputs:
        got = np.asarray(outs[p.name], dtype=np.float64)
        want = np.asarray(ref[p.name], dtype=np.float64)
        assert got.shape == want.shape
        if p.dtype in A.FLOAT_DTYPES:
            assert not np.isnan(got).any(), f"{p.name}: NaN (unwritten or invalid) outputs"
            scale = max(np.abs(want).max(), 1e-30)
            # serial f32 accumulation (compiled) vs float64 accumulation (interpreter)
            assert np.abs(got - want).max() / scale < 1e-3, f"{p.name}: max error {np.abs(got - want).max()}"
        else:
            np.testing.assert_array_equal(got, want)


def _poison(p):
    dt = _np(p.dtype)
    if np.issubdtype(dt, np.floating):
        return np.full(tuple(p.shape), np.nan, dt)
    if dt == np.bool_:
        return np.ones(tuple(p.shape), dt)
    return np.full(tuple(p.shape), np.iinfo(dt).min, dt)


def _np(dtype):
    return {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i64": np.int64, "i32": np.int32,
            "bool": np.bool_}.get(dtype, np.float32)


CUDA_RECORDS = [r for r in RECORDS if r["model"] in CUDA_SAMPLE]


@pytest.mark.parametrize("rec", CUDA_RECORDS, ids=[r["model"] for r in CUDA_RECORDS])
def test_compat_sample_cuda_compiles_with_nvcc(rec):
    r = _checked(rec)
    b = build(r, "cuda")
    try:
        ok, log = nvcc_compile(b.cuda_source, "sm_90")
    except NvccNotFound:
        pytest.skip("nvcc not found")
    assert ok, log


def test_corpus_is_complete():
    assert len(RECORDS) >= 80
