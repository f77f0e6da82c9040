"""Import a KernelBench-format PyTorch module as one declared LEIR kernel.

Pipeline: load the model file (:mod:`.loader`), trace ``Model.forward`` with torch.fx
(``Tracer`` with stack traces recorded, so every node knows its source line), run
``ShapeProp`` on ``get_inputs()``, then interpret the graph node by node
(:class:`Importer`): view-like operators become index remappings (:mod:`.values`), every
other operator appends loop nests through :mod:`.builder` (operator handlers in
:mod:`.ops`). The result is printed in the declared form and checked with the leirc
checker before it is returned.

Kernel signature: runtime inputs first (in ``forward`` order, named after the forward
arguments: ``x`` -> ``X``), then the parameters and buffers the graph reads (named after
their qualified names: ``conv1.weight`` -> ``Conv1_weight``); their values are returned
in a dict keyed by those names (saved by the CLI as ``OUT.npz``). Outputs are ``Y``
(or ``Y0, Y1, ...`` for a tuple).
"""

from __future__ import annotations

import copy
import inspect
import os
import re
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from ..lang import ast as A
from ..lang.printer import PRETTY, print_kernel
from . import builder as B
from .errors import FrontendError, TraceError, UnsupportedOpError, describe, display_path, user_frame
from .loader import LoadedModel, load_model
from .ops import Ops
from .ops.common import leir_dtype, pretty_target
from .values import ConstVal, ExprVal, TensorRef, Val

#: long fx node names -> shorter tensor name stems
_SHORT_NAMES = (
    ("scaled_dot_product_attention", "attn"),
    ("binary_cross_entropy_with_logits", "bce_logits"),
    ("binary_cross_entropy", "bce"),
    ("cosine_embedding_loss", "cos_emb_loss"),
    ("hinge_embedding_loss", "hinge_loss"),
    ("triplet_margin_loss", "triplet_loss"),
    ("cosine_similarity", "cos_sim"),
    ("pairwise_distance", "pdist"),
)


@dataclass
class ImportResult:
    text: str  # the LEIR source (declared form)
    weights: dict[str, np.ndarray]  # parameter/buffer inputs by LEIR name
    meta: dict[str, Any] = field(default_factory=dict)
    loaded: Optional[LoadedModel] = None


# ---------------------------------------------------------------------------
# source locations


_FRAME_RE = re.compile(r'File "([^"]+)", line (\d+), in [^\n]*\n\s*([^\n]*)')


def node_location(node, model_path: Optional[str]) -> Optional[str]:
    """``model.py:12: y = self.conv(x)`` from an fx node's recorded stack trace."""
    st = node.meta.get("stack_trace") if hasattr(node, "meta") else None
    if not st:
        return None
    frames = _FRAME_RE.findall(st)
    if not frames:
        return None
    pick = None
    if model_path:
        for f, line, code in frames:
            if os.path.abspath(f) == os.path.abspath(model_path):
                pick = (f, line, code)
                break
    if pick is None:
        pick = frames[0]
    f, line, code = pick
    # below the working directory, the path as the user types it (``models/m.py``, as the
    # loader's errors print it); elsewhere the file's name, which the user just passed
    shown = display_path(f)
    return f"{shown if not os.path.isabs(shown) else os.path.basename(f)}:{line}: `{code.strip()}`"


def op_name(node) -> str:
    """A readable name of the operation of an fx node (for error messages)."""
    t = node.target
    if node.op == "call_method":
        return f"Tensor.{t}"
    if node.op == "call_module":
        return f"{t} ({node.meta.get('_leirc_module_type', 'module')})"
    if node.op == "call_function":
        return pretty_target(t)
    return str(t)


# ---------------------------------------------------------------------------
# tracing


def _make_tracer_class():
    import linecache
    import sys

    import torch
    import torch.fx as fx

    torch_dir = os.path.dirname(os.path.abspath(torch.__file__))
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    # frames of torch, leirc, the interpreter's own libraries and scripts are never "the model's"
    skip = tuple({torch_dir, here, os.path.abspath(sys.prefix), os.path.abspath(sys.base_prefix),
                  os.path.dirname(os.__file__)})

    class _LocTracer(fx.Tracer):
        """Records the model-source location of every node in ``node.meta["stack_trace"]``
        (cheaper than ``record_stack_traces``, which imports torch._inductor)."""

        def __init__(self, model_file: str):
            super().__init__()
            self.model_file = os.path.abspath(model_file)

        def create_node(self, *args, **kwargs):
            node = super().create_node(*args, **kwargs)
            f = sys._getframe(1)
            fallback = None
            while f is not None:
                fn = os.path.abspath(f.f_code.co_filename)
                if fn == self.model_file:
                    break
                if fallback is None and not fn.startswith(skip) and not fn.startswith("<"):
                    fallback = f
                f = f.f_back
            f = f or fallback
            if f is not None:
                fn = f.f_code.co_filename
                code = linecache.getline(fn, f.f_lineno).strip()
                node.meta["stack_trace"] = f'File "{fn}", line {f.f_lineno}, in {f.f_code.co_name}\n    {code}\n'
            return node

    return _LocTracer


_LOC_TRACER = None


def trace_model(loaded: LoadedModel, inputs: list):
    """torch.fx trace with stack traces; non-tensor runtime inputs become concrete args.
    Returns the GraphModule."""
    import torch
    import torch.fx as fx

    global _LOC_TRACER
    if _LOC_TRACER is None:
        _LOC_TRACER = _make_tracer_class()
    _LocTracer = _LOC_TRACER
    model = loaded.model
    concrete = None
    try:
        params = list(inspect.signature(model.forward).parameters)
    except (TypeError, ValueError):
        params = []
    nontensor = {params[i]: v for i, v in enumerate(inputs) if i < len(params) and not isinstance(v, torch.Tensor)}
    if nontensor:
        concrete = nontensor
    tracer = _LocTracer(loaded.path)
    try:
        graph = tracer.trace(model, concrete_args=concrete)
    except Exception as e:  # noqa: BLE001
        where = user_frame(e, loaded.path)
        if isinstance(e, fx.proxy.TraceError) or "symbolically traced" in str(e):
            # tracing itself gave up (a branch on a traced value, ...): say what is not supported
            raise TraceError(f"torch.fx cannot trace Model.forward ({describe(e)}); data-dependent control flow "
                             "or non-traceable Python is not supported", location=where) from None
        # the user's own code raised while being traced: their line and their error, once
        raise TraceError(f"{describe(e)} (raised by Model.forward while tracing it)", location=where) from None
    gm = fx.GraphModule(tracer.root, graph)
    return gm


def _model_file(model) -> str:
    """The file that defines the model's class (the user's MODEL.py)."""
    try:
        return inspect.getsourcefile(type(model)) or ""
    except TypeError:  # a class defined in C or interactively has no file
        return ""


def shape_prop(gm, model, inputs: list) -> None:
    import torch
    from torch.fx.passes.shape_prop import ShapeProp

    state = copy.deepcopy(model.state_dict())  # BatchNorm running stats change in train mode
    tensor_inputs = [x for x in inputs]
    try:
        with torch.no_grad():
            ShapeProp(gm).propagate(*tensor_inputs)
    except Exception as e:  # noqa: BLE001
        where = user_frame(e, _model_file(model))
        raise TraceError(f"running the traced model on get_inputs() failed: {describe(e)}", location=where) from None
    finally:
        model.load_state_dict(state)


# ---------------------------------------------------------------------------
# the graph interpreter


class Importer:
    def __init__(self, loaded: LoadedModel, gm, *, split_threshold: int = B.SPLIT_THRESHOLD):
        self.loaded = loaded
        self.gm = gm
        self.b = B.Builder(split_threshold=split_threshold)
        self.names = self.b.names
        self.inputs: list[A.Param] = []  # runtime inputs, in order
        self.params: list[A.Param] = []  # parameters/buffers, in order of first use
        self.weights: dict[str, np.ndarray] = {}
        self.param_by_qualname: dict[str, TensorRef] = {}
        self.param_qualnames: dict[str, str] = {}  # LEIR name -> qualified name
        self.env: dict = {}
        self.node = None
        self.ops = Ops(self)

    # -- helpers used by the op handlers ------------------------------------
    @property
    def hint(self) -> str:
        """Name stem for tensors made by the current node (its fx name, long ones shortened)."""
        if self.node is None:
            return "T"
        name = self.node.name
        for long, short in _SHORT_NAMES:
            if name.startswith(long):
                return short + name[len(long):]
        return name

    def out_dtype(self, default: str = "f32") -> str:
        tm = self.node.meta.get("tensor_meta") if self.node is not None else None
        if tm is not None and hasattr(tm, "dtype"):
            return leir_dtype(tm.dtype)
        return default

    def param(self, qualname: str, tensor) -> TensorRef:
        """The kernel input holding parameter/buffer ``qualname``."""
        if qualname in self.param_by_qualname:
            return self.param_by_qualname[qualname]
        dt = leir_dtype(tensor.dtype)
        name = self.names.fresh(qualname)
        from .verify import to_numpy  # bf16 has no NumPy dtype in torch: through f32, exactly

        arr = np.array(to_numpy(tensor.contiguous()), copy=True)
        shape = tuple(arr.shape)
        self.weights[name] = arr
        self.params.append(A.Param(name, dt, shape))
        ref = TensorRef(name, shape, dt, kind="param")
        self.param_by_qualname[qualname] = ref
        self.param_qualnames[name] = qualname
        return ref

    # -- the walk -------------------------------------------------------------
    def run(self, inputs: list, model_path: Optional[str]) -> list[tuple[str, Val]]:
        import torch

        placeholders = [n for n in self.gm.graph.nodes if n.op == "placeholder"]
        outputs: list = []
        for node in self.gm.graph.nodes:
            self.node = node
            try:
                if node.op == "placeholder":
                    k = placeholders.index(node)
                    v = inputs[k] if k < len(inputs) else None
                    if isinstance(v, torch.Tensor):
                        dt = leir_dtype(v.dtype)
                        name = self.names.fresh(node.target)
                        self.inputs.append(A.Param(name, dt, tuple(v.shape)))
                        self.env[node] = TensorRef(name, v.shape, dt, kind="input")
                    else:
                        self.env[node] = v
                    continue
                if node.op == "output":
                    outputs = self._collect_outputs(node.args[0])
                    continue
                val = self._eval(node)
                self._check_shape(node, val)
                val = self._match_dtype(node, val)
                self.env[node] = val
            except FrontendError as e:
                if e.location is None:
                    e.location = node_location(node, model_path)
                if isinstance(e, UnsupportedOpError):
                    # every operator the model needs and the frontend lacks, in one run
                    later = [f"{node_location(n, model_path) or op_name(n)}: {op_name(n)}"
                             for n in self._unsupported_after(node)]
                    if later:
                        e.message += "".join(f"\n  also unsupported: {x}" for x in later)
                raise
            except Exception as e:  # noqa: BLE001 - a translation bug or an odd argument
                raise FrontendError(
                    f"cannot translate {op_name(node)}: {type(e).__name__}: {e}",
                    location=node_location(node, model_path), op=op_name(node)) from e
        self.node = None
        return outputs

    def _unsupported_after(self, failed) -> list:
        """The call nodes after ``failed`` whose operator has no handler at all (the
        dispatcher's lookup without running anything; an operator that has a handler but
        rejects its arguments is found only when it runs)."""
        from .ops import ALIASES, BINARY, FUNCTIONS, METHODS, MODULES, UNARY

        def known(key) -> bool:
            key = ALIASES.get(key, key)
            return key is not None and (key in FUNCTIONS or key in UNARY or key in BINARY or key in METHODS)

        out, seen = [], False
        for n in self.gm.graph.nodes:
            if n is failed:
                seen = True
                continue
            if not seen:
                continue
            if n.op == "call_function":
                mod = getattr(n.target, "__module__", None) or ""
                name = getattr(n.target, "__name__", None) or str(n.target)
                if mod in ("_operator", "operator", "math", "builtins") or name == "getattr":
                    continue  # python arithmetic on sizes, attribute access
                if not known(name):
                    out.append(n)
            elif n.op == "call_method":
                name = str(n.target)
                key = name[:-1] if name.endswith("_") and not name.startswith("_") else name
                if not known(key):
                    out.append(n)
            elif n.op == "call_module":
                try:
                    cls = type(self.gm.get_submodule(n.target)).__name__
                except AttributeError:
                    continue
                if cls not in MODULES:
                    n.meta.setdefault("_leirc_module_type", cls)  # op_name names it
                    out.append(n)
        return out

    def _lookup(self, a):
        import torch.fx as fx

        return fx.node.map_arg(a, lambda n: self.env[n])

    def _eval(self, node):
        args = self._lookup(node.args)
        kwargs = self._lookup(node.kwargs)
        if node.op == "get_attr":
            return self._get_attr(node.target)
        if node.op == "call_module":
            mod = self.gm.get_submodule(node.target)
            node.meta["_leirc_module_type"] = type(mod).__name__
            return self.ops.call_module(node.target, mod, args, kwargs)
        if node.op == "call_function":
            return self.ops.call_function(node.target, args, kwargs)
        if node.op == "call_method":
            return self.ops.call_method(node.target, args, kwargs, node)
        raise FrontendError(f"unexpected fx node kind {node.op}")

    def _get_attr(self, target: str):
        import torch

        obj = self.gm
        for part in target.split("."):
            obj = getattr(obj, part)
        if isinstance(obj, torch.Tensor):
            if obj.dim() == 0:
                # a scalar tensor constant: inline it as a literal
                return ConstVal(obj.item(), (), leir_dtype(obj.dtype))
            return self.param(target, obj)
        return obj

    def _check_shape(self, node, val) -> None:
        tm = node.meta.get("tensor_meta")
        if tm is None:
            return
        if isinstance(val, Val) and hasattr(tm, "shape"):
            if tuple(tm.shape) != tuple(val.shape):
                raise FrontendError(
                    f"internal error: {op_name(node)} gives shape {list(val.shape)} here but "
                    f"{list(tm.shape)} in PyTorch", op=op_name(node))
        elif isinstance(val, (tuple, list)) and isinstance(tm, (tuple, list)):
            for v, t in zip(val, tm):
                if isinstance(v, Val) and hasattr(t, "shape") and tuple(t.shape) != tuple(v.shape):
                    raise FrontendError(
                        f"internal error: {op_name(node)} gives shape {list(v.shape)} here but "
                        f"{list(t.shape)} in PyTorch", op=op_name(node))

    def _match_dtype(self, node, val):
        """Give a value the dtype PyTorch computed for the node (a cast folded into the
        consumers' expressions) if a translation rule produced another one."""
        tm = node.meta.get("tensor_meta")
        if isinstance(val, Val) and tm is not None and hasattr(tm, "dtype"):
            want = leir_dtype(tm.dtype)
            if want != val.dtype:
                v = val
                return ExprVal(v.shape, lambda idx: A.Call(want, (v.at(idx),)), want)
        return val

    def _collect_outputs(self, out) -> list[tuple[str, Val]]:
        vals = list(out) if isinstance(out, (tuple, list)) else [out]
        res = []
        for k, v in enumerate(vals):
            v = self.env[v] if not isinstance(v, (Val, int, float)) and v in self.env else v
            if not isinstance(v, Val):
                raise UnsupportedOpError(f"output {k} of forward is not a tensor ({type(v).__name__})")
            res.append(v)
        return res


def finish_kernel(imp: Importer, outputs: list[Val], kernel_name: str = "model") -> A.Kernel:
    """Name the outputs and assemble the kernel."""
    single = len(outputs) == 1
    out_params = []
    items = list(imp.b.items)
    claimed: set[str] = set()
    input_names = {p.name for p in imp.inputs} | {p.name for p in imp.params}
    for k, v in enumerate(outputs):
        want = "Y" if single else f"Y{k}"
        name = want if want not in imp.names.used else imp.names.fresh(want)
        imp.names.reserve(name)
        if (isinstance(v, TensorRef) and v.kind == "intermediate" and v.name not in claimed
                and v.name not in input_names):
            items = [B.rename_tensor(it, v.name, name) for it in items]
            claimed.add(v.name)
            # later outputs that are the same tensor are copies of this one
            for j in range(k + 1, len(outputs)):
                if isinstance(outputs[j], TensorRef) and outputs[j].name == v.name:
                    outputs[j] = TensorRef(name, v.shape, v.dtype, kind="output")
        else:
            sub = B.Builder(names=imp.names)
            sub.assign(name, v.shape, lambda idx, v=v: v.at(idx), dtype=v.dtype, name=name)
            items.extend(sub.items)
        out_params.append(A.Param(name, v.dtype, tuple(v.shape)))
    return A.Kernel(kernel_name, tuple(imp.inputs) + tuple(imp.params), tuple(out_params), tuple(items))


def import_loaded(loaded: LoadedModel, *, split_threshold: int = B.SPLIT_THRESHOLD,
                  input_seed: int = 0, check: bool = True) -> ImportResult:
    import torch

    inputs = loaded.get_inputs(seed=input_seed)
    gm = trace_model(loaded, inputs)
    shape_prop(gm, loaded.model, [x for x in inputs])
    imp = Importer(loaded, gm, split_threshold=split_threshold)
    with torch.no_grad():
        outputs = imp.run(inputs, loaded.path)
    kernel = finish_kernel(imp, outputs)
    base = os.path.basename(loaded.path)
    header = [
        f"% {base}: imported by `leirc import` (torch.fx), torch {torch.__version__}.",
        "% Runtime inputs: " + (", ".join(p.name for p in imp.inputs) or "none") + "; parameters: "
        + (", ".join(f"{p.name} ({imp.param_qualnames[p.name]})" for p in imp.params) or "none") + ".",
    ]
    text = "\n".join(_wrap_comment(header)) + "\n" + print_kernel(kernel, PRETTY) + "\n"
    if check:
        from ..lang.checker import check_text

        cf = check_text(text, f"<{base}>")
        errs = [d for d in cf.diagnostics if d.is_error]
        if errs:
            from ..lang.diagnostics import render

            msg = "\n".join(render(d, text) for d in errs[:5])
            raise FrontendError(f"internal error: the emitted LEIR does not check:\n{msg}")
    meta = {
        "source": loaded.path,
        "kernel": kernel.name,
        "inputs": [{"name": p.name, "dtype": p.dtype, "shape": list(p.shape)} for p in imp.inputs],
        "params": [{"name": p.name, "qualname": imp.param_qualnames[p.name], "dtype": p.dtype,
                    "shape": list(p.shape)} for p in imp.params],
        "outputs": [{"name": p.name, "dtype": p.dtype, "shape": list(p.shape)} for p in kernel.outputs],
        "init_inputs": [repr(x) for x in loaded.init_inputs],
        "weight_seed": 42,
    }
    return ImportResult(text, imp.weights, meta, loaded)


def _wrap_comment(lines: list[str], width: int = 110) -> list[str]:
    out = []
    for ln in lines:
        body = ln[2:]
        while len(body) > width:
            cut = body.rfind(" ", 0, width)
            if cut <= 0:
                cut = width
            out.append("% " + body[:cut])
            body = body[cut:].lstrip()
        out.append("% " + body)
    return out


def import_model(path: str, *, split_threshold: int = B.SPLIT_THRESHOLD, check: bool = True) -> ImportResult:
    """Load, trace and translate a KernelBench-format model file."""
    loaded = load_model(path)
    return import_loaded(loaded, split_threshold=split_threshold, check=check)


def load_model_as_leir(path: str):
    """``(leir_text, weights, meta)`` for a KernelBench-format model file (used by ``leirc build``)."""
    r = import_model(path)
    return r.text, r.weights, r.meta
