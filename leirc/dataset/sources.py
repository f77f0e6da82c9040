"""Sources of a dataset: ``.leir`` files (every kernel in them) and KernelBench-format
PyTorch modules (``class Model``, ``get_inputs``, ``get_init_inputs``) through the frontend.

A source id is the file's path relative to the directory it was found in (prefixed with that
directory's name), or its base name for a file given directly, plus ``::kernel``: stable
across machines and checkouts, so record ids and shard assignments do not depend on where
the tree lives. Problems (a file that does not parse, an operator the frontend does not
support, no torch) are reported per file as values; they never stop the other sources.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Optional

from ..lang.checker import CheckResult, check_text


@dataclass(frozen=True)
class SourceFile:
    path: str
    rel: str  # the id prefix: ``stdlib/softmax.leir``
    kind: str  # "leir" | "py"


@dataclass
class Source:
    id: str  # ``stdlib/softmax.leir::softmax``
    path: str
    kind: str
    kernel: str
    result: CheckResult
    sha256: str  # of the LEIR text (for .py: of the imported LEIR)

    def to_json(self) -> dict:
        return {"id": self.id, "path": self.rel_path, "kind": self.kind, "kernel": self.kernel, "sha256": self.sha256}

    @property
    def rel_path(self) -> str:
        return self.id.split("::", 1)[0]


def _is_kernelbench(path: str) -> bool:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError):
        return False
    return "class Model" in text and "def get_inputs" in text


def discover(paths) -> tuple[list[SourceFile], list[str]]:
    """The source files under ``paths`` (directories are searched recursively, in sorted
    order), and the problems (paths that do not exist)."""
    files: list[SourceFile] = []
    problems: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            base = os.path.basename(os.path.normpath(os.path.abspath(p)))
            for dirpath, dirnames, names in os.walk(p):
                dirnames.sort()
                for n in sorted(names):
                    full = os.path.join(dirpath, n)
                    rel = "/".join([base] + os.path.relpath(full, p).split(os.sep))
                    if n.endswith(".leir"):
                        files.append(SourceFile(full, rel, "leir"))
                    elif n.endswith(".py") and _is_kernelbench(full):
                        files.append(SourceFile(full, rel, "py"))
        elif os.path.isfile(p):
            kind = "py" if p.endswith(".py") else "leir"
            files.append(SourceFile(p, os.path.basename(p), kind))
        else:
            problems.append(f"{p}: no such file or directory")
    seen: set = set()
    unique = []
    for f in files:
        if f.rel not in seen:
            seen.add(f.rel)
            unique.append(f)
    return unique, problems


def load(f: SourceFile) -> tuple[list[Source], Optional[str]]:
    """The checked kernels of one file, or ([], the reason)."""
    if f.kind == "py":
        import importlib.util

        if importlib.util.find_spec("torch") is None:
            return [], f"{f.path}: PyTorch models need the torch extra: pip install 'leirc[torch]'"
        from ..frontend import FrontendError, import_model

        try:
            text = import_model(f.path).text
        except FrontendError as e:
            return [], f"{f.path}: {e}"
        except Exception as e:  # noqa: BLE001 - the user's model code
            return [], f"{f.path}: import failed: {type(e).__name__}: {e}"
    else:
        try:
            with open(f.path, encoding="utf-8") as fh:
                text = fh.read()
        except (OSError, UnicodeDecodeError) as e:
            return [], f"{f.path}: {e}"
    cf = check_text(text, f.path)
    if not cf.ok:
        d = next(d for d in cf.diagnostics if d.is_error)
        where = f"{d.span.line}:{d.span.col}: " if d.span is not None else ""
        return [], f"{f.path}:{where}{d.code} {d.message}"
    sha = hashlib.sha256(text.encode()).hexdigest()
    return [Source(f"{f.rel}::{r.kernel.name}", f.path, f.kind, r.kernel.name, r, sha) for r in cf.results], None


__all__ = ["SourceFile", "Source", "discover", "load"]
