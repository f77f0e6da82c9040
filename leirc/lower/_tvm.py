"""Lazy TVM import for the lowering package (the only package that imports TVM).

``tvm_ffi`` imports ``torch`` at start-up when it is installed, which makes ``import tvm``
take ~6 s instead of ~1.4 s. leirc never hands torch tensors to TVM, so unless torch is
already imported (or ``LEIRC_TVM_WITH_TORCH=1``), the import hides torch from
``tvm_ffi`` for the duration of the import; ``import torch`` works normally afterwards
(only TVM's automatic torch-tensor conversion stays off in this process).
"""

from __future__ import annotations

import os
import sys

_tvm = None


def tvm():
    global _tvm
    if _tvm is None:
        hide = "torch" not in sys.modules and os.environ.get("LEIRC_TVM_WITH_TORCH") != "1"
        if hide:
            sys.modules["torch"] = None  # type: ignore[assignment]
        try:
            import tvm as _t  # noqa: PLC0415
            import tvm.script.ir_builder.tirx  # noqa: F401,PLC0415
        finally:
            if hide and "torch" in sys.modules and sys.modules["torch"] is None:
                del sys.modules["torch"]
        _vectorizable_isnan(_t)
        _tvm = _t
    return _tvm


def _vectorizable_isnan(t) -> None:
    """Let TVM's loop vectorizer keep ``isnan`` in vector form (LLVM: one ``fcmp uno`` on
    the vector). Without the attribute a ``V`` loop holding a NaN-propagating ``max`` is
    scalarized. The CUDA lowering emits ``isnan`` of constants only, which fold (TVM
    prints a vector ``isnan`` as a whole-vector ``!=``, which is not CUDA C; see
    ``_ExprLowerer.isnan`` in ``leirc.lower.tir``)."""
    op = t.ir.Op.get("tirx.isnan")
    if not op.get_attr("TVectorizable"):
        t.ir.register_op_attr("tirx.isnan", "TVectorizable", True)
