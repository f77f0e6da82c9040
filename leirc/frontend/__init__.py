"""PyTorch frontend: KernelBench-format ``nn.Module`` files -> one declared LEIR kernel.

* :func:`import_model` / :func:`load_model_as_leir`: load, trace (torch.fx), translate.
* :func:`verify_against_torch`: run the LEIR kernel (reference interpreter or compiled)
  against the PyTorch module on several input seeds with the leirc correctness rule.

No TVM import here (TVM lives in :mod:`leirc.lower`); the compiled path imports it lazily.
"""

from .errors import FrontendError, ModelLoadError, TraceError, UnsupportedOpError
from .importer import ImportResult, import_model, load_model_as_leir
from .loader import load_model
from .verify import compare, verify_against_torch

__all__ = [
    "FrontendError", "ModelLoadError", "TraceError", "UnsupportedOpError",
    "ImportResult", "import_model", "load_model_as_leir", "load_model",
    "compare", "verify_against_torch",
]
