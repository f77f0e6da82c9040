"""The import contract: leirc is built in layers, and no module reaches into another's privates.

Every import counts, including the ones inside functions: a lazy import hides a layer
violation from a reader, not from the design. The layers, lowest first (a module may import
its own layer and the layers below it):

    io, target (what a build targets: the OS-granted CPU features), lang (the language: AST, parser, printer, types, diagnostics, affine forms, facts)
    analysis (dependences, reduction forms, footprints)
    lang.checker, lang.canonical, lang.load (checking and canonical forms use the analysis)
    algebra (SymPy bridge and proofs)
    interp, strategies
    opt, lower
    verify
    frontend
    engine
    llm (the OpenAI-compatible client, its prompt cache, the prompt templates)
    search
    driver
    cli, ide (clients; the language server in lsp/ wraps ide)
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "leirc"

LAYERS: list[tuple[str, ...]] = [
    ("leirc", "leirc.io", "leirc.target", "leirc.measure", "leirc.lang"),
    ("leirc.analysis",),
    ("leirc.lang.checker", "leirc.lang.canonical", "leirc.lang.load"),
    ("leirc.algebra",),
    ("leirc.interp", "leirc.strategies"),
    ("leirc.opt", "leirc.lower"),
    ("leirc.verify",),
    ("leirc.frontend",),
    ("leirc.engine",),
    # the LLM client and the prompts (shared by the search's LLM proposers and the dataset)
    ("leirc.llm",),
    # the search sits below the driver: ``-O search`` is one of its optimizers
    ("leirc.search",),
    ("leirc.driver",),
    ("leirc.cli", "leirc.ide", "leirc.dataset", "leirc.cluster", "leirc.__main__"),
]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _layer(mod: str) -> int:
    """The layer of the longest matching prefix (``leirc.lang.checker`` before ``leirc.lang``)."""
    best, best_len = None, -1
    for k, names in enumerate(LAYERS):
        for n in names:
            if (mod == n or mod.startswith(n + ".")) and len(n) > best_len:
                best, best_len = k, len(n)
    assert best is not None, f"{mod} is in no layer: add it to LAYERS in {__file__}"
    return best


def _imports():
    """(importing module, imported module, imported names, line) for every leirc import."""
    for f in sorted(PKG.rglob("*.py")):
        mod = _module_name(f)
        package = mod if f.name == "__init__.py" else mod.rsplit(".", 1)[0]
        tree = ast.parse(f.read_text(encoding="utf-8"), str(f))
        for n in ast.walk(tree):
            if isinstance(n, ast.ImportFrom):
                if n.level:
                    base = package.split(".")
                    base = base[: len(base) - (n.level - 1)]
                    target = ".".join(base + ([n.module] if n.module else []))
                else:
                    target = n.module or ""
                if target.split(".")[0] == "leirc":
                    names = [a.name for a in n.names]
                    # `from . import x` imports the submodule x
                    if n.module is None:
                        for a in names:
                            yield f, mod, f"{target}.{a}", [], n.lineno
                    else:
                        yield f, mod, target, names, n.lineno
            elif isinstance(n, ast.Import):
                for a in n.names:
                    if a.name.split(".")[0] == "leirc":
                        yield f, mod, a.name, [], n.lineno


def test_every_import_goes_down_the_layers():
    bad = []
    for f, mod, target, _names, line in _imports():
        if _layer(target) > _layer(mod):
            bad.append(f"{f.relative_to(ROOT)}:{line}: {mod} (layer {_layer(mod)}) imports {target} "
                       f"(layer {_layer(target)})")
    assert not bad, "upward imports:\n" + "\n".join(bad)


def test_no_module_imports_another_modules_private_names():
    bad = []
    for f, mod, target, names, line in _imports():
        if target == mod:
            continue
        for n in names:
            if n.startswith("_") and not n.startswith("__"):
                bad.append(f"{f.relative_to(ROOT)}:{line}: imports {target}.{n}")
    assert not bad, "private names imported across modules (make them public or move them):\n" + "\n".join(bad)


def _unit(mod: str) -> str:
    """The LAYERS entry a module belongs to (``leirc.lang.checker`` is its own unit)."""
    names = [n for layer in LAYERS for n in layer if mod == n or mod.startswith(n + ".")]
    return max(names, key=len)


def test_no_import_cycles_between_units():
    graph: dict[str, set[str]] = {}
    for _f, mod, target, _names, _line in _imports():
        a, b = _unit(mod), _unit(target)
        if a != b:
            graph.setdefault(a, set()).add(b)
    seen, stack = set(), []

    def visit(n):
        if n in stack:
            raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(n):] + [n]))
        if n in seen:
            return
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            visit(m)
        stack.pop()
        seen.add(n)

    for n in sorted(graph):
        visit(n)


def test_tvm_is_imported_only_by_the_lowering_package():
    bad = []
    for f in sorted(PKG.rglob("*.py")):
        mod = _module_name(f)
        if mod.startswith("leirc.lower"):
            continue
        for n in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            names = ([a.name for a in n.names] if isinstance(n, ast.Import)
                     else [n.module or ""] if isinstance(n, ast.ImportFrom) and not n.level else [])
            if any(x.split(".")[0] == "tvm" for x in names):
                bad.append(f"{f.relative_to(ROOT)}:{n.lineno}")
    assert not bad, "tvm imported outside leirc/lower: " + ", ".join(bad)


#: the one door to execution (``leirc.lower.device``): above ``leirc/lower`` nothing imports
#: the sessions, the runner, the RPC client or the worker directly
EXECUTION_INTERNALS = ("leirc.lower.session", "leirc.lower.runner", "leirc.lower.rpc", "leirc.lower.worker")


def test_execution_goes_through_the_device_door():
    bad = []
    for f, mod, target, _names, line in _imports():
        if mod == "leirc.lower" or mod.startswith("leirc.lower."):
            continue
        if any(target == m or target.startswith(m + ".") for m in EXECUTION_INTERNALS):
            bad.append(f"{f.relative_to(ROOT)}:{line}: {mod} imports {target} (use leirc.lower.device)")
    for f in sorted((ROOT / "lsp").rglob("*.py")):  # the language server is a client too
        tree = ast.parse(f.read_text(encoding="utf-8"), str(f))
        for n in ast.walk(tree):
            if isinstance(n, ast.ImportFrom) and n.module and any(n.module == m for m in EXECUTION_INTERNALS):
                bad.append(f"{f.relative_to(ROOT)}:{n.lineno}: imports {n.module} (use leirc.lower.device)")
    assert not bad, "execution reached past the device door:\n" + "\n".join(bad)
