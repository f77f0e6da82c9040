"""The engine layer: one door for every client (CLI, ``-O1``, search, editor, dataset).

* :mod:`leirc.engine.program` -- ``Program`` (a checked kernel with a canonical
  fingerprint) and ``apply(program, step) -> Rewrite``;
* :mod:`leirc.engine.evaluate` -- ``Evaluator.evaluate(text) -> Evaluation``: build once in
  a sandboxed :class:`~leirc.lower.session.KernelSession`, verify against the interpreter
  with reference outputs cached per (reference, seed, dist)
  (:mod:`leirc.engine.refcache`), time in the same session, cache by content on disk;
* :mod:`leirc.engine.oracles` -- what candidates are compared with: ``InterpreterOracle``
  (the default) or ``TorchOracle`` (the user's PyTorch module, run in a worker process of
  :mod:`leirc.engine.torch_worker` with a timeout, outputs cached per model, weights, seed).

Names are re-exported lazily, so importing one submodule does not import the others
(the evaluator pulls in the interpreter, the verifier and the worker machinery).
"""

from __future__ import annotations

_LAZY = {
    "Evaluation": "evaluate", "Evaluator": "evaluate", "EvaluationCache": "evaluate",
    "CachedReference": "refcache", "ModuleReference": "refcache",
    "InterpreterOracle": "oracles", "TorchOracle": "oracles", "OracleError": "oracles", "verify_model": "oracles",
}


def __getattr__(name: str):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'leirc.engine' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{mod}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
