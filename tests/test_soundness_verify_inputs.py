"""Issue #30, items 2 and 3: no verdict without probes, and inputs that cover the space.

Each test is written from a class of wrong program that the verifier used to call EQUAL
(every float draw below ~5e3, integers in [0, 16) / [-8, 8], approximate candidates
without probes), on new small programs, interpreted (``target="interp"``) so they run in
milliseconds."""

from __future__ import annotations

import json

import numpy as np
import pytest

from leirc.cli import schemas
from leirc.cli.main import main
from leirc.interp import check_source
from leirc.interp.inputs import branch_points, random_inputs, range_exponent, sum_points
from leirc.verify import VERIFY_PROTOCOL, evidence, verify
from leirc.verify.coverage import Coverage

OLD_PROBES = ("logits", "mixed", "special")  # the probes before issue #30


def k(params: str, body: str, name: str = "k") -> str:
    return f"\\kernel {name}({params}) {{\n{body}\n}}\n"


# -- integers over their whole range ------------------------------------------------------

U8_SIG = "X: u8[64], Y: u8[64]) -> (Z: u8[64]"
WRAPPING = k(U8_SIG, "  L^{64}_{i=0} [ Z^{u8,g}_{i} = X^{u8,g}_{i} + Y^{u8,g}_{i}; ];", "add")
SATURATING = k(U8_SIG, "  L^{64}_{i=0} [ Z^{u8,g}_{i} = if_then_else(i32(X^{u8,g}_{i}) + i32(Y^{u8,g}_{i}) > 255, "
                       "255, X^{u8,g}_{i} + Y^{u8,g}_{i}); ];", "add")


def test_a_saturating_u8_add_is_not_a_wrapping_one():
    old = verify(SATURATING, WRAPPING, target="interp", probes=OLD_PROBES)
    assert old.equal  # small integers never wrap: the blind spot
    rep = verify(SATURATING, WRAPPING, target="interp")
    assert not rep.equal
    assert any("(seed 0, range)" in f and "must match exactly" in f for f in rep.failures), rep.failures
    # the branches probe alone finds it too: X + Y planted at 255, 256 and 254
    kern = check_source(SATURATING).kernel
    assert len(sum_points(kern)) == 1
    x = random_inputs(kern, 0, "branches")
    s = x["X"].astype(int) + x["Y"].astype(int)
    assert {254, 255, 256} <= set(s.tolist())
    rep = verify(SATURATING, WRAPPING, target="interp", probes=("branches",), coverage=True)
    assert not rep.equal and any("branches" in f for f in rep.failures)
    cov = next(c for c in rep.branch_coverage if c["program"] == "candidate")
    assert cov["measured"] and cov["true"] and cov["false"], rep.branch_coverage


I32_SUM = k("W: i32[8, 64]) -> (S: i32[8]",
            "  L^{8}_{i=0} L^{64}_{k=0} [ S^{i32,g}_{i} = S^{i32,g}_{i} + W^{i32,g}_{i,k}; ];", "rowsum")


def test_a_reference_that_overflows_is_not_a_counterexample():
    # 64 full-range i32 terms overflow the reference (an error by the language's rules):
    # the range probe narrows until the reference is defined, and says so
    rep = verify(I32_SUM, target="interp")
    assert rep.equal, rep.failures
    assert "range" in rep.probes
    note = next(n for n in rep.probe_notes if n.startswith("range:"))
    assert "level 0" not in note and "signed integer overflow" in note, rep.probe_notes


I32_COPY = k("W: i32[256]) -> (Z: i32[256]", "  L^{256}_{i=0} [ Z^{i32,g}_{i} = W^{i32,g}_{i}; ];", "copy")


def test_a_candidate_that_overflows_where_the_reference_does_not_is_rejected():
    scaled = I32_COPY.replace("W^{i32,g}_{i};", "(W^{i32,g}_{i} * 4) // 4;")
    assert verify(scaled, I32_COPY, target="interp", probes=OLD_PROBES).equal
    rep = verify(scaled, I32_COPY, target="interp")
    assert not rep.equal and any("signed integer overflow" in f for f in rep.failures), rep.failures


def test_range_inputs_reach_the_dtype_boundaries():
    kern = check_source(k("U: u8[4096], W: i32[4096], H: i16[4096]) -> (Y: u8[4096]",
                          "  L^{4096}_{i=0} [ Y^{u8,g}_{i} = U^{u8,g}_{i}; ];")).kernel
    x = random_inputs(kern, 0, "range", level=0)
    assert x["U"].min() == 0 and x["U"].max() == 255
    assert x["W"].min() == np.iinfo(np.int32).min and x["W"].max() == np.iinfo(np.int32).max
    assert (x["H"] == -1).any() and (x["H"] == 0).any() and (x["H"] == 1).any()
    # magnitudes spread over the range: not all huge, not all small
    w = np.abs(x["W"].astype(np.int64))
    assert (w < 1 << 8).mean() > 0.1 and (w > 1 << 24).mean() > 0.1
    narrow = random_inputs(kern, 0, "range", level=1)
    assert np.abs(narrow["W"].astype(np.int64)).max() <= 1 << 15


def test_an_integer_divisor_never_draws_zero_in_the_wide_probes():
    src = k("A: i32[256], D: i32[256]) -> (Q: i32[256]",
            "  L^{256}_{i=0} [ Q^{i32,g}_{i} = A^{i32,g}_{i} // D^{i32,g}_{i}; ];")
    kern = check_source(src).kernel
    for dist in ("range", "branches"):
        assert (random_inputs(kern, 3, dist)["D"] != 0).all()
    assert verify(src, target="interp").equal


# -- floats across magnitudes ----------------------------------------------------------------

ABS = k("X: f32[128]) -> (Y: f32[128]", "  L^{128}_{i=0} [ Y^{f32,g}_{i} = abs(X^{f32,g}_{i}); ];", "a")
SQRT_SQUARE = k("X: f32[128]) -> (Y: f32[128]",
                "  L^{128}_{i=0} [ Y^{f32,g}_{i} = sqrt(X^{f32,g}_{i} * X^{f32,g}_{i}); ];", "a")


def test_a_rewrite_that_overflows_at_large_magnitudes_is_caught():
    assert verify(SQRT_SQUARE, ABS, target="interp", probes=OLD_PROBES).equal  # |x| < 5e3: x*x fits
    rep = verify(SQRT_SQUARE, ABS, target="interp")
    assert not rep.equal and any("range" in f and "NaN/Inf" in f for f in rep.failures), rep.failures


def test_the_magnitude_sweep_stops_where_the_reference_stops_being_finite():
    # exp overflows f32 above ~88: the widest finite level is kept and named
    src = k("X: f32[64]) -> (Y: f32[64]", "  L^{64}_{i=0} [ Y^{f32,g}_{i} = exp(X^{f32,g}_{i}); ];", "e")
    rep = verify(src, target="interp")
    assert rep.equal, rep.failures
    note = next(n for n in rep.probe_notes if n.startswith("range:"))
    assert "level 4" in note and f"1e{range_exponent('f32', 4)}" in note, note


# -- branch-guided values ---------------------------------------------------------------------

GEMM = k("A: f32[16, 32], B: f32[32, 16]) -> (C: f32[16, 16]",
         "  L^{16}_{i=0} L^{16}_{j=0} L^{32}_{k=0} [\n"
         "    C^{f32,g}_{i,j} = C^{f32,g}_{i,j} + A^{f32,g}_{i,k} * B^{f32,g}_{k,j};\n  ];", "gemm")
GEMM_PLANTED = GEMM.replace("A^{f32,g}_{i,k} * B^{f32,g}_{k,j};",
                            "if_then_else(A^{f32,g}_{i,k} > 1e5, 0.0, A^{f32,g}_{i,k} * B^{f32,g}_{k,j});")


def test_a_gemm_with_a_planted_branch_is_caught_and_the_branch_is_covered():
    old = verify(GEMM_PLANTED, GEMM, target="interp", probes=OLD_PROBES, coverage=True)
    assert old.equal
    assert old.branch_coverage[0]["true"] is False and old.branch_coverage[0]["program"] == "candidate"
    assert any("was never true" in w for w in old.warnings), old.warnings
    rep = verify(GEMM_PLANTED, GEMM, target="interp", probes=("branches",), coverage=True)
    assert not rep.equal and any("branches" in f for f in rep.failures), rep.failures
    cov = rep.branch_coverage[0]
    assert cov["measured"] and cov["true"] and cov["false"] and not rep.warnings


def test_thresholds_are_solved_through_monotone_functions():
    src = k("X: f32[64], Y: f32[64], N: i32[64]) -> (Z: f32[64]",
            "  L^{64}_{i=0} [ Z^{f32,g}_{i} = if_then_else(2.0 * X^{f32,g}_{i} + 1.0 > 7.0, max(X^{f32,g}_{i}, "
            "Y^{f32,g}_{i}), if_then_else(N^{i32,g}_{i} < -1000, 1.0, 0.0)); ];")
    kern = check_source(src).kernel
    th, pairs = branch_points(kern)
    assert th == {"X": [3.0], "N": [-1000.0]} and pairs == [("X", "Y")]
    x = random_inputs(kern, 0, "branches")
    for name, t in (("X", 3.0), ("N", -1000)):
        v = x[name]
        assert (v == t).any() and (v > t).any() and (v < t).any()
    assert (x["X"] == x["Y"]).any()  # the boundary of max(X, Y)
    assert (x["X"] == np.nextafter(np.float32(3.0), np.float32(4.0))).any() or (x["X"] > 3.0).any()


def test_coverage_measures_intermediates_and_says_what_it_cannot_measure():
    src = k("A: f32[8, 8], B: f32[8, 8]) -> (Y: f32[8, 8]",
            "  L^{8}_{i=0} L^{8}_{j=0} L^{8}_{k=0} [ C^{f32,g}_{i,j} = C^{f32,g}_{i,j} + A^{f32,g}_{i,k} * "
            "B^{f32,g}_{k,j}; ];\n"
            "  L^{8}_{i=0} [ M^{f32,g}_{i} = max(M^{f32,g}_{i}, A^{f32,g}_{i,0}); ];\n"
            "  L^{8}_{i=0} L^{8}_{j=0} [ Y^{f32,g}_{i,j} = max(C^{f32,g}_{i,j}, 0.0) + "
            "if_then_else(A^{f32,g}_{i,j} - M^{f32,g}_{i} > 0.0, 1.0, 0.0); ];")
    cov = Coverage(check_source(src).kernel)
    assert cov.needs_intermediates
    rep = verify(src, target="interp", coverage=True)
    assert rep.equal, rep.failures
    by = {c["comparison"]: c for c in rep.branch_coverage}
    relu = by["max(C^{f32,g}_{i,j}, 0.0)"]
    assert relu["measured"] and relu["true"] and relu["false"]
    assert not by["A^{f32,g}_{i,j}-M^{f32,g}_{i} > 0.0"]["measured"]
    assert {c["program"] for c in rep.branch_coverage} == {"reference"}  # one program, listed once


def test_verify_json_has_the_coverage_the_evidence_and_a_warning(tmp_path, capsys):
    (tmp_path / "p.leir").write_text(GEMM_PLANTED)
    (tmp_path / "r.leir").write_text(GEMM)
    status = main(["verify", str(tmp_path / "p.leir"), str(tmp_path / "r.leir"), "-t", "interp", "--json",
                   "--probes", "logits"])
    out = capsys.readouterr()
    doc = json.loads(out.out)
    assert status == 0 and doc["equal"] and not schemas.validate(doc, "verify")
    assert doc["branch_coverage"][0]["comparison"] == "A^{f32,g}_{i,k} > 100000.0"
    assert doc["evidence"] == "tested" and doc["warnings"]
    assert "warning: branch coverage: candidate" in out.err


# -- approximate and model-written candidates face the probes --------------------------------

SOFTMAX = k("X: f32[8, 64]) -> (Y: f32[8, 64]",
            "  L^{8}_{i=0} L^{64}_{j=0} [ Rmax^{f32,g}_{i} = max(Rmax^{f32,g}_{i}, X^{f32,g}_{i,j}); ];\n"
            "  L^{8}_{i=0} L^{64}_{j=0} [ Rsum^{f32,g}_{i} = Rsum^{f32,g}_{i} + exp(X^{f32,g}_{i,j} - "
            "Rmax^{f32,g}_{i}); ];\n"
            "  L^{8}_{i=0} L^{64}_{j=0} [ Y^{f32,g}_{i,j} = exp(X^{f32,g}_{i,j} - Rmax^{f32,g}_{i})/"
            "Rsum^{f32,g}_{i}; ];", "softmax")
NO_SHIFT = k("X: f32[8, 64]) -> (Y: f32[8, 64]",
             "  L^{8}_{i=0} L^{64}_{j=0} [ Rsum^{f32,g}_{i} = Rsum^{f32,g}_{i} + exp(X^{f32,g}_{i,j}); ];\n"
             "  L^{8}_{i=0} L^{64}_{j=0} [ Y^{f32,g}_{i,j} = exp(X^{f32,g}_{i,j})/Rsum^{f32,g}_{i}; ];", "softmax")


def test_an_approximate_candidate_faces_the_probes():
    assert verify(NO_SHIFT, SOFTMAX, target="interp", probes=()).equal  # the grid alone is blind
    rep = verify(NO_SHIFT, SOFTMAX, target="interp", numerics="approximate")
    assert not rep.equal and rep.probes and rep.evidence == "tested"
    assert any("logits" in f for f in rep.failures), rep.failures


def test_evidence_labels():
    assert evidence("bitwise") == evidence("exact-in-reals") == "proven"
    assert evidence("approximate") == evidence(None) == "tested"
    rep = verify(SOFTMAX, target="interp", numerics="exact-in-reals")
    assert rep.equal and rep.evidence == "proven"
    assert rep.passed_on().startswith("seeds 0,1,2 x uniform, normal, signed; probes logits, mixed, special, range")


def test_the_protocol_number_changed_with_the_grid():
    assert VERIFY_PROTOCOL >= 3  # evaluations cached under the old grid are not reused


@pytest.mark.parametrize("dist", ["range", "branches"])
def test_wide_probes_respect_inferred_domains(dist):
    src = k("X: f32[512], D: f32[512]) -> (Y: f32[512]",
            "  L^{512}_{i=0} [ Y^{f32,g}_{i} = if_then_else(X^{f32,g}_{i} > 2.0, log(X^{f32,g}_{i}), 0.0) / "
            "D^{f32,g}_{i}; ];")
    kern = check_source(src).kernel
    x = random_inputs(kern, 1, dist)
    assert (x["X"] > 0).all() and (x["D"] != 0).all()
    assert verify(src, target="interp").equal
