"""The PyTorch frontend's supported-operator table (issue #34): ``docs/frontend-ops.md`` is
generated from the registration tables and up to date; ``leirc import --list-ops`` lists the
same operators, without torch."""

from __future__ import annotations

from pathlib import Path

from leirc.cli.main import main
from leirc.frontend.ops import BINARY, FUNCTIONS, METHODS, MODULES, UNARY
from leirc.frontend.ops.catalog import markdown, refused, supported_ops

DOC = Path(__file__).resolve().parents[1] / "docs" / "frontend-ops.md"


def test_the_doc_is_up_to_date():
    assert DOC.read_text() == markdown(), \
        "regenerate it: leirc import --list-ops --markdown > docs/frontend-ops.md"


def test_every_registered_operator_is_listed_once():
    ops = supported_ops()
    listed = {(o.kind, o.name) for o in ops}
    assert len(listed) == len(ops)
    assert {("module", m) for m in MODULES} <= listed
    for name in list(FUNCTIONS) + list(UNARY) + list(BINARY):
        assert ("function", name) in listed, name
    for name in METHODS:  # a method is listed as such unless a function of that name serves it
        assert ("method", name) in listed or ("function", name) in listed, name
    conv = next(o for o in ops if o.name == "Conv2d")
    assert conv.family == "modules" and conv.spelled == "nn.Conv2d"
    cat = next(o for o in ops if o.name == "cat")
    assert cat.family == "shape" and "concat" in cat.aliases
    assert "matrix_power" in refused()
    for o in ops:
        assert f"| `{o.spelled}` |" in DOC.read_text()


def test_list_ops_through_the_cli(capsys):
    assert main(["import", "--list-ops"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(supported_ops()) and any(ln.split()[-1] == "nn.Conv2d" for ln in out)
    assert main(["import", "--list-ops", "--markdown"]) == 0
    assert capsys.readouterr().out == DOC.read_text()
    assert main(["import", "--markdown"]) == 2
    assert "--markdown goes with --list-ops" in capsys.readouterr().err
    assert main(["import"]) == 2
    assert "give a MODEL.py" in capsys.readouterr().err
