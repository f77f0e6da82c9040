"""Loading a model file in KernelBench format.

The file is the user's own PyTorch code: it is executed in-process (like ``python
MODEL.py`` would), under a private module name. Contract (KernelBench): ``class Model``
(an ``nn.Module``), ``get_inputs()`` (runtime tensors) and ``get_init_inputs()``
(constructor arguments). Weights are created as KernelBench does: ``get_init_inputs()``,
then ``torch.manual_seed(42)``, then ``Model(*init_inputs)``; the model is left in training
mode (KernelBench never calls ``.eval()``), so BatchNorm uses batch statistics.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import os
import sys
import types
from dataclasses import dataclass
from typing import Any

from .errors import ModelLoadError, describe, display_path, user_frame

#: KernelBench builds the models under this seed
WEIGHT_SEED = 42


@dataclass
class LoadedModel:
    path: str
    module: types.ModuleType
    model: Any  # torch.nn.Module
    init_inputs: list

    def get_inputs(self, seed: int | None = None) -> list:
        import torch

        if seed is not None:
            torch.manual_seed(seed)
        try:
            with _quiet():
                return list(self.module.get_inputs())
        except Exception as e:  # noqa: BLE001 - user code
            raise ModelLoadError(f"get_inputs() failed: {describe(e)}", location=user_frame(e, self.path)) from None


@contextlib.contextmanager
def _quiet():
    """User code that prints must not corrupt the command's own output."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        yield


def load_module(path: str) -> types.ModuleType:
    path = os.path.abspath(path)
    if not os.path.isfile(path):
        raise ModelLoadError(f"{path}: no such file")
    digest = hashlib.sha1(path.encode()).hexdigest()[:10]
    name = f"_leirc_model_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ModelLoadError(f"{path}: cannot be loaded as a Python module")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses/pickling inside user code look modules up
    try:
        with _quiet():
            spec.loader.exec_module(mod)
    except SyntaxError as e:
        raise ModelLoadError(f"{path}:{e.lineno}: syntax error: {e.msg}") from None
    except Exception as e:  # noqa: BLE001 - user code
        where = user_frame(e, path)
        raise ModelLoadError(f"executing the model file failed: {describe(e)}",
                             location=where or display_path(path)) from None
    for attr in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(mod, attr):
            raise ModelLoadError(f"{path}: not in KernelBench format: no '{attr}' defined "
                                 "(expected class Model, get_inputs() and get_init_inputs())")
    return mod


def load_model(path: str, *, seed: int = WEIGHT_SEED, cls_name: str = "Model") -> LoadedModel:
    import torch

    mod = load_module(path)
    try:
        with _quiet():
            init_inputs = list(mod.get_init_inputs())
    except Exception as e:  # noqa: BLE001
        raise ModelLoadError(f"get_init_inputs() failed: {describe(e)}", location=user_frame(e, path)) from None
    cls = getattr(mod, cls_name, None)
    if cls is None:
        raise ModelLoadError(f"{path}: no class '{cls_name}'")
    torch.manual_seed(seed)
    try:
        with _quiet():
            model = cls(*init_inputs)
    except Exception as e:  # noqa: BLE001
        raise ModelLoadError(f"{cls_name}(*get_init_inputs()) failed: {describe(e)}",
                             location=user_frame(e, path)) from None
    if not isinstance(model, torch.nn.Module):
        raise ModelLoadError(f"{cls_name} is not a torch.nn.Module")
    return LoadedModel(os.path.abspath(path), mod, model, init_inputs)
