"""Integer and literal semantics in the checker (issue 9, item 5).

* A literal adopts the type of the operation it meets; a literal that this type cannot
  represent is E025 (``U_{u8} + 300``, ``-1`` meeting an unsigned type, ``1e5`` in an f16
  product, a float literal stored into an integer tensor beyond its range or infinite).
* Signed integer overflow is an error: an integer intermediate (subscripts, loop-index
  arithmetic in values) whose interval provably leaves the range of its type is E026. An
  intermediate that *may* leave it (not provable either way) does not get a bounds proof
  (E030 for subscripts). Unsigned arithmetic wraps modulo 2^n and is never an overflow.
"""

from __future__ import annotations

import pytest

from leirc.lang.checker import check_text

TWO62 = str(2**62)


def K(body: str, sig: str = "(A: f32[8]) -> (C: f32[8])") -> str:
    return "\\kernel k" + sig + " {\n" + body + "\n}\n"


def codes(src: str) -> list[str]:
    return [d.code for d in check_text(src).diagnostics if d.is_error]


def diag(src: str, code: str):
    cf = check_text(src)
    return next(d for d in cf.diagnostics if d.code == code)


U8 = "(U: u8[8]) -> (C: u8[8])"
I32 = "(I: i32[8]) -> (C: i32[8])"
H16 = "(H: f16[8]) -> (C: f16[8])"


# -- E025: literals that do not fit the type they adopt -------------------------------

@pytest.mark.parametrize("body, sig", [
    ("L^{8}_{i=0}[C^{u8,g}_{i} = U^{u8,g}_{i} + 300;];", U8),
    ("L^{8}_{i=0}[C^{u8,g}_{i} = U^{u8,g}_{i} * -1;];", U8),
    ("L^{8}_{i=0}[C^{u8,g}_{i} = max(U^{u8,g}_{i}, 256);];", U8),
    ("L^{8}_{i=0}[C^{u8,g}_{i} = if_then_else(U^{u8,g}_{i} < 300, U^{u8,g}_{i}, 0);];", U8),
    ("L^{8}_{i=0}[C^{u8,g}_{i} = 256;];", U8),
    ("L^{8}_{i=0}[C^{u8,g}_{i} = -3;];", U8),
    ("L^{8}_{i=0}[C^{i32,g}_{i} = I^{i32,g}_{i} + 2147483648;];", I32),
    ("L^{8}_{i=0}[C^{i32,g}_{i} = I^{i32,g}_{i} + 300000000000;];", I32),
    ("L^{8}_{i=0}[C^{u8,g}_{i} = if_then_else(U^{u8,g}_{i} > -1, U^{u8,g}_{i}, 0);];", U8),
    ("L^{8}_{i=0}[C^{i32,g}_{i} = 1e20;];", I32),
    ("L^{8}_{i=0}[C^{i32,g}_{i} = inf;];", I32),
    ("L^{8}_{i=0}[C^{i32,g}_{i} = I^{i32,g}_{i} + i32(1e20);];", I32),
    ("L^{8}_{i=0}[C^{f16,g}_{i} = H^{f16,g}_{i} * 100000.0;];", H16),
    ("L^{8}_{i=0}[C^{f16,g}_{i} = H^{f16,g}_{i} + 70000;];", H16),
    ("L^{8}_{i=0}[C^{f32,g}_{i} = A^{f32,g}_{i} * 1e39;];", "(A: f32[8]) -> (C: f32[8])"),
])
def test_literal_that_does_not_fit_is_E025(body, sig):
    assert "E025" in codes(K(body, sig)), check_text(K(body, sig)).diagnostics


def test_E025_message_names_literal_and_type():
    d = diag(K("L^{8}_{i=0}[C^{u8,g}_{i} = U^{u8,g}_{i} + 300;];", U8), "E025")
    assert "300" in d.message and "u8" in d.message
    assert d.span is not None and d.span.line == 2


def test_literal_in_subscript_meeting_a_strong_type():
    src = K("L^{8}_{i=0}[C^{f32,g}_{i} = A^{f32,g}_{i} + B^{f32,g}_{J^{u8,g}_{i} + 300};];",
            "(A: f32[8], B: f32[8], J: u8[8]) -> (C: f32[8])")
    assert "E025" in codes(src)


@pytest.mark.parametrize("body, sig", [
    ("L^{8}_{i=0}[C^{u8,g}_{i} = U^{u8,g}_{i} + 255;];", U8),
    ("L^{8}_{i=0}[C^{u8,g}_{i} = U^{u8,g}_{i} - 1;];", U8),          # unsigned wraps: defined
    ("L^{8}_{i=0}[C^{u8,g}_{i} = u8(300);];", U8),                    # explicit cast wraps
    ("L^{8}_{i=0}[C^{i32,g}_{i} = I^{i32,g}_{i} + 2147483647;];", I32),
    ("L^{8}_{i=0}[C^{i32,g}_{i} = I^{i32,g}_{i} * -2147483648;];", I32),
    ("L^{8}_{i=0}[C^{i64,g}_{i} = i64(I^{i32,g}_{i}) + 300000000000;];", "(I: i32[8]) -> (C: i64[8])"),
])
def test_literals_that_fit_are_accepted(body, sig):
    src = K(body, sig)
    assert codes(src) == [], check_text(src).diagnostics


@pytest.mark.parametrize("body, sig", [
    ("L^{8}_{i=0}[C^{f16,g}_{i} = H^{f16,g}_{i} * 65504.0;];", H16),
    ("L^{8}_{i=0}[C^{f16,g}_{i} = H^{f16,g}_{i} * 1e-30;];", H16),       # underflow rounds, no error
    ("L^{8}_{i=0}[C^{f16,g}_{i} = max(H^{f16,g}_{i}, -inf);];", H16),     # inf is representable
    ("L^{8}_{i=0}[C^{f32,g}_{i} = A^{f32,g}_{i} + f64(1e39) * 0.0;];", "(A: f32[8]) -> (C: f32[8])"),
    ("L^{8}_{i=0}[C^{i32,g}_{i} = 2.5;];", I32),                          # W009 truncation only
    ("L^{8}_{i=0}[C^{f32,g}_{i} = A^{f32,g}_{i} + i*300;];", "(A: f32[8]) -> (C: f32[8])"),
])
def test_float_literals_that_fit(body, sig):
    assert codes(K(body, sig)) == [], check_text(K(body, sig)).diagnostics


# -- E026: provable signed overflow of an integer intermediate ------------------------

def test_subscript_intermediate_overflow_is_E026_not_proved():
    # (i*2^62)//2^62 is "in range" in the integers, but i*2^62 wraps int64 for i >= 2
    src = K(f"L^{{8}}_{{i=0}}[C^{{f32,g}}_{{i}} = A^{{f32,g}}_{{(i*{TWO62})//{TWO62}}};];")
    cs = codes(src)
    assert "E026" in cs, check_text(src).diagnostics
    d = diag(src, "E026")
    assert "i64" in d.message and TWO62 in d.message


def test_subscript_intermediate_overflow_in_target():
    src = K(f"L^{{8}}_{{i=0}}[C^{{f32,g}}_{{(i*{TWO62})//{TWO62}}} = A^{{f32,g}}_{{i}};];")
    assert "E026" in codes(src)


def test_subscript_without_overflow_still_proved():
    src = K(f"L^{{2}}_{{i=0}}[C^{{f32,g}}_{{(i*{TWO62})//{TWO62}}} = A^{{f32,g}}_{{i}};];"
            "L^{6}_{i=2}[C^{f32,g}_{i} = A^{f32,g}_{i};];")
    # i in [0, 1]: i*2^62 <= 2^62 fits int64
    assert codes(src) == [], check_text(src).diagnostics


def test_overflow_cancelled_in_an_affine_form_is_still_overflow():
    # affine folding would give i, but the intermediate i*2^62 + i overflows first
    src = K(f"L^{{8}}_{{i=0}}[C^{{f32,g}}_{{i*{TWO62} + i - i*{TWO62}}} = A^{{f32,g}}_{{i}};];")
    assert "E026" in codes(src)


def test_may_overflow_subscript_gets_no_bounds_proof():
    # i*i is not exact under interval arithmetic for i in [-3, 4]; both candidates are possible
    # (here the true maximum 16*2^59 = 2^63 overflows, but the checker cannot tell)
    two59 = str(2**59)
    src = K(f"L^{{8}}_{{i=-3}}[C^{{f32,g}}_{{i+3}} = A^{{f32,g}}_{{(i*i*{two59})//{two59}%8}};];")
    cs = codes(src)
    assert "E030" in cs and "E026" not in cs, check_text(src).diagnostics


def test_may_overflow_under_a_linear_guard_is_not_proved():
    # under i + j < 2 the product fits, but the checker only knows i, j in [0, 7]
    src = K(f"L^{{8}}_{{i=0}}L^{{8}}_{{j=0}}[C^{{f32,g}}_{{i}} = C^{{f32,g}}_{{i}} + "
            f"if_then_else(i + j < 2, A^{{f32,g}}_{{(i*{TWO62})//{TWO62}}}, 0.0);];")
    cs = codes(src)
    assert "E026" not in cs and "E030" in cs, check_text(src).diagnostics


def test_overflow_in_branch_excluded_by_range_guard_is_not_reported():
    src = K(f"L^{{8}}_{{i=0}}[C^{{f32,g}}_{{i}} = if_then_else(i < 2, A^{{f32,g}}_{{(i*{TWO62})//{TWO62}}}, 0.0);];")
    assert codes(src) == [], check_text(src).diagnostics


def test_overflow_under_inequality_guard_is_may_not_provable():
    # i != 7 is not captured by the interval facts: the overflow is possible, not proven
    src = K(f"L^{{8}}_{{i=0}}[C^{{f32,g}}_{{i}} = if_then_else(i != 7, A^{{f32,g}}_{{(i*{TWO62})//{TWO62}}}, 0.0);];")
    cs = codes(src)
    assert "E026" not in cs and "E030" in cs


def test_value_index_arithmetic_overflow_is_E026():
    src = K(f"L^{{8}}_{{i=0}}[C^{{i64,g}}_{{i}} = i*{TWO62};];", "(A: f32[8]) -> (C: i64[8])")
    cs = [d.code for d in check_text(src).diagnostics]
    assert "E026" in cs


def test_value_index_arithmetic_in_float_expression_overflows_in_i64():
    # weak integer sub-expressions compute in i64 even inside a float expression
    src = K(f"L^{{8}}_{{i=0}}[C^{{f32,g}}_{{i}} = A^{{f32,g}}_{{i}} * (i*{TWO62});];")
    assert "E026" in codes(src)


def test_weak_value_converted_to_narrow_signed_type():
    # i*100 adopts i8 in I8 + i*100: 700 does not fit i8
    src = K("L^{8}_{i=0}[C^{i8,g}_{i} = I^{i8,g}_{i} + i*100;];", "(I: i8[8]) -> (C: i8[8])")
    assert "E026" in codes(src)
    ok = K("L^{8}_{i=0}[C^{i8,g}_{i} = I^{i8,g}_{i} + i*10;];", "(I: i8[8]) -> (C: i8[8])")
    assert codes(ok) == []


def test_unsigned_weak_value_wraps_without_error():
    src = K("L^{8}_{i=0}[C^{u8,g}_{i} = U^{u8,g}_{i} + i*100;];", U8)
    assert codes(src) == [], check_text(src).diagnostics


def test_large_but_fitting_index_arithmetic_is_accepted():
    big = str(2**59)
    src = K(f"L^{{8}}_{{i=0}}[C^{{f32,g}}_{{(i*{big})//{big}}} = A^{{f32,g}}_{{i}};];")
    assert codes(src) == [], check_text(src).diagnostics


def test_data_guard_sentinel_bounds_are_not_overflow():
    # J < 2 bounds J from one side only; J*4 is data-dependent (W014), not a possible overflow
    src = K("L^{8}_{i=0}[C^{f32,g}_{i} = if_then_else(J^{i64,g}_{i} < 2, A^{f32,g}_{J^{i64,g}_{i}*4}, 0.0);];",
            "(A: f32[8], J: i64[8]) -> (C: f32[8])")
    cf = check_text(src)
    assert [d.code for d in cf.diagnostics] == ["W014"], cf.diagnostics


def test_long_integer_chain_checks_in_linear_time(monkeypatch):
    # was quadratic: every sub-expression's interval recomputed its whole sub-chain. Count
    # the interval evaluations instead of timing them (a count does not depend on the load)
    from leirc.lang import affine

    calls = {"n": 0}
    inner = affine.Facts._interval

    def counting(self, *a, **k):
        calls["n"] += 1
        return inner(self, *a, **k)

    monkeypatch.setattr(affine.Facts, "_interval", counting)
    for n_terms in (500, 2000):
        calls["n"] = 0
        terms = "+".join("i" for _ in range(n_terms))
        cf = check_text(K(f"L^{{8}}_{{i=0}}[C^{{f32,g}}_{{i}} = A^{{f32,g}}_{{({terms})%8}};];"))
        assert cf.ok, cf.diagnostics
        # a chain of n terms has about 2n nodes; each is evaluated a bounded number of times
        assert calls["n"] <= 8 * n_terms, (n_terms, calls["n"])
