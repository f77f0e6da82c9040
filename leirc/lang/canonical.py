"""Alpha-canonical form and fingerprint of a kernel.

Two programs that differ only in the names of their loop indices and intermediates are
the same program: a search that reaches one nest through ``split`` then ``rename`` and
another through a different order gets ``io`` in one and ``io1`` in the other. The
canonical form renames

* every loop index by its depth (``v0`` outermost, ``v1`` inside it, ...). Sibling loops
  at one depth share a name, which is legal because an index is scoped to its loop.
  A bound (``B``) loop keeps the two characters that select its hardware axis
  (``tx``, ``bx``, ...), so its meaning is unchanged: ``txj`` at depth 1 becomes
  ``txv1``;
* every intermediate tensor by the order of its first write (``T0``, ``T1``, ...), then
  any never-written intermediate by first appearance; a private tensor's ``\\alloc``
  item is renamed with its accesses.

Parameters and the kernel name keep their names: they are the interface a caller binds.
Generated names skip the parameter names, so a rename never captures one.

:func:`fingerprint` is the SHA-256 of the compact print of the canonical form: the key
for checker results, builds, evaluations, traces and dataset rows.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Iterator

from . import ast as A
from .printer import COMPACT, print_kernel


def _names(prefix: str, taken: set[str]) -> Iterator[str]:
    i = 0
    while True:
        n = f"{prefix}{i}"
        if n not in taken:
            yield n
        i += 1


class _Renamer:
    def __init__(self, kernel: A.Kernel):
        self.params = {p.name for p in kernel.inputs + kernel.outputs}
        gen = _names("v", self.params)
        self._depth_names: list[str] = []
        self._gen = gen
        self.tensors = self._tensor_names(kernel)

    def depth_name(self, d: int) -> str:
        while len(self._depth_names) <= d:
            self._depth_names.append(next(self._gen))
        return self._depth_names[d]

    def loop_name(self, lp: A.Loop, depth: int) -> str:
        base = self.depth_name(depth)
        if lp.kind == "B" and len(lp.var) >= 2 and lp.var[0] in "tb" and lp.var[1] in "xyz":
            return lp.var[:2] + base
        return base

    def _tensor_names(self, kernel: A.Kernel) -> dict[str, str]:
        order: list[str] = []
        seen: set[str] = set()
        later: list[str] = []

        def note(name: str, into: list[str]) -> None:
            if name not in self.params and name not in seen:
                seen.add(name)
                into.append(name)

        # first writes in program order decide; names only read (or only aligned) follow
        for n in A.walk(kernel):
            if isinstance(n, A.Assign):
                note(n.target.name, order)
        for n in A.walk(kernel):
            if isinstance(n, A.Access):
                note(n.name, later)
            elif isinstance(n, (A.Align, A.Alloc)):
                note(n.name, later)
        gen = _names("T", self.params)
        return {old: next(gen) for old in order + later}

    # -- rewriting ----------------------------------------------------------------
    def expr(self, e, env: dict[str, str]):
        if isinstance(e, A.Var):
            new = env.get(e.name)
            return e if new is None or new == e.name else replace(e, name=new)
        if isinstance(e, A.Const):
            return e
        if isinstance(e, A.Access):
            return replace(e, name=self.tensors.get(e.name, e.name), indices=tuple(self.expr(i, env) for i in e.indices))
        if isinstance(e, A.BinOp):
            return replace(e, lhs=self.expr(e.lhs, env), rhs=self.expr(e.rhs, env))
        if isinstance(e, A.Neg):
            return replace(e, operand=self.expr(e.operand, env))
        if isinstance(e, A.Compare):
            return replace(e, operands=tuple(self.expr(o, env) for o in e.operands))
        if isinstance(e, A.Call):
            return replace(e, args=tuple(self.expr(a, env) for a in e.args))
        return e

    def items(self, items: tuple, env: dict[str, str], depth: int) -> tuple:
        out = []
        for it in items:
            if isinstance(it, A.Loop):
                name = self.loop_name(it, depth)
                inner = {**env, it.var: name}
                out.append(replace(it, var=name, body=self.items(it.body, inner, depth + 1)))
            elif isinstance(it, A.Region):
                out.append(replace(it, body=self.items(it.body, env, depth)))
            elif isinstance(it, A.Assign):
                out.append(replace(it, target=self.expr(it.target, env), value=self.expr(it.value, env)))
            elif isinstance(it, (A.Align, A.Alloc)):
                out.append(replace(it, name=self.tensors.get(it.name, it.name)))
            else:  # pragma: no cover - the AST has no other item kinds
                out.append(it)
        return tuple(out)


def canonical(kernel: A.Kernel) -> A.Kernel:
    """The alpha-canonical form of ``kernel`` (same semantics, canonical names).

    Idempotent: ``canonical(canonical(k)) == canonical(k)``. Works on kernels with errors
    too (unknown names are left alone), so a fingerprint exists for every parsed kernel."""
    r = _Renamer(kernel)
    return replace(kernel, body=r.items(kernel.body, {}, 0))


def canonical_text(kernel: A.Kernel) -> str:
    """Compact print of the canonical form (what :func:`fingerprint` hashes)."""
    return print_kernel(canonical(kernel), COMPACT)


def fingerprint(kernel: A.Kernel) -> str:
    """SHA-256 hex digest of the compact print of ``canonical(kernel)``."""
    return hashlib.sha256(canonical_text(kernel).encode("utf-8")).hexdigest()
