"""leirc.algebra.signs (sign facts proved from the program) and leirc.algebra.prove
(identity, new singularities, deep application of a transform)."""

import sympy as sp

from leirc.algebra.prove import OPAQUE_ALL, OPAQUE_HARD, deep_apply, is_nonzero, new_singularities, prove_equal
from leirc.algebra.signs import tensor_signs
from leirc.lang.checker import check_text

SRC = r"""\kernel k(A: f32[4, 8]) -> (Y: f32[4, 8]) {
  L^{4}_{i=0} L^{8}_{j=0} [ M^{f32,g}_{i} = max(M^{f32,g}_{i}, A^{f32,g}_{i,j}); ];
  L^{4}_{i=0} L^{8}_{j=0} [ E^{f32,g}_{i} = E^{f32,g}_{i} + exp(A^{f32,g}_{i,j} - M^{f32,g}_{i}); ];
  L^{4}_{i=0} L^{8}_{j=0} [ Q^{f32,g}_{i} = Q^{f32,g}_{i} + A^{f32,g}_{i,j}**2; ];
  L^{4}_{i=0} [ R^{f32,g}_{i} = sqrt(Q^{f32,g}_{i} + 1e-05); ];
  L^{4}_{i=0} L^{8}_{j=0} [ C^{f32,g}_{i} = C^{f32,g}_{i} + exp(A^{f32,g}_{i,j}) - 1.0; ];
  L^{4}_{i=0} L^{8}_{j=0} [ S^{f32,g}_{i,j} = if_then_else(j < 1, exp(A^{f32,g}_{i,j}), S^{f32,g}_{i,j-1}*E^{f32,g}_{i}); ];
  L^{4}_{i=0} L^{8}_{j=0} [ Y^{f32,g}_{i,j} = exp(A^{f32,g}_{i,j} - M^{f32,g}_{i})/E^{f32,g}_{i}*R^{f32,g}_{i}*S^{f32,g}_{i,j}; ];
}
"""


def test_tensor_signs():
    res = check_text(SRC).results[0]
    signs = tensor_signs(res)
    assert signs["E"] == "positive"  # a sum of exponentials over >= 1 iteration
    assert signs["Q"] == "nonnegative" and signs["R"] == "positive"
    assert signs["S"] == "positive"  # a scan, by induction over its guard
    assert signs["Y"] == "positive"
    assert "M" not in signs and "C" not in signs and "A" not in signs  # max of inputs; exp - 1; an input


def test_prove_equal():
    x, y = sp.symbols("x y", real=True)
    assert prove_equal(sp.exp(x - y), sp.exp(x) * sp.exp(-y))
    assert prove_equal((x - y) ** 2, x ** 2 - 2 * x * y + y ** 2)
    assert prove_equal(sp.Piecewise((x, y < 0), (x, True)), x)
    assert not prove_equal(x + 1, x)
    assert not prove_equal(sp.log(x * y), sp.log(x) + sp.log(y))  # false for x, y < 0


def test_new_singularities():
    x, y = sp.symbols("x y", real=True)
    p = sp.Symbol("p", positive=True)
    assert new_singularities(x, x / y * y) == []  # SymPy cancels it on construction: nothing to see
    assert new_singularities(x, sp.Mul(x, sp.Pow(y, -1), y, evaluate=False)) == [y]
    assert new_singularities(x, x / p) == []
    assert new_singularities((x**2 - 1) / (x - 1), x + 1) == []
    assert new_singularities(1 / (x**2 - 1), 1 / (x - 1) / (x + 1)) == []  # factors of an old denominator
    assert new_singularities(x, sp.log(x)) == [x]
    assert new_singularities(sp.log(x), sp.log(x) + 1) == []
    assert is_nonzero(sp.exp(x)) and is_nonzero(p + 1) and not is_nonzero(x)


def test_deep_apply_keeps_opaque_functions_atomic():
    x, y = sp.symbols("x y", real=True)
    e = x * y + x * sp.exp(x * y + x)
    assert deep_apply(e, sp.factor, OPAQUE_ALL) == x * (y + sp.exp(x * (y + 1)))
    # a Max is an atom whose arguments are transformed
    m = sp.Max(x * y + x, y) + x
    assert deep_apply(m, sp.factor, OPAQUE_HARD) == x + sp.Max(x * (y + 1), y)
