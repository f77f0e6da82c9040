"""LEIR dtype <-> NumPy dtype, poison values, helpers shared by the interpreter and verifier.

``bf16`` is represented with ``ml_dtypes.bfloat16`` (a NumPy extension dtype shipped with
TVM's dependencies). Arithmetic on ``f16``/``bf16`` is computed in ``f32`` and rounded to
the half type after every operation (exact for + - * / sqrt: f32 has enough bits that the
double rounding is innocuous), which is what CPUs and the TVM lowering do.
"""

from __future__ import annotations

import numpy as np

from ..lang import ast as A

_NP = {
    "f16": np.dtype(np.float16),
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
    "i8": np.dtype(np.int8),
    "i16": np.dtype(np.int16),
    "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64),
    "u8": np.dtype(np.uint8),
    "u16": np.dtype(np.uint16),
    "u32": np.dtype(np.uint32),
    "u64": np.dtype(np.uint64),
    "bool": np.dtype(np.bool_),
}
_UNRESOLVED = object()
_bf16 = _UNRESOLVED


def bf16_dtype() -> np.dtype | None:
    """``ml_dtypes.bfloat16`` (None without ml_dtypes), imported on first use: the import
    costs about a second, which every command would pay for a dtype few kernels use."""
    global _bf16
    if _bf16 is _UNRESOLVED:
        try:
            import ml_dtypes  # noqa: PLC0415

            _bf16 = np.dtype(ml_dtypes.bfloat16)
            _NP["bf16"] = _bf16
        except ImportError:  # pragma: no cover - ml_dtypes is a dependency
            _bf16 = None
    return _bf16


def is_bf16(dt) -> bool:
    """Whether NumPy dtype ``dt`` is bfloat16 (without importing ml_dtypes: an array of it
    exists only once ml_dtypes is imported)."""
    return np.dtype(dt).name == "bfloat16"


def __getattr__(name: str):
    if name == "BF16":  # the bfloat16 NumPy dtype, resolved lazily
        return bf16_dtype()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


HALF = ("f16", "bf16")
F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)
I64 = np.dtype(np.int64)
BOOL = np.dtype(np.bool_)


def np_dtype(t: str) -> np.dtype:
    """NumPy dtype of a concrete LEIR dtype."""
    try:
        return _NP[t]
    except KeyError:
        if t == "bf16" and bf16_dtype() is not None:
            return _NP[t]
        raise TypeError(f"dtype {t!r} has no NumPy representation") from None


def leir_dtype(dt) -> str | None:
    """LEIR name of a NumPy dtype (None if it has none)."""
    dt = np.dtype(dt)
    if is_bf16(dt):
        return "bf16"
    for k, v in _NP.items():
        if v == dt:
            return k
    return None


def is_float(t: str) -> bool:
    return t in A.FLOAT_DTYPES


def is_int(t: str) -> bool:
    return t in A.INT_DTYPES


def compute_dtype(t: str) -> np.dtype:
    """The dtype arithmetic of type ``t`` is carried out in (f32 for the half types)."""
    return F32 if t in HALF else np_dtype(t)


#: NaN payloads used to poison float buffers: a value with these exact bits was never
#: written (arithmetic produces the default quiet NaN, never these payloads).
POISON_BITS = {"f16": 0x7E5B, "bf16": 0x7FDB, "f32": 0x7FC0DEAD, "f64": 0x7FF8DEADBEEFDEAD}
_BITS_DTYPE = {"f16": np.uint16, "bf16": np.uint16, "f32": np.uint32, "f64": np.uint64}


def poison_value(t: str, alt: bool = False):
    """Scalar used to fill a buffer of type ``t`` before a run. ``alt`` gives a second,
    different sentinel (for the two-pass check of integer and bool outputs)."""
    if is_float(t):
        return np.array(POISON_BITS[t], dtype=_BITS_DTYPE[t]).view(np_dtype(t))[()]
    if t == "bool":
        return np.bool_(alt)
    info = np.iinfo(np_dtype(t))
    if info.min < 0:
        return np_dtype(t).type(info.min + 1 if not alt else info.max - 1)
    return np_dtype(t).type(info.max - 1 if not alt else info.max - 2)


def poisoned(t: str, shape, alt: bool = False) -> np.ndarray:
    return np.full(tuple(shape), poison_value(t, alt), dtype=np_dtype(t))


def poison_mask(arr: np.ndarray, t: str, alt: bool = False) -> np.ndarray:
    """Elements of ``arr`` still holding the poison of ``poisoned(t, ..., alt)``."""
    if is_float(t):
        bits = np.ascontiguousarray(arr).view(_BITS_DTYPE[t])
        return bits == POISON_BITS[t]
    return arr == poison_value(t, alt)


def identity_value(op_identity: float, t: str):
    """A reduction identity (0, 1, -inf, +inf) as a value of type ``t``."""
    dt = np_dtype(t)
    if is_float(t):
        return dt.type(op_identity)
    if t == "bool":
        if op_identity == float("-inf"):
            return np.bool_(False)
        if op_identity == float("inf"):
            return np.bool_(True)
        return np.bool_(bool(op_identity))
    info = np.iinfo(dt)
    if op_identity == float("-inf"):
        return dt.type(info.min)
    if op_identity == float("inf"):
        return dt.type(info.max)
    return dt.type(int(op_identity))
