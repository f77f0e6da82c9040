"""Names the CLI needs without importing the search machinery (the engine, the evaluator)."""

ALGORITHMS = ("beam", "greedy", "bfs", "dfs", "mcts", "chain")
PROPOSERS = ("menu", "htam", "reuse", "o1", "llm")
