"""Start several processes on one step at the same instant, round after round.

Races between processes (two of them creating one SQLite file) hide behind the import time
of a fresh interpreter: processes started one after another rarely meet. Each child here
announces itself and spins on a start file, so every round releases them together."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_together(workdir: Path, step: str, *, processes: int, rounds: int, timeout_s: float = 60) -> None:
    """Run ``step`` (Python source; it sees ``r``, the round, and ``tag``, the process's
    number as a string) in ``processes`` children per round; assert that every child exits 0."""
    child = textwrap.dedent("""
        import os, sys
        base, tag, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
        step = compile(sys.argv[4], "<step>", "exec")
        for r in range(rounds):
            open(os.path.join(base, f"ready-{r}-{tag}"), "w").close()
            while not os.path.exists(os.path.join(base, f"go-{r}")):
                pass
            exec(step, {"r": r, "tag": tag, "base": base})
    """)
    tags = [str(i) for i in range(processes)]
    procs = [subprocess.Popen([sys.executable, "-c", child, str(workdir), tag, str(rounds), textwrap.dedent(step)],
                              cwd=REPO, stderr=subprocess.PIPE) for tag in tags]
    try:
        for r in range(rounds):
            deadline = time.monotonic() + timeout_s
            while not all((workdir / f"ready-{r}-{tag}").exists() for tag in tags):
                if any(p.poll() is not None for p in procs) or time.monotonic() > deadline:
                    break
                time.sleep(0.002)
            (workdir / f"go-{r}").touch()
        for p in procs:
            _, err = p.communicate(timeout=timeout_s)
            assert p.returncode == 0, err.decode()
    finally:
        for p in procs:
            p.kill()
