"""The ``leirc simplify`` pipeline (leirc.opt.simplify) and its command."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from leirc.opt.simplify import PASSES, simplify_expr, simplify_kernel
from leirc.lang import ast as A
from leirc.lang.checker import check_kernel
from leirc.lang.parser import parse
from leirc.lang.printer import print_expr

REPO = Path(__file__).resolve().parents[1]

SRC = r"""% pipeline test
\kernel k(A: f32[4, 8], G: f32[4]) -> (Y: f32[4, 8], S: f32[4], T: f32[4]) {
  L^{4}_{i=0} L^{8}_{j=0} [
    E^{f32,g}_{i} = E^{f32,g}_{i} + exp(A^{f32,g}_{i,j});
  ];
  L^{4}_{i=0} L^{8}_{j=0} [
    Y^{f32,g}_{i,j} = (A^{f32,g}_{i,j} + G^{f32,g}_{i} - G^{f32,g}_{i})/E^{f32,g}_{i}*E^{f32,g}_{i}*(2*3) + A^{f32,g}_{i,j}/G^{f32,g}_{i}*G^{f32,g}_{i} + sqrt(4.0)*1;
  ];
  L^{4}_{i=0} L^{8}_{j=0} [
    S^{f32,g}_{i} = S^{f32,g}_{i} + (A^{f32,g}_{i,j} - A^{f32,g}_{i,j}*1 + exp(G^{f32,g}_{i} - 1.0) + exp(G^{f32,g}_{i} - 1.0));
  ];
  L^{4}_{i=0} [
    T^{f32,g}_{i} = if_then_else(1 < 2, G^{f32,g}_{i}, 0.0) + if_then_else(i < 2, G^{f32,g}_{i}, G^{f32,g}_{i}) + --G^{f32,g}_{i};
  ];
}
"""


def K(src):
    r = parse(src)
    assert r.ok, r.diagnostics
    return r.module.kernels[0]


def E(text):
    r = parse(f"Zq^{{f32,g}}={text};")
    assert r.ok
    return A.strip_spans(r.module.kernels[0].body[0].value)


@pytest.mark.parametrize("src, out, passes", [
    ("X^{f32,g}+0", "X^{f32,g}", {"fold": 1}),
    ("0-X^{f32,g}", "-X^{f32,g}", {"fold": 1}),
    ("X^{f32,g}*1.0/1", "X^{f32,g}", {"fold": 2}),
    ("2*3+X^{f32,g}", "6+X^{f32,g}", {"fold": 1}),
    ("7//2+7%2*X^{f32,g}", "3+X^{f32,g}", {"fold": 3}),
    ("exp(0.0)*X^{f32,g}", "X^{f32,g}", {"fold": 2}),
    ("a*1.0", "a*1.0", {}),  # dropping the float literal would make an index expression integer
    ("z^{f32,g}+X^{f32,g}-z^{f32,g}", "X^{f32,g}", {"cancel": 1}),
    ("X^{f32,g}-(Y^{f32,g}+X^{f32,g})", "-Y^{f32,g}", {"cancel": 1}),
    ("X^{f32,g}/Z^{f32,g}*Z^{f32,g}", "X^{f32,g}/Z^{f32,g}*Z^{f32,g}", {}),  # Z may be 0
    ("X^{f32,g}/exp(Z^{f32,g})*exp(Z^{f32,g})", "X^{f32,g}", {"cancel": 1}),
    ("exp(X^{f32,g}-Y^{f32,g})+exp(X^{f32,g}-Y^{f32,g})", "2*exp(X^{f32,g}-Y^{f32,g})", {"combine": 1}),
    ("exp(X^{f32,g})*exp(X^{f32,g})/Y^{f32,g}", "exp(X^{f32,g})**2/Y^{f32,g}", {"combine": 1}),
    ("X^{f32,g}+X^{f32,g}", "X^{f32,g}+X^{f32,g}", {}),  # leaves cost nothing to repeat
    ("if_then_else(2<1,X^{f32,g},Y^{f32,g})", "Y^{f32,g}", {"fold": 1}),
    ("X^{f32,g}/0", "X^{f32,g}/0", {}),
])
def test_passes(src, out, passes):
    def nonzero(z):
        return isinstance(z, A.Call) and z.func == "exp"

    new, counter = simplify_expr(E(src), nonzero)
    assert print_expr(new) == out
    assert counter == passes


def test_kernel_pipeline():
    k = K(SRC)
    new, rep = simplify_kernel(k)
    assert check_kernel(new).ok
    got = {c.stmt: c.after for c in rep.changes}
    # E is a sum of exponentials, so /E*E cancels; G may be 0, so /G*G stays
    assert got["N1.S0"] == ("A^{f32,g}_{i,j}*6+A^{f32,g}_{i,j}/G^{f32,g}_{i}*G^{f32,g}_{i}+2.0")
    # the reduction keeps its form: only its operand changed
    assert got["N2.S0"] == "S^{f32,g}_{i}+2*exp(G^{f32,g}_{i}-1.0)"
    assert got["N3.S0"] == "G^{f32,g}_{i}+G^{f32,g}_{i}+G^{f32,g}_{i}"
    assert "N0.S0" not in got
    assert rep.nodes_after < rep.nodes_before
    assert not rep.skipped


def test_idempotent_on_stdlib():
    for name in ("softmax", "layernorm", "sdpa", "gelu", "groupnorm"):
        k = K((REPO / "stdlib" / f"{name}.leir").read_text())
        new, rep = simplify_kernel(k)
        again, rep2 = simplify_kernel(new)
        assert again == new and not rep2.changes


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "leirc.cli.main", "simplify", *map(str, args)],
                          capture_output=True, text=True, cwd=REPO, timeout=120)


def test_cli_text_and_json(tmp_path):
    p = tmp_path / "k.leir"
    p.write_text(SRC)
    r = run_cli(p)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("% pipeline test\n")
    assert "S^{f32,g}_{i} = S^{f32,g}_{i} + 2*exp(G^{f32,g}_{i} - 1.0);" in r.stdout
    assert K(r.stdout) == simplify_kernel(K(SRC))[0]
    j = run_cli(p, "--json")
    assert j.returncode == 0, j.stderr
    d = json.loads(j.stdout)
    assert d["passes"] == list(PASSES) and d["statements_changed"] == 3
    assert d["kernels"][0]["changes"][1]["passes"] == {"fold": 2, "cancel": 1, "combine": 1}
    assert d["nodes_after"] < d["nodes_before"]
    out = tmp_path / "o.leir"
    assert run_cli(p, "-o", out, "--compact").returncode == 0
    assert K(out.read_text()) == K(r.stdout)


def test_cli_errors(tmp_path):
    bad = tmp_path / "bad.leir"
    bad.write_text(r"\kernel k(A: f32[4]) -> (Y: f32[4]) { L^{4}_{i=0} [ Y^{f32,g}_{i} = B^{f32,g}_{i}; ]; }")
    r = run_cli(bad)
    assert r.returncode == 1 and "E018" in r.stderr
    assert run_cli(tmp_path / "missing.leir").returncode == 2
    assert run_cli(REPO / "stdlib" / "softmax.leir", "--kernel", "nope").returncode == 2
