"""Property test: random legal strategy sequences (length 1-6) applied to stdlib kernels
always give programs that check and verify against the original (interpreter target,
within the tolerance the verifier applies; every strategy is at worst exact-in-reals).

The CI run is bounded; a longer run: ``.venv/bin/python benchmarks/random_sequences.py``
(results in BENCHMARKS.md)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import STDLIB
from leirc.lang import ast as A
from leirc.lang.checker import check_kernel
from leirc.lang.parser import parse
from leirc.lang.printer import PRETTY, print_module
from leirc.strategies import NotApplicable, apply_step, enumerate_sites

#: cheap kernels (the interpreter verifies each in well under a second)
KERNELS = ["relu", "gelu", "softmax", "log_softmax", "layernorm", "rmsnorm", "mean_reduce_dim1",
           "sum_reduce_dim1", "max_reduce_dim1", "gemm_bias_relu", "gemv", "mse_loss"]
#: math strategies that rewrite expressions via SymPy are covered by their own tests; they are
#: slow to enumerate on every step, so the property draws from the structural families
SKIP = {"factorization", "expand_factorization", "cancellation", "expand_cancellation", "apart", "together",
        "powsimp", "expand_powsimp", "logsimp", "expand_log", "collect", "expand_collect", "exponential_split",
        "multiplicative_split", "additive_split"}


def _kernel(name: str) -> A.Kernel:
    return parse((STDLIB / f"{name}.leir").read_text()).module.kernels[0]


def random_walk(kernel: A.Kernel, draw_index, length: int):
    """Apply ``length`` steps, each chosen by ``draw_index(n)`` among the listed concrete
    steps; returns (kernel, steps)."""
    steps = []
    for _ in range(length):
        sites = [s for s in enumerate_sites(kernel) if s.strategy not in SKIP]
        candidates = [step for s in sites for step in s.steps(limit=4)]
        if not candidates:
            break
        step = candidates[draw_index(len(candidates))]
        try:
            kernel = apply_step(kernel, step)
        except NotApplicable:
            continue  # a listed site may still be refused by the full check: fine, never wrong
        steps.append(step)
    return kernel, steps


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(st.sampled_from(KERNELS), st.integers(1, 6), st.data())
def test_random_legal_sequences_verify(name, length, data):
    from leirc.verify import verify

    original = _kernel(name)
    new, steps = random_walk(original, lambda n: data.draw(st.integers(0, n - 1)), length)
    assert check_kernel(new).ok
    if not steps:
        return
    rep = verify(print_module(A.Module((new,)), PRETTY), print_module(A.Module((original,)), PRETTY),
                 seeds=(0,), dists=("signed",), target="interp")
    assert rep.equal, (name, [str(s) for s in steps], rep.failures)
