"""Every stdlib kernel, compiled for LLVM at its development size, verifies equal against
the reference interpreter (one seed, signed inputs; the unit tests of leirc.verify cover
the multi-seed protocol). Slow kernels take a few seconds each."""

from __future__ import annotations

import pytest

from conftest import STDLIB
from leirc.verify import verify

KERNELS = sorted(p.stem for p in STDLIB.glob("*.leir"))


@pytest.mark.parametrize("name", KERNELS)
def test_stdlib_kernel_verifies_on_llvm(name):
    rep = verify((STDLIB / f"{name}.leir").read_text(), seeds=(0,), dists=("signed",), target="llvm", timeout=300)
    assert rep.equal, rep.failures
