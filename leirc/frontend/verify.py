"""Verification of an imported LEIR kernel against the PyTorch module itself.

For each seed: ``torch.manual_seed(seed)``, fresh ``get_inputs()``, run the PyTorch
``Model`` (built once under seed 42 like KernelBench, so its weights equal the imported
ones) and the LEIR kernel on the same inputs and weights, and compare with the leirc rule
(``shared/notes/benchmarking.md`` §2.3): shape and dtype equal, no NaN/Inf,
``|y - y_ref| <= atol + rtol*|y_ref|`` with ``rtol = 1e-4`` and ``atol = 1e-4*max|y_ref|``,
and ``||y - y_ref|| / ||y_ref|| <= 1e-5`` (catches the all-zero softmax).

The LEIR side runs on the reference interpreter (``target="interp"``, :mod:`leirc.interp`)
or compiled through TVM in a sandboxed worker (``target="llvm"``,
:func:`leirc.lower.runner.run_kernel`), or through any ``runner(source, inputs) -> outputs``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np

from .errors import FrontendError
from .loader import LoadedModel, load_model

@dataclass
class Comparison:
    ok: bool
    reason: str = ""
    max_abs_err: float = 0.0
    norm_rel_err: float = 0.0
    max_ref: float = 0.0


def compare(y: np.ndarray, y_ref: np.ndarray, rtol: float = 1e-4, norm_tol: float = 1e-5) -> Comparison:
    """The leirc correctness rule for one output (float arrays; integers must be equal)."""
    y = np.asarray(y)
    y_ref = np.asarray(y_ref)
    if y.shape != y_ref.shape:
        return Comparison(False, f"shape {list(y.shape)} != reference {list(y_ref.shape)}")
    if y.dtype != y_ref.dtype:
        return Comparison(False, f"dtype {y.dtype} != reference {y_ref.dtype}")
    if y.dtype.kind not in "fc":
        eq = bool(np.array_equal(y, y_ref))
        return Comparison(eq, "" if eq else f"{int(np.sum(y != y_ref))} elements differ")
    if not np.all(np.isfinite(y)):
        n = int(np.sum(~np.isfinite(y)))
        return Comparison(False, f"{n} non-finite values (NaN/Inf) in the output")
    if not np.all(np.isfinite(y_ref)):
        return Comparison(False, "the PyTorch reference itself has NaN/Inf")
    y64 = y.astype(np.float64)
    r64 = y_ref.astype(np.float64)
    diff = np.abs(y64 - r64)
    max_ref = float(np.max(np.abs(r64))) if r64.size else 0.0
    atol = rtol * max_ref
    max_abs = float(np.max(diff)) if diff.size else 0.0
    nref = float(np.linalg.norm(r64))
    nrel = float(np.linalg.norm(y64 - r64) / nref) if nref > 0 else (0.0 if max_abs == 0 else math.inf)
    bad = diff > atol + rtol * np.abs(r64)
    if np.any(bad):
        k = int(np.argmax(diff - (atol + rtol * np.abs(r64))))
        pos = np.unravel_index(k, y.shape) if y.shape else ()
        return Comparison(False, f"{int(np.sum(bad))} elements outside tolerance (worst at {list(map(int, pos))}: "
                                 f"{float(y64.flat[k]):.7g} vs {float(r64.flat[k]):.7g})", max_abs, nrel, max_ref)
    if nrel > norm_tol:
        return Comparison(False, f"normwise relative error {nrel:.3g} > {norm_tol:g}", max_abs, nrel, max_ref)
    return Comparison(True, "", max_abs, nrel, max_ref)


@dataclass
class SeedResult:
    seed: int
    ok: bool
    outputs: list = field(default_factory=list)  # Comparison per output
    error: Optional[str] = None


@dataclass
class VerifyResult:
    ok: bool
    seeds: list  # SeedResult
    target: str

    def summary(self) -> str:
        if self.ok:
            worst = max((c.norm_rel_err for s in self.seeds for c in s.outputs), default=0.0)
            return f"verified against PyTorch on {len(self.seeds)} seeds ({self.target}; worst normwise rel. error {worst:.2g})"
        for s in self.seeds:
            if not s.ok:
                if s.error:
                    return f"seed {s.seed}: {s.error}"
                for k, c in enumerate(s.outputs):
                    if not c.ok:
                        return f"seed {s.seed}, output {k}: {c.reason}"
        return "failed"


def _kernel_of(leir_text: str):
    from ..lang.load import LoadError, load_kernel

    try:
        return load_kernel(leir_text)
    except LoadError as e:
        raise FrontendError(f"the LEIR program has errors: {e.message}") from None


def torch_reference(loaded: LoadedModel, seed: int):
    """(inputs, outputs) of the PyTorch model for input seed ``seed``."""
    import torch

    inputs = loaded.get_inputs(seed)
    with torch.no_grad():
        out = loaded.model(*inputs)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    return inputs, [o.detach().cpu().numpy() if isinstance(o, torch.Tensor) else np.asarray(o) for o in outs]


def leir_inputs(kernel, inputs: Sequence, weights: dict) -> dict:
    """Map runtime inputs (positionally) and weights (by name) onto the kernel's inputs."""
    import torch

    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    feed = {}
    k = 0
    for p in kernel.inputs:
        if p.name in weights:
            feed[p.name] = np.asarray(weights[p.name])
        else:
            if k >= len(tensors):
                raise FrontendError(f"kernel input '{p.name}' is neither a runtime input nor a weight")
            feed[p.name] = tensors[k].detach().cpu().numpy()
            k += 1
    return feed


def make_runner(target: str, check_result=None, *, threads: Optional[int] = None, timeout: float = 300.0):
    """A ``runner(source, inputs) -> {output: array}`` for the interpreter or a TVM target."""
    if target == "interp":
        from ..interp import run as interp_run

        def run_interp(source, inputs):
            cr = check_result or _kernel_of(source)
            return interp_run(cr, inputs)

        return run_interp

    def run_compiled(source, inputs):
        from ..lower.runner import run_kernel, zero_outputs  # lazy: TVM lives in leirc.lower

        cr = check_result or _kernel_of(source)
        res = run_kernel(source, inputs, zero_outputs(cr.kernel), target=target, threads=threads, timeout=timeout)
        if not res.ok:
            raise FrontendError(f"compiled kernel failed ({res.error_kind}): {res.error}")
        return res.outputs

    return run_compiled


def verify_against_torch(model_path: str, leir_text: str, weights: Optional[dict] = None,
                         seeds: Sequence[int] = (0, 1, 2), runner: Optional[Callable] = None,
                         target: str = "interp", *, loaded: Optional[LoadedModel] = None,
                         rtol: float = 1e-4, norm_tol: float = 1e-5, threads: Optional[int] = None) -> VerifyResult:
    """Run the LEIR kernel and the PyTorch model on ``seeds`` and compare (see module doc).

    ``weights``: the parameter inputs by LEIR name (from the import); ``None`` re-imports the
    model to get them. ``runner``: overrides ``target``."""
    if loaded is None:
        loaded = load_model(model_path)
    if weights is None:
        from .importer import import_loaded

        weights = import_loaded(loaded).weights
        loaded = load_model(model_path)  # a pristine model for the reference runs
    cr = _kernel_of(leir_text)
    run = runner or make_runner(target, cr, threads=threads)
    results = []
    for seed in seeds:
        try:
            inputs, refs = torch_reference(loaded, seed)
            feed = leir_inputs(cr.kernel, inputs, weights)
            outs = run(leir_text, feed)
        except FrontendError as e:
            results.append(SeedResult(seed, False, error=str(e)))
            continue
        except Exception as e:  # noqa: BLE001 - interpreter/runtime failures are verification failures
            results.append(SeedResult(seed, False, error=f"{type(e).__name__}: {e}"))
            continue
        comps = []
        for p, ref in zip(cr.kernel.outputs, refs):
            y = outs.get(p.name)
            if y is None:
                comps.append(Comparison(False, f"output {p.name} missing"))
                continue
            comps.append(compare(np.asarray(y), ref, rtol, norm_tol))
        if len(refs) != len(cr.kernel.outputs):
            comps.append(Comparison(False, f"{len(cr.kernel.outputs)} outputs, PyTorch returns {len(refs)}"))
        results.append(SeedResult(seed, all(c.ok for c in comps), comps))
    return VerifyResult(all(s.ok for s in results), results, target if runner is None else "custom")
