"""Reference outputs computed once per (reference kernel, seed, distribution), and per
(PyTorch module, weights, seed) for the module oracle (:class:`ModuleReference`).

A search verifies many candidates against one reference program; the inputs and the
interpreter's outputs for each (seed, dist) are the same every time. :class:`CachedReference`
is the reference side of :func:`leirc.verify.verify` (its ``reference_cache=`` parameter):
it draws the inputs with :func:`leirc.interp.random_inputs`, runs the interpreter, and
computes the masks of reference outputs that stay unwritten (poisoned) exactly as
``verify`` does (with ``check_uninit`` where the interpreter has it), then keeps the
result. A program with f16/bf16 accumulators small enough for it
(:func:`leirc.verify.uses_literal`) runs in the literal interpreter, which rounds after
every term as the language and compiled code do (the vectorized one sums in float64).
``verify`` bypasses the cache for explicit ``domains``, the literal oracle asked for
explicitly and the ``special``, ``range`` and ``branches`` probes, whose inputs depend on
more than (seed, dist). Cached arrays are made read-only: ``verify`` copies
inputs before handing them to a candidate and never writes the reference outputs, so a
candidate cannot corrupt the cache for the next one.
"""

from __future__ import annotations

import inspect
import io
import os
from typing import Optional

import numpy as np

from ..interp import Interpreter, random_inputs
from ..interp import dtypes as D
from ..io import write_atomic

#: Entries beyond this many bytes (inputs + outputs) are computed but not kept.
DEFAULT_MAX_BYTES = 2 << 30


def _uninit_kw() -> dict:
    """verify() runs the reference with ``check_uninit`` (reads of never-written elements
    are errors) where the interpreter has it; the cache must give the same verdicts."""
    try:
        return {"check_uninit": True} if "check_uninit" in inspect.signature(Interpreter.run).parameters else {}
    except (TypeError, ValueError):  # pragma: no cover
        return {}


_UNINIT = _uninit_kw()


def _freeze(arrays: dict) -> dict:
    for a in arrays.values():
        if isinstance(a, np.ndarray):
            a.flags.writeable = False
    return arrays


class CachedReference:
    """The reference side of a verification, cached per (seed, dist).

    ``result`` is the reference kernel's CheckResult; ``fingerprint`` identifies it (the
    canonical fingerprint when not given)."""

    def __init__(self, result, *, fingerprint: Optional[str] = None, max_bytes: int = DEFAULT_MAX_BYTES):
        self.result = result
        self.kernel = result.kernel
        if fingerprint is None:
            from ..lang.canonical import fingerprint as canonical_fingerprint

            fingerprint = canonical_fingerprint(result.kernel)
        self.fingerprint = fingerprint
        self.max_bytes = int(max_bytes)
        from ..verify import uses_literal

        #: f16/bf16 accumulators are run literally (per-term rounding), like verify() does
        self.literal = uses_literal(result)
        self.hits = 0
        self.misses = 0
        self._interp: Optional[Interpreter] = None
        self._runs: dict = {}
        self._bytes = 0

    def run(self, seed: int, dist: str) -> tuple[dict, dict, dict]:
        """(inputs, reference outputs, unwritten-element masks) for one input set."""
        key = (int(seed), str(dist))
        got = self._runs.get(key)
        if got is not None:
            self.hits += 1
            return got
        self.misses += 1
        inputs = random_inputs(self.kernel, key[0], key[1])
        outs, unw = self._reference_run(inputs)
        entry = (_freeze(inputs), _freeze(outs), _freeze(unw))
        size = sum(a.nbytes for part in entry for a in part.values() if isinstance(a, np.ndarray))
        if self._bytes + size <= self.max_bytes:
            self._runs[key] = entry
            self._bytes += size
        return entry

    def _reference_run(self, inputs: dict) -> tuple[dict, dict]:
        if self._interp is None:
            self._interp = Interpreter(self.result, vectorize=not self.literal)
        kw = _UNINIT
        outs = self._interp.run(inputs, **kw)
        unw = {}
        for p in self.kernel.outputs:
            n, dt = p.name, p.dtype
            m = D.poison_mask(outs[n], dt)
            if not D.is_float(dt) and m.any():
                # an integer output equal to the sentinel may be a real value: unwritten only
                # if it also holds the second sentinel in a run poisoned with that one
                again = self._interp.run(inputs, poison_alt=True, **kw)
                m = m & D.poison_mask(again[n], dt, True)
            unw[n] = m
        return outs, unw

    @property
    def cached_runs(self) -> int:
        return len(self._runs)


class ModuleReference:
    """Reference runs of a PyTorch module, per input seed: ``(inputs, outputs)`` as lists of
    arrays (the module's tensor inputs in order, its outputs in order), computed once per
    (model, weights, seed) and kept -- in memory, and with ``directory`` also on disk
    (``DIR/<key>/seed_<s>.npz``, written atomically), so a later process reuses them.

    ``key`` identifies everything the outputs depend on except the seed (the model file's
    bytes, the weights, the thread count, the torch and leirc versions: see
    :meth:`leirc.engine.oracles.TorchOracle.key`). Arrays are read-only, like
    :class:`CachedReference`'s."""

    def __init__(self, key: str, directory: Optional[str] = None):
        self.key = key
        self.directory = None if directory is None else os.path.join(directory, key)
        self.hits = 0
        self.disk_hits = 0
        self.misses = 0
        self._runs: dict = {}

    def _path(self, seed: int) -> Optional[str]:
        return None if self.directory is None else os.path.join(self.directory, f"seed_{int(seed)}.npz")

    def get(self, seed: int) -> Optional[tuple[list, list]]:
        got = self._runs.get(int(seed))
        if got is not None:
            self.hits += 1
            return got
        path = self._path(seed)
        if path is not None and os.path.isfile(path):
            try:
                with np.load(path, allow_pickle=False) as z:
                    got = _split({k: z[k] for k in z.files})
            except (OSError, ValueError, KeyError):
                got = None  # a damaged entry is recomputed (and rewritten)
            if got is not None:
                self.disk_hits += 1
                self._runs[int(seed)] = got
                return got
        self.misses += 1
        return None

    def put(self, seed: int, arrays: dict) -> tuple[list, list]:
        """Keep one run given as ``{"in_0": ..., "out_0": ...}`` (the worker's file)."""
        entry = _split(arrays)
        self._runs[int(seed)] = entry
        path = self._path(seed)
        if path is not None:
            os.makedirs(self.directory, exist_ok=True)
            buf = io.BytesIO()
            np.savez(buf, **arrays)
            write_atomic(path, buf.getvalue())
        return entry

    @property
    def cached_runs(self) -> int:
        return len(self._runs)


def _split(arrays: dict) -> tuple[list, list]:
    def part(prefix: str) -> list:
        n = sum(1 for k in arrays if k.startswith(prefix))
        out = [np.asarray(arrays[f"{prefix}{k}"]) for k in range(n)]
        for a in out:
            a.flags.writeable = False
        return out

    return part("in_"), part("out_")
