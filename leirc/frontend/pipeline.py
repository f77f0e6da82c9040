"""``leirc build MODEL.py``: import -> compile -> verify against PyTorch -> time against PyTorch.

:func:`build_model` is the whole pipeline for one KernelBench-format model file; the
``build`` command calls it for ``.py`` inputs, and ``benchmarks/run.py`` calls it once per
workload. Compilation and the compiled runs go through :mod:`leirc.lower` (imported lazily:
this package itself never imports TVM):

1. import (:func:`leirc.frontend.import_model`), checked with the leirc checker;
2. compile in-process with :func:`leirc.lower.build` (``-O0``: the naive lowering of the
   imported kernel, one nest per operator);
3. verify the compiled kernel against the PyTorch module on three input seeds
   (:func:`leirc.frontend.verify_against_torch`, leirc rule);
4. time PyTorch eager and ``torch.compile`` in-process and the compiled kernel with
   :func:`leirc.lower.runner.time_kernel` (sandboxed worker), with the same protocol
   (``benchmarking.md`` §4.2: fixed threads, 3 rotating input sets, 3 warm-ups, median of
   10 measurements of >= 50 ms).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Optional, Sequence

from . import bench
from .errors import FrontendError

#: seeds of the input sets used for timing (verification uses 0, 1, 2)
TIMING_SEEDS = (100, 101, 102)


@dataclass
class BuildReport:
    model: str
    imported: bool = False
    import_error: Optional[str] = None
    import_s: Optional[float] = None
    leir_path: Optional[str] = None
    weights_path: Optional[str] = None
    wrapper_path: Optional[str] = None
    n_nests: Optional[int] = None
    built: bool = False
    build_error: Optional[str] = None
    build_s: Optional[float] = None
    verified: Optional[bool] = None
    verify_summary: Optional[str] = None
    eager_ms: Optional[float] = None
    compile_ms: Optional[float] = None
    compile_error: Optional[str] = None
    compile_setup_s: Optional[float] = None
    leirc_ms: Optional[float] = None
    leirc_error: Optional[str] = None
    torch_threads: Optional[int] = None
    tvm_threads: Optional[int] = None
    target: str = "llvm"
    versions: dict = field(default_factory=dict)

    @property
    def speedup_eager(self) -> Optional[float]:
        if self.eager_ms and self.leirc_ms:
            return self.eager_ms / self.leirc_ms
        return None

    @property
    def speedup_compile(self) -> Optional[float]:
        if self.compile_ms and self.leirc_ms:
            return self.compile_ms / self.leirc_ms
        return None

    def to_json(self) -> dict:
        d = asdict(self)
        d["speedup_eager"] = self.speedup_eager
        d["speedup_compile"] = self.speedup_compile
        return d


def _versions() -> dict:
    import numpy
    import torch

    v = {"torch": torch.__version__, "numpy": numpy.__version__}
    try:
        from importlib.metadata import version

        v["tvm"] = version("apache-tvm")
    except Exception:  # noqa: BLE001
        pass
    return v


def build_model(path: str, *, out_dir: Optional[str] = None, target: str = "llvm", threads: int = 2,
                verify: bool = True, seeds: Sequence[int] = (0, 1, 2), time_it: bool = True,
                torch_compile: bool = True, wrapper: bool = False, log=None) -> BuildReport:
    """Run the pipeline on one model file; never raises for model problems (they are in
    the report)."""
    import torch

    from .importer import import_loaded
    from .loader import load_model
    from .verify import _kernel_of, leir_inputs, verify_against_torch

    def say(msg):
        if log:
            log(msg)

    torch.set_num_threads(threads)  # the timed worker gets ``threads`` explicitly (TVM_NUM_THREADS)
    rep = BuildReport(model=os.path.abspath(path), target=target, versions=_versions())
    t0 = time.perf_counter()
    try:
        loaded = load_model(path)
        res = import_loaded(loaded)
    except FrontendError as e:
        rep.import_error = str(e)
        say(f"import failed: {e}")
        return rep
    rep.imported = True
    rep.import_s = time.perf_counter() - t0
    cr = _kernel_of(res.text)
    rep.n_nests = len(cr.kernel.body)
    say(f"imported: kernel with {len(cr.kernel.inputs)} inputs, {rep.n_nests} top-level items")
    stem = os.path.splitext(os.path.basename(path))[0]
    if out_dir:
        from ..cli.cmd_import import save_weights

        os.makedirs(out_dir, exist_ok=True)
        rep.leir_path = os.path.join(out_dir, f"{stem}.leir")
        with open(rep.leir_path, "w", encoding="utf-8") as f:
            f.write(res.text)
        rep.weights_path = os.path.join(out_dir, f"{stem}.npz")
        save_weights(rep.weights_path, res.weights)

    # PyTorch eager first, before TVM's thread pool exists in this process
    pristine = load_model(path)  # fresh weights for the reference runs (seed 42)
    sets = [pristine.get_inputs(s) for s in TIMING_SEEDS] if time_it else []
    if time_it:
        st = bench.time_torch(pristine.model, sets, threads=threads)
        rep.eager_ms = st.median_ms if st.ok else None
        rep.torch_threads = st.threads

    # compile (in-process; leirc.lower owns TVM)
    from .. import lower

    t0 = time.perf_counter()
    try:
        built = lower.build(cr, target, file=rep.leir_path or f"<{stem}.leir>")
    except lower.LowerError as e:
        rep.build_error = e.diagnostic.message
        say(f"build failed: {rep.build_error}")
        return rep
    rep.built = True
    rep.build_s = time.perf_counter() - t0
    say(f"compiled for {target} in {rep.build_s:.1f} s")
    if out_dir and target == "llvm":
        try:
            built.export_library(os.path.join(out_dir, f"{stem}.so"))
        except Exception as e:  # noqa: BLE001 - exporting needs a host compiler
            say(f"note: could not export the library: {e}")
    if out_dir and wrapper:
        rep.wrapper_path = os.path.join(out_dir, f"{stem}_leirc.py")
        with open(rep.wrapper_path, "w", encoding="utf-8") as f:
            f.write(modelnew_source(path, res, target))

    if verify:
        v = verify_against_torch(path, res.text, res.weights, seeds=seeds,
                                 runner=lambda src, feed: built.run(feed), loaded=load_model(path))
        rep.verified = v.ok
        rep.verify_summary = v.summary().replace("(custom;", f"({target};")
        say(("verified: " if v.ok else "NOT verified: ") + rep.verify_summary)
    if not time_it:
        return rep

    # the compiled kernel on the same rotating input sets, in a sandboxed worker
    from ..lower.runner import time_kernel

    feeds = [leir_inputs(cr.kernel, s, res.weights) for s in sets]
    tr = time_kernel(res.text, feeds, target=target, threads=threads, warmup=bench.WARMUP, repeat=bench.REPEAT,
                     min_repeat_ms=bench.MIN_REPEAT_MS)
    if tr.ok:
        rep.leirc_ms = tr.median_ms
        rep.tvm_threads = tr.threads
    else:
        rep.leirc_error = f"{tr.error_kind}: {tr.error}"
    if torch_compile:
        sc = bench.time_torch(load_model(path).model, sets, compile=True, threads=threads)
        if sc.ok:
            rep.compile_ms = sc.median_ms
            rep.compile_setup_s = sc.setup_s
        else:
            rep.compile_error = sc.error
    say(f"PyTorch eager {_ms(rep.eager_ms)}, torch.compile {_ms(rep.compile_ms)}, leirc -O0 {_ms(rep.leirc_ms)}"
        f" (threads: torch {rep.torch_threads}, TVM {rep.tvm_threads})")
    return rep


def _ms(x) -> str:
    return "n/a" if x is None else f"{x:.3f} ms"


def modelnew_source(path: str, res, target: str = "llvm") -> str:
    """A KernelBench-style solution file: ``class ModelNew`` with Model's constructor and
    forward signature whose forward runs the compiled LEIR kernel. Parameters are created
    by an inner ``Model`` (so under the harness's seed they equal Model's) and passed to the
    kernel by name."""
    meta = res.meta
    runtime = [p["name"] for p in meta["inputs"]]
    params = {p["name"]: p["qualname"] for p in meta["params"]}
    outputs = [p["name"] for p in meta["outputs"]]
    return f'''"""ModelNew for {os.path.basename(path)}: forward runs the LEIR kernel compiled by leirc (target {target}).

Generated by `leirc build {os.path.basename(path)}`. The parameters live in an inner Model (built with the same
constructor arguments, so under KernelBench's seed they equal the reference model's) and are passed to the
kernel by name.
"""

import importlib.util
import os
import sys

import numpy as np
import torch
import torch.nn as nn

_MODEL_FILE = {os.path.abspath(path)!r}
_RUNTIME = {runtime!r}
_PARAMS = {params!r}
_OUTPUTS = {outputs!r}
_TARGET = {target!r}
LEIR = {res.text!r}


def _load_reference():
    spec = importlib.util.spec_from_file_location("_leirc_reference_model", _MODEL_FILE)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


_ref = _load_reference()
get_inputs = _ref.get_inputs
get_init_inputs = _ref.get_init_inputs
_BUILT = None


def _built():
    global _BUILT
    if _BUILT is None:
        from leirc.lang.checker import check_text
        from leirc.lower import build

        _BUILT = build(check_text(LEIR).results[0], _TARGET)
    return _BUILT


def _attr(module, qualname):
    obj = module
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


class ModelNew(nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()
        self.ref = _ref.Model(*args, **kwargs)

    def forward(self, *inputs):
        tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
        feed = {{n: t.detach().cpu().contiguous().numpy() for n, t in zip(_RUNTIME, tensors)}}
        for n, q in _PARAMS.items():
            feed[n] = _attr(self.ref, q).detach().cpu().contiguous().numpy()
        outs = _built().run(feed)
        res = [torch.from_numpy(np.asarray(outs[n])) for n in _OUTPUTS]
        return res[0] if len(res) == 1 else tuple(res)
'''


def print_report(rep: BuildReport, stream=None) -> None:
    import sys

    stream = stream or sys.stdout
    print(json.dumps(rep.to_json(), indent=2), file=stream)
