"""``program_rewrite``: a whole transformed program as one step.

An LLM proposer may answer with a rewritten LEIR program instead of a named strategy. That
answer is untrusted text, so it becomes an ordinary :class:`~leirc.strategies.base.Step`
(``program_rewrite(leir=...)``) and goes through the same door as every other step: it is
parsed, checked, held to the kernel's interface and then verified against its parent like
any candidate. A trace that contains it replays without the model.

Nothing about the rewrite is proven, so its numerics are ``approximate`` (the verifier
judges it within the output dtype's tolerance), and it has no sites: no menu, no cursor
listing and no dataset generator ever proposes it.

The reasons a text is refused start with fixed phrases (:data:`REJECTIONS`), so a caller
can count them by cause through :func:`rejection_code` even after the engine's rewrite cache
re-raised the refusal as a plain :class:`NotApplicable`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

from ..lang import ast as A
from ..lang.canonical import fingerprint
from ..lang.parser import parse
from .base import Arg, Context, Rewrite, Strategy, strategy

NAME = "program_rewrite"

#: a transformed program longer than this is refused before parsing (a runaway answer)
MAX_LEIR_CHARS = 400_000

#: the first words of each refusal and the stable code a proposer counts it under
REJECTIONS = {
    "does not parse": "parse_error",
    "does not check": "check_error",
    "changes the interface": "interface_changed",
    "leaves the program unchanged": "no_change",
    "is too long": "too_long",
}


def rejection_code(error) -> Optional[str]:
    """The code of a ``program_rewrite`` refusal (a :class:`NotApplicable` or its reason),
    or None for anything else (an argument error, another strategy)."""
    reason = getattr(error, "reason", error)
    if getattr(error, "strategy", NAME) != NAME or not isinstance(reason, str):
        return None
    for phrase, code in REJECTIONS.items():
        if reason.startswith(phrase):
            return code
    return None


def _where(d) -> str:
    sp = d.span
    return f"{sp.line}:{sp.col}: " if sp is not None else ""


def _param_text(p: A.Param) -> str:
    return f"{p.name}: {p.dtype}[{','.join(map(str, p.shape))}]"


def _interface_difference(old: A.Kernel, new: A.Kernel) -> Optional[str]:
    """What differs between the two kernels' interfaces (first difference), or None."""
    if new.name != old.name:
        return f"the kernel is named '{new.name}', expected '{old.name}'"
    for role, a, b in (("inputs", old.inputs, new.inputs), ("outputs", old.outputs, new.outputs)):
        names_a, names_b = [p.name for p in a], [p.name for p in b]
        if names_a != names_b:
            return f"{role} ({', '.join(names_b) or 'none'}), expected ({', '.join(names_a) or 'none'})"
        for pa, pb in zip(a, b):
            if (pa.dtype, tuple(pa.shape)) != (pb.dtype, tuple(pb.shape)):
                return f"{role[:-1]} {_param_text(pb)}, expected {_param_text(pa)}"
    return None


@strategy(NAME, level="operator", numerics="approximate",
          args=[Arg("leir", "leir", "the whole transformed LEIR program (same kernel name, inputs and outputs)")])
class ProgramRewrite(Strategy):
    """Replace the program by a transformed one given as LEIR text (an LLM's answer).

    The text is parsed and checked; it must keep the kernel's name and its inputs and
    outputs (names, order, dtypes, shapes) and differ from the program. A bare Step-TP body
    (no ``\\kernel`` header) takes the program's signature. Nothing is proven about the
    new program: it is ``approximate`` and only verification decides whether it is
    equivalent. Never listed as a site.

    Before: \\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i}*2+A^{f32,g}_{i}*3;];}
    Args: leir=\\kernelk(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i}*5;];}
    After: \\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i}*5;];}
    """

    def sites(self, ctx: Context) -> list:
        return []  # an arbitrary program is not a place in this one: only a proposer's answer

    def plan(self, ctx: Context, args: dict) -> Rewrite:
        text = args["leir"]
        if len(text) > MAX_LEIR_CHARS:
            raise self.na(f"is too long: {len(text)} characters (at most {MAX_LEIR_CHARS})")
        new = self._parse(text, ctx.kernel)
        diff = _interface_difference(ctx.kernel, new)
        if diff is not None:
            raise self.na(f"changes the interface: {diff}")
        if fingerprint(new) == fingerprint(ctx.kernel):
            raise self.na("leaves the program unchanged (the same program up to the names of loops and "
                          "intermediates)")
        # checked through the context: the engine's re-check of this very kernel is then free
        res = ctx.checked(new)
        errs = [d for d in res.diagnostics if d.is_error]
        if errs:
            more = f" (and {len(errs) - 1} more error(s))" if len(errs) > 1 else ""
            raise self.na(f"does not check: {_where(errs[0])}{errs[0].code} {errs[0].message}{more}")
        return Rewrite(new, self.numerics)

    def _parse(self, text: str, old: A.Kernel) -> A.Kernel:
        r = parse(text, "<leir>")
        errs = [d for d in r.diagnostics if d.is_error]
        if r.module is None or errs:
            first = errs[0] if errs else None
            what = f"{_where(first)}{first.code} {first.message}" if first is not None else "no program"
            raise self.na(f"does not parse: {what}")
        kernels = r.module.kernels
        if len(kernels) != 1:
            raise self.na(f"does not parse: expected one kernel, found {len(kernels)}")
        k = kernels[0]
        if not k.declared:  # a bare body: the interface is the program's, as in Step-TP's answers
            k = replace(k, name=old.name, inputs=old.inputs, outputs=old.outputs, declared=old.declared)
        return k


__all__ = ["MAX_LEIR_CHARS", "NAME", "REJECTIONS", "ProgramRewrite", "rejection_code"]
