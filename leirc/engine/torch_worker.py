"""The worker process of :class:`leirc.engine.oracles.TorchOracle`: runs a user's PyTorch
module on the input seeds it is asked for and writes the inputs and outputs as ``.npz``.

``python -m leirc.engine.torch_worker REQUEST.json`` where the request is
``{"model": path, "seeds": [...], "weights": path of an .npz keyed by qualified name or
null, "out": directory, "threads": n or null, "memory_limit_mb": n or null}``. The worker
builds the model the KernelBench way (:func:`leirc.frontend.loader.load_model`: seed 42),
sets the parameters and buffers the kernel reads to the import's values (so both sides run
on the same weights), then per seed calls ``get_inputs()`` under ``torch.manual_seed(seed)``
and the module under ``torch.no_grad()``. It writes ``OUT/seed_<s>.npz`` (``in_<k>``: the
tensor inputs in order, ``out_<k>``: the outputs) and last ``OUT/result.json``
(``OUT/loaded`` marks the moment the model is built and the runs begin):
``{"ok", "pid", "seeds", "error", "kind"}`` with ``kind`` ``"raised"`` (the user's code
raised: ``error`` names the innermost frame in the model file, ``file:line: in fn:``),
``"memory"`` or ``"load"`` (the file is not a loadable KernelBench model). A worker that
is killed or crashes writes no result; the parent tells those apart by the exit status.

The user's code is untrusted: it runs only here, in a process of its own (its own
process group, stdout/stderr to a log), never in the compiler's process.
"""

from __future__ import annotations

import json
import os
import sys
import traceback


def _located(exc: BaseException, model_path: str, text: str) -> str:
    """``text`` prefixed with the user frame, unless it names that place already."""
    where = _user_frame(exc, model_path)
    if where:
        line = where.split(": in ", 1)[0].rsplit(":", 1)[1]
        if f"{os.path.basename(model_path)}:{line}" in text:
            return text
    return where + text


def _user_frame(exc: BaseException, model_path: str) -> str:
    """``file:line: in fn: `source`: `` of the innermost frame in the model file along the
    exception chain (a ``raise ... from None`` still keeps the original as context)."""
    want = os.path.realpath(model_path)
    seen = set()
    e = exc
    best = None
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        for fr in traceback.extract_tb(e.__traceback__):
            if os.path.realpath(fr.filename) == want:
                best = fr
        e = e.__cause__ or e.__context__
    if best is None:
        return ""
    src = f" `{best.line.strip()}`" if best.line else ""
    return f"{model_path}:{best.lineno}: in {best.name}:{src}: "


def _save(path: str, arrays: dict) -> None:
    import numpy as np

    tmp = path + ".tmp.npz"
    np.savez(tmp, **arrays)
    os.replace(tmp, path)


def _set_weights(model, weights_path: str) -> None:
    """Give every parameter/buffer the kernel reads the value the import recorded."""
    import numpy as np
    import torch

    with np.load(weights_path, allow_pickle=False) as z:
        for qualname in z.files:
            obj = model
            for part in qualname.split("."):
                obj = getattr(obj, part, None)
                if obj is None:
                    raise LookupError(f"the model has no tensor '{qualname}' (the import recorded one)")
            if not isinstance(obj, torch.Tensor):
                raise LookupError(f"'{qualname}' is not a tensor in the model")
            arr = z[qualname]
            t = torch.from_numpy(arr.astype(np.float32) if arr.dtype.name == "bfloat16" else arr)
            with torch.no_grad():
                obj.copy_(t.to(obj.dtype).reshape(obj.shape))


def _run(req: dict) -> dict:
    limit = req.get("memory_limit_mb")
    if limit:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (int(limit) << 20, int(limit) << 20))
    import torch

    from ..frontend.errors import ModelLoadError
    from ..frontend.loader import load_model
    from ..frontend.verify import to_numpy

    if req.get("threads"):
        torch.set_num_threads(int(req["threads"]))
    model_path = req["model"]
    done: list = []
    try:
        loaded = load_model(model_path)
        if req.get("weights"):
            _set_weights(loaded.model, req["weights"])
        # the parent's run timeout starts now: importing torch and building the model have
        # their own (longer) limit
        with open(os.path.join(req["out"], "loaded"), "w", encoding="utf-8") as f:
            f.write(str(os.getpid()))
        for seed in req["seeds"]:
            inputs = loaded.get_inputs(int(seed))
            with torch.no_grad():
                out = loaded.model(*inputs)
            outs = list(out) if isinstance(out, (tuple, list)) else [out]
            arrays = {f"in_{k}": to_numpy(x) for k, x in enumerate(i for i in inputs if isinstance(i, torch.Tensor))}
            for k, o in enumerate(outs):
                if not isinstance(o, torch.Tensor):
                    raise TypeError(f"forward returned a {type(o).__name__} as output {k}, not a tensor")
                arrays[f"out_{k}"] = to_numpy(o)
            _save(os.path.join(req["out"], f"seed_{int(seed)}.npz"), arrays)
            done.append(int(seed))
    except MemoryError as e:
        return {"ok": False, "kind": "memory", "seeds": done,
                "error": f"out of memory (limit {limit} MB): {e}" if limit else f"out of memory: {e}"}
    except ModelLoadError as e:
        kind = "raised" if _user_frame(e, model_path) else "load"
        return {"ok": False, "kind": kind, "seeds": done, "error": _located(e, model_path, str(e))}
    except Exception as e:  # noqa: BLE001 - the user's code raised: that is the result
        return {"ok": False, "kind": "raised", "seeds": done,
                "error": _located(e, model_path, f"{type(e).__name__}: {e}")}
    return {"ok": True, "kind": None, "seeds": done, "error": None}


def main(argv: list[str]) -> int:
    with open(argv[0], encoding="utf-8") as f:
        req = json.load(f)
    res = _run(req)
    res["pid"] = os.getpid()
    path = os.path.join(req["out"], "result.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(res, f)
    os.replace(path + ".tmp", path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
