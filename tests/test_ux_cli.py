"""Small things a demanding user notices (issue #34): an unknown option is reported with the
command's own usage (its options), not the top level's list of commands."""

from __future__ import annotations

import subprocess
import sys

import pytest

from leirc.cli.main import COMMANDS, main


def test_unknown_option_prints_the_subcommands_usage():
    p = subprocess.run([sys.executable, "-m", "leirc", "build", "--bogus", "k.leir"], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.startswith("usage: leirc build ") and "--budget N" in p.stderr
    assert p.stderr.rstrip().endswith("leirc build: error: unrecognized arguments: --bogus")
    assert "COMMAND ..." not in p.stderr


@pytest.mark.parametrize("command", [c for c in COMMANDS if c != "lsp"])
def test_every_command_reports_its_own_usage(command, capsys):
    with pytest.raises(SystemExit) as e:
        main([command, "--no-such-flag", "x.leir"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: leirc {command}") and f"leirc {command}: error: " in err


def test_an_unknown_option_without_a_command_is_the_top_levels(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--bogus"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: leirc [-h] [--version] COMMAND") and "unrecognized arguments: --bogus" in err
