"""Verification of an imported LEIR kernel against the PyTorch module itself, in this process.

For each seed: ``torch.manual_seed(seed)``, fresh ``get_inputs()``, run the PyTorch
``Model`` (built once under seed 42 like KernelBench, so its weights equal the imported
ones) and the LEIR kernel on the same inputs and weights, and compare each output with
:func:`leirc.verify.compare_output` -- the rule of ``leirc verify`` (shared/notes/
benchmarking.md §2.3): shape and dtype equal, no NaN/Inf, elementwise and normwise, with the
tolerance of the output's dtype (f32 rtol 1e-4 / normwise 1e-5, f64 1e-9 / 1e-12, f16 and
bf16 1e-2 / 1e-3) widened by the arithmetic error bound of the LEIR program on those inputs
(:mod:`leirc.verify.bound`: reduction lengths and dtypes, as for the interpreter oracle), so
a long f32 reduction that PyTorch sums in another order is not a false reject. A program the
bound does not model, or ``rtol``/``norm_tol`` given explicitly, selects the flat rule
(``atol = rtol * max|y_ref|``).

The LEIR side runs on the reference interpreter (``target="interp"``, :mod:`leirc.interp`)
or compiled through TVM in a sandboxed worker (``target="llvm"``,
:func:`leirc.lower.runner.run_kernel`), or through any ``runner(source, inputs) -> outputs``.
The PyTorch module runs here, in this process; the driver's verify pass and
:func:`leirc.engine.oracles.verify_model` run it sandboxed in a worker process instead
(:class:`leirc.engine.oracles.TorchOracle`), with the same comparison.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np

from ..interp import dtypes as D
from ..verify import compare_output, lazy_bounds, try_bound
from .errors import FrontendError
from .loader import LoadedModel, load_model


@dataclass
class Comparison:
    ok: bool
    reason: str = ""
    max_abs_err: float = 0.0
    norm_rel_err: float = 0.0
    max_ref: float = 0.0


def compare(y: np.ndarray, y_ref: np.ndarray, rtol: Optional[float] = None, norm_tol: Optional[float] = None,
            dtype: Optional[str] = None, where: str = "", bound=None) -> Comparison:
    """The leirc correctness rule for one output (:func:`leirc.verify.compare_output`).
    ``dtype`` is the output's LEIR dtype (default: ``y``'s); the reference must have it too.
    The tolerances are the dtype's unless ``rtol``/``norm_tol`` are given; ``bound`` (an
    array or a callable, see compare_output) widens them by the arithmetic error bound,
    None keeps the flat rule."""
    y = np.asarray(y)
    y_ref = np.asarray(y_ref)
    if dtype is None:
        dtype = D.leir_dtype(y.dtype)
        if dtype is None:
            return Comparison(False, f"dtype {y.dtype} has no LEIR equivalent")
    want = D.np_dtype(dtype)
    if y_ref.dtype != want:
        return Comparison(False, f"the reference has dtype {D.leir_dtype(y_ref.dtype) or y_ref.dtype}, "
                                 f"the kernel's output is {dtype}")
    c = compare_output("Y", y, y_ref, dtype, rtol=rtol, norm_tol=norm_tol, where=where, bound=bound)
    max_ref = 0.0
    if y_ref.size and D.is_float(dtype):
        with np.errstate(invalid="ignore"):
            finite = np.abs(y_ref.astype(np.float64))[np.isfinite(y_ref.astype(np.float64))]
        max_ref = float(finite.max()) if finite.size else 0.0
    reason = "" if c.ok else "; ".join(m.replace("output Y: ", "", 1) for m in c.failures[:2])
    return Comparison(c.ok, reason, c.max_abs_err, c.norm_rel_err, max_ref)


def to_numpy(t) -> np.ndarray:
    """A PyTorch tensor (or number) as a NumPy array of the matching LEIR dtype (bf16 goes
    through f32, which holds every bf16 value exactly)."""
    import torch

    if not isinstance(t, torch.Tensor):
        return np.asarray(t)
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        return t.float().numpy().astype(D.np_dtype("bf16"))
    return t.numpy()


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
    return inputs, [to_numpy(o) for o in outs]


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
            feed[p.name] = to_numpy(tensors[k])
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
        from ..lower.device import run_kernel, zero_outputs  # lazy: TVM lives in leirc.lower

        cr = check_result or _kernel_of(source)
        res = run_kernel(source, inputs, zero_outputs(cr.kernel), target=target, threads=threads, timeout=timeout)
        if not res.ok:
            raise FrontendError(f"compiled kernel failed ({res.error_kind}): {res.error}")
        return res.outputs

    return run_compiled


def verify_against_torch(model_path: str, leir_text: str, weights: Optional[dict] = None,
                         seeds: Sequence[int] = (0, 1, 2), runner: Optional[Callable] = None,
                         target: str = "interp", *, loaded: Optional[LoadedModel] = None,
                         rtol: Optional[float] = None, norm_tol: Optional[float] = None,
                         threads: Optional[int] = None, reference_text: Optional[str] = None) -> VerifyResult:
    """Run the LEIR kernel and the PyTorch model on ``seeds`` and compare (see module doc;
    ``rtol``/``norm_tol`` default to the output dtype's tolerances).

    ``weights``: the parameter inputs by LEIR name (from the import); ``None`` re-imports the
    model to get them. ``runner``: overrides ``target``. ``reference_text``: the imported
    program, whose arithmetic gives the error bound (``None``: imported here when needed) --
    never the kernel under test, which must not widen its own tolerance."""
    flat = rtol is not None or norm_tol is not None
    if loaded is None:
        loaded = load_model(model_path)
    if weights is None or (reference_text is None and not flat):
        from .importer import import_loaded

        imported = import_loaded(loaded)
        weights = imported.weights if weights is None else weights
        reference_text = imported.text if reference_text is None else reference_text
        loaded = load_model(model_path)  # a pristine model for the reference runs
    cr = _kernel_of(leir_text)
    run = runner or make_runner(target, cr, threads=threads)
    eb = None
    if not flat and reference_text is not None:
        try:
            ref = _kernel_of(reference_text)
        except FrontendError:  # no bound from a program that does not load: the flat rule
            ref = None
        same = ref is not None and [(p.name, p.dtype, tuple(p.shape)) for p in ref.kernel.inputs + ref.kernel.outputs] \
            == [(p.name, p.dtype, tuple(p.shape)) for p in cr.kernel.inputs + cr.kernel.outputs]
        eb = try_bound(ref)[0] if same else None
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
        bound_of = lazy_bounds(eb, feed)
        for p, ref in zip(cr.kernel.outputs, refs):
            y = outs.get(p.name)
            if y is None:
                comps.append(Comparison(False, f"output {p.name} missing"))
                continue
            comps.append(compare(np.asarray(y), ref, rtol, norm_tol, dtype=p.dtype,
                                 bound=bound_of(p.name) if D.is_float(p.dtype) else None))
        if len(refs) != len(cr.kernel.outputs):
            comps.append(Comparison(False, f"{len(cr.kernel.outputs)} outputs, PyTorch returns {len(refs)}"))
        results.append(SeedResult(seed, all(c.ok for c in comps), comps))
    return VerifyResult(all(s.ok for s in results), results, target if runner is None else "custom")
