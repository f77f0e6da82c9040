"""Every site every graph strategy lists on every stdlib kernel applies and checks clean
(apply_step re-checks the result and raises StrategyBug otherwise). How fast the listing is
is a benchmark, not a test: ``benchmarks/strategies_latency.py --level graph --all``."""

import pytest

from leirc.strategies import all_strategies, apply_step, enumerate_sites
from test_graph_helpers import STDLIB_NAMES, stdlib

GRAPH = [s.name for s in all_strategies() if s.level == "graph"]


@pytest.mark.parametrize("kernel", STDLIB_NAMES)
def test_every_site_applies_and_checks(kernel):
    k = stdlib(kernel)
    for site in enumerate_sites(k, GRAPH):
        for st in site.steps():
            apply_step(k, st)  # raises NotApplicable/StrategyBug on a bad site


def test_registered_as_graph_level():
    assert sorted(GRAPH) == sorted([
        "common_subexpression_elimination", "compute_inline", "dead_code_elimination", "expression_reorder",
        "expression_splitting", "operator_fission", "operator_fusion", "outer_fusion", "tensor_concat_to_fuse_operators",
        "tensor_split_to_decouple_operators"])
