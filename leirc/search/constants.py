"""Names the CLI needs without importing the search machinery (the engine, the evaluator)."""

ALGORITHMS = ("beam", "greedy", "bfs", "dfs", "mcts", "chain", "evolve")
PROPOSERS = ("menu", "htam", "reuse", "o1", "o2", "llm")
#: what -O search uses when --proposer is not given (llm joins them when an endpoint is named)
DEFAULT_PROPOSERS = ("menu", "htam", "reuse", "o1", "o2")
#: the LLM proposers (leirc.search.llm_proposers): Step-TP single step, Autocomp plan->implement, HTAM + LLM
LLM_MODES = ("steptp", "autocomp", "htam")
