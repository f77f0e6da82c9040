"""Regression tests for the dependence bugs of issue 9 (each failed before leirc.analysis).

Only public entry points are used (``check_text``, the ``strategies`` and ``check`` CLI
commands), so the same tests can be run against an older tree."""

from __future__ import annotations

import pytest

from leirc.cli.main import main
from leirc.lang.checker import check_text


def K(body: str, sig: str = "(A: f32[8]) -> (C: f32[8])") -> str:
    return "\\kernel k" + sig + " {\n" + body + "\n}\n"


def codes(src: str) -> list[str]:
    return [d.code for d in check_text(src).diagnostics if d.is_error]


# W_{i//2, i%2} at i=2 is W[1,0]; W_{i//4, i%4} at i=4 is W[1,0] too: iterations 2 and 4
# touch one element, one of them writing it. The old test keyed the reconstructed
# dimension "i" by the subscript positions only, ignoring the divisor.
DIVMOD = ("L^{{4}}_{{a=0}}L^{{4}}_{{b=0}}[W^{{f32,g}}_{{a,b}} = 0.0;];"
          "{kind}^{{8}}_{{i=0}}[W^{{f32,g}}_{{i//2,i%2}} = A^{{f32,g}}_{{i}}; C^{{f32,g}}_{{i}} = W^{{f32,g}}_{{i//4,i%4}};];")
DIVMOD_NEST = ("L^{4}_{a=0}L^{4}_{b=0}[W^{f32,g}_{a,b} = 0.0;];"
               "L^{8}_{i=0}L^{2}_{j=0}[W^{f32,g}_{i//2,i%2} = W^{f32,g}_{i//4,i%4} + A^{f32,g}_{i} * j;];"
               "L^{8}_{i=0}[C^{f32,g}_{i} = W^{f32,g}_{i//4,i%4};];")

# T_{2*i+1} written at i, T_{2*i+2*j+k} read with k in [1,1]: at i=0, j=1 the read is
# T[3], written at i=1. The old GCD step dropped the one-iteration loop k from the gcd and
# with it the odd offset 1*k, then demanded an even difference: "independent".
GCD = ("L^{{16}}_{{a=0}}[T^{{f32,g}}_{{a}} = A^{{f32,g}}_{{a}};];"
       "{kind}^{{4}}_{{i=0}}[T^{{f32,g}}_{{2*i+1}} = A^{{f32,g}}_{{i}};"
       " L^{{2}}_{{j=0}}L^{{1}}_{{k=1}}[C^{{f32,g}}_{{2*i+j}} = T^{{f32,g}}_{{2*i+2*j+k}};];];")
GCD_SIG = "(A: f32[16]) -> (C: f32[8])"


@pytest.mark.parametrize("kind", ["P", "V"])
def test_divmod_pairs_with_different_divisors_are_a_dependence(kind):
    assert check_text(K(DIVMOD.format(kind="L"))).ok
    assert "E040" in codes(K(DIVMOD.format(kind=kind)))


def test_divmod_pair_with_the_same_divisor_still_reconstructs_the_index():
    same = K("L^{4}_{a=0}L^{4}_{b=0}[W^{f32,g}_{a,b} = 0.0;];"
             "P^{8}_{i=0}[W^{f32,g}_{i//4,i%4} = A^{f32,g}_{i}; C^{f32,g}_{i} = W^{f32,g}_{i//4,i%4};];")
    assert check_text(same).ok


@pytest.mark.parametrize("kind", ["P", "V"])
def test_one_iteration_loop_with_nonzero_start_keeps_its_offset(kind):
    assert check_text(K(GCD.format(kind="L"), GCD_SIG)).ok
    assert "E040" in codes(K(GCD.format(kind=kind), GCD_SIG))


def test_negative_coefficients_and_starts():
    # C_{7-i} is injective: no conflict; with i in [2,5], T_{7-i} read at i=5 is T_{i} written at i=2
    ok = K("P^{8}_{i=0}[C^{f32,g}_{7-i} = A^{f32,g}_{i};];")
    assert check_text(ok).ok
    bad = K("L^{8}_{a=0}[T^{f32,g}_{a} = A^{f32,g}_{a};];"
            "P^{4}_{i=2}[T^{f32,g}_{i} = A^{f32,g}_{i}; C^{f32,g}_{i} = T^{f32,g}_{7-i};];"
            "L^{8}_{i=0}[C^{f32,g}_{i} = T^{f32,g}_{i};];")
    assert "E040" in codes(bad)
    # i in [2,5] against 9-i in [4,7]: i=4 writes T[4] which iteration i=5 reads
    shifted = K("L^{8}_{a=0}[T^{f32,g}_{a} = A^{f32,g}_{a};];"
                "P^{4}_{i=2}[T^{f32,g}_{i} = A^{f32,g}_{i}; C^{f32,g}_{i} = T^{f32,g}_{9-i};];"
                "L^{8}_{i=0}[C^{f32,g}_{i} = T^{f32,g}_{i};];")
    assert "E040" in codes(shifted)
    # 2*i written and 2*i+1 read never meet, whatever the start
    parity = K("L^{16}_{a=0}[T^{f32,g}_{a} = A^{f32,g}_{a//2};];"
               "P^{4}_{i=1}[T^{f32,g}_{2*i} = A^{f32,g}_{i}; C^{f32,g}_{i} = T^{f32,g}_{2*i+1};];"
               "L^{8}_{i=0}[C^{f32,g}_{i} = T^{f32,g}_{i};];")
    assert check_text(parity).ok


FORBIDDEN = {"loop_vectorization", "loop_parallelization", "loop_binding", "loop_reorder"}


def _offered(tmp_path, capsys, src: str, loop_ref: str) -> set[str]:
    f = tmp_path / "k.leir"
    f.write_text(src)
    capsys.readouterr()
    assert main(["strategies", str(f)]) == 0
    out = capsys.readouterr().out
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] == "--arg" and parts[2] == f"loop={loop_ref}":
            names.add(parts[0])
    return names


def test_strategies_cli_does_not_offer_kind_changes_on_the_divmod_loop(tmp_path, capsys):
    offered = _offered(tmp_path, capsys, K(DIVMOD.format(kind="L")), "N1.i")
    assert "loop_split" in offered  # the loop is listed at all
    assert not offered & FORBIDDEN, offered
    offered = _offered(tmp_path, capsys, K(DIVMOD_NEST), "N1.i")
    assert "loop_split" in offered
    assert not offered & FORBIDDEN, offered


def test_check_cli_rejects_parallel_divmod_loop(tmp_path, capsys):
    f = tmp_path / "k.leir"
    f.write_text(K(DIVMOD.format(kind="P")))
    capsys.readouterr()
    assert main(["check", str(f)]) != 0
    cap = capsys.readouterr()
    assert "E040" in cap.out + cap.err
