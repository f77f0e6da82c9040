"""``leirc explain CODE``: what each diagnostic code means, a program that triggers it, and
the fix. Keyed by the codes of :data:`leirc.lang.diagnostics.CODES` (the one table of codes);
``tests/test_ux_explain.py`` checks that every code has an entry and that every example
program really draws its code from ``leirc check``. Codes the checker cannot report (the
lowering's, the build's and the verifier's) say which command reports them instead.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Optional

from .diagnostics import CODES


#: the width explanations are wrapped to (examples are shown as written)
WIDTH = 88


@dataclass(frozen=True)
class Explanation:
    code: str
    title: str  # CODES[code]
    meaning: str
    fix: str
    #: a LEIR file that ``leirc check`` reports this code for (None: not a checker code); bytes
    #: that are not UTF-8 are surrogate-escaped (E002's example)
    example: Optional[str] = None
    #: for codes outside the checker: which command reports it, and when
    reported_by: Optional[str] = None

    def render(self) -> str:
        kind = "error" if self.code.startswith("E") else "warning"
        out = [f"{self.code} ({kind}): {self.title}", "", *textwrap.wrap(self.meaning, WIDTH), ""]
        if self.example is not None:
            out += ["Example (`leirc check` reports it):", ""]
            shown = self.example.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            out += ["    " + ln if ln else "" for ln in shown.rstrip("\n").split("\n")]
            out.append("")
        if self.reported_by is not None:
            out += [*textwrap.wrap(f"Reported by: {self.reported_by}", WIDTH), ""]
        out += textwrap.wrap(f"Fix: {self.fix}", WIDTH)
        return "\n".join(out)


def _k(body: str, sig: str = "(A: f32[8]) -> (C: f32[8])") -> str:
    """A kernel ``k`` around ``body`` (one statement list, as a user writes it)."""
    lines = "\n".join("  " + ln for ln in body.strip("\n").split("\n"))
    return f"\\kernel k{sig} {{\n{lines}\n}}\n"


_COPY = "L^{8}_{i=0} [\n  C^{f32,g}_{i} = A^{f32,g}_{i};\n];"

#: code -> (meaning, example or None, fix[, reported_by])
_TEXTS: dict[str, tuple] = {
    "E001": ("The text does not follow the grammar (grammar/leir.lark); the message says what was expected at "
             "that point, in words. In a file of several kernels, each broken \\kernel reports its own E001 and "
             "the others are still checked.",
             _k("L^{8}_{i=0} [\n  C^{f32,g}_{i} = ;\n];"),
             "Complete or correct the construct at the caret (here: the right-hand side of the assignment)."),
    "E002": ("The file is not valid UTF-8, so it cannot be read as LEIR text.",
             "L^{8}_{i=0}[C^{f32,g}_{i} = A^{f32,g}_{i} \udcff];\n",
             "Save the file as UTF-8 (the byte at the reported place is not part of any UTF-8 character)."),
    "E003": ("Expressions or loops are nested more than 150 levels deep (a flat chain of + - * / counts as one "
             "level): deeper nesting would overflow the parser's and checker's recursion.",
             _k("L^{8}_{i=0} [\n  C^{f32,g}_{i} = " + "(" * 160 + "A^{f32,g}_{i}" + ")" * 160 + ";\n];"),
             "Flatten the expression (drop redundant parentheses) or split it into statements through an "
             "intermediate tensor."),
    "E004": ("An access names a dtype leirc does not know.",
             _k("L^{8}_{i=0} [\n  C^{f33,g}_{i} = A^{f32,g}_{i};\n];"),
             "Use one of the dtypes of docs/language.md: f16, bf16, f32, f64, i8..i64, u8..u64, bool."),
    "E005": ("An access names a memory scope other than g (global), s (shared) or l (local).",
             _k("L^{8}_{i=0} [\n  C^{f32,q}_{i} = A^{f32,g}_{i};\n];"),
             "Write g, s or l after the dtype: `C^{f32,g}_{i}`."),
    "E006": ("A literal cannot be represented: a float that overflows to infinity, or an integer beyond 64 bits.",
             _k("L^{8}_{i=0} [\n  C^{f32,g}_{i} = A^{f32,g}_{i}*1e999;\n];"),
             "Write a finite literal; for infinity use a function of the program's values or a large finite "
             "constant."),
    "E007": ("A call names a function that is not one of LEIR's intrinsics.",
             _k("L^{8}_{i=0} [\n  C^{f32,g}_{i} = cosh(A^{f32,g}_{i});\n];"),
             "Use an intrinsic listed in docs/language.md, or write the function out (cosh(x) = "
             "(exp(x)+exp(-x))/2)."),
    "E008": ("An intrinsic is called with the wrong number of arguments.",
             _k("L^{8}_{i=0} [\n  C^{f32,g}_{i} = exp(A^{f32,g}_{i}, 2);\n];"),
             "Pass the number of arguments the function takes (exp takes one)."),
    "E009": ("A region's opening and closing tags differ (`[^{ap_0} ... ]^{bd_0}`).",
             _k("L^{8}_{i=0} [^{ap_0}\n  C^{f32,g}_{i} = A^{f32,g}_{i};\n]^{bd_0};"),
             "Close the region with the tag it was opened with."),
    "E010": ("Two kernels of a file, or two parameters of one kernel, have the same name.",
             _k(_COPY, "(A: f32[8], A: f32[8]) -> (C: f32[8])"),
             "Rename one of them."),
    "E011": ("A dtype Step-TP spells but leirc cannot compile (complex, fp8, 4-bit, str, undef).",
             _k("L^{8}_{i=0} [\n  C^{c64,g}_{i} = A^{f32,g}_{i};\n];"),
             "Use a supported dtype (complex values as two real tensors)."),
    "E012": ("A subscript uses an index name that no enclosing loop defines.",
             _k("L^{8}_{i=0} [\n  C^{f32,g}_{i} = A^{f32,g}_{q};\n];"),
             "Use the index of an enclosing loop, or add the loop that defines it."),
    "E013": ("One tensor is accessed with two different dtypes; every access spells the tensor's one dtype.",
             _k("L^{8}_{i=0} [\n  T^{f32,g}_{i} = A^{f32,g}_{i};\n  C^{f32,g}_{i} = T^{f64,g}_{i};\n];"),
             "Spell the same dtype everywhere; convert with a cast (`f64(T^{f32,g}_{i})`) where another type is "
             "meant."),
    "E014": ("One tensor is accessed with two different memory scopes.",
             _k("L^{8}_{i=0} [\n  T^{f32,g}_{i} = A^{f32,g}_{i};\n  C^{f32,g}_{i} = T^{f32,l}_{i};\n];"),
             "Spell the same scope everywhere; to move data between scopes, copy into a second tensor."),
    "E015": ("An access of a kernel parameter spells a dtype other than the signature's.",
             _k("L^{8}_{i=0} [\n  C^{f32,g}_{i} = A^{f64,g}_{i};\n];"),
             "Spell the declared dtype at the access (or change the signature); convert with a cast."),
    "E016": ("An access has a different number of subscripts than the tensor has dimensions.",
             _k("L^{8}_{i=0} [\n  C^{f32,g}_{i} = A^{f32,g}_{i,i};\n];"),
             "Give one subscript per dimension of the declared (or inferred) shape."),
    "E017": ("A loop reuses the index name of a loop around it.",
             _k("L^{8}_{i=0} [\n  L^{8}_{i=0} [\n    C^{f32,g}_{i} = A^{f32,g}_{i};\n  ];\n];"),
             "Rename the inner loop's index (`j`)."),
    "E018": ("A tensor is read before any statement writes it (and it is not a kernel input): its value would "
             "be uninitialized memory.",
             _k("L^{8}_{i=0} [\n  C^{f32,g}_{i} = T^{f32,g}_{i};\n  T^{f32,g}_{i} = A^{f32,g}_{i};\n];"),
             "Write the tensor first (reorder the statements), or read the input you meant."),
    "E019": ("An output of the signature is never written.",
             _k("L^{8}_{i=0} [\n  T^{f32,g}_{i} = A^{f32,g}_{i};\n];"),
             "Write every output, or drop it from the signature."),
    "E020": ("A kernel input is written; inputs are read-only.",
             _k("L^{8}_{i=0} [\n  A^{f32,g}_{i} = 1.0;\n  C^{f32,g}_{i} = A^{f32,g}_{i};\n];"),
             "Write into an intermediate or an output instead."),
    "E021": ("A name is used both as a tensor and as a loop index.",
             _k("L^{8}_{i=0} [\n  C^{f32,g}_{i} = A^{f32,g}_{i} + A;\n];"),
             "Access the tensor with its dtype and subscripts (`A^{f32,g}_{i}`), or rename one of the two."),
    "E022": ("A subscript is not an integer expression (a float, or a float tensor's value).",
             _k("L^{8}_{i=0} [\n  C^{f32,g}_{i} = A^{f32,g}_{i*0.5};\n];"),
             "Use integer arithmetic in subscripts (`i//2`)."),
    "E023": ("The condition of `if_then_else`, or an operand of `&`/`|`, is not a boolean.",
             _k("L^{8}_{i=0} [\n  C^{f32,g}_{i} = if_then_else(A^{f32,g}_{i}, 1.0, 0.0);\n];"),
             "Compare explicitly: `if_then_else(A^{f32,g}_{i} > 0.0, 1.0, 0.0)`."),
    "E024": ("A loop extent is zero or negative (extents are positive integer literals).",
             _k("L^{0}_{j=0} [\n  C^{f32,g}_{0} = 1.0;\n];\n" + _COPY),
             "Give the loop a positive extent, or remove it."),
    "E025": ("An integer literal does not fit the type it adopts from the expression (`U_{u8} + 300`), or a "
             "negative literal meets an unsigned type.",
             _k("L^{8}_{i=0} [\n  C^{u8,g}_{i} = U^{u8,g}_{i} + 300;\n];", "(U: u8[8]) -> (C: u8[8])"),
             "Use a literal inside the type's range, or cast the operand to a wider type first."),
    "E026": ("A signed integer expression provably leaves its type's range (signed overflow has no defined "
             "result).",
             _k("L^{8}_{i=0} [\n  C^{f32,g}_{i} = A^{f32,g}_{(i*4611686018427387904)//4611686018427387904};\n];"),
             "Reorder the arithmetic so intermediate values stay in range (divide before multiplying)."),
    "E030": ("An access is out of bounds, or cannot be proven in bounds from the loop ranges and the enclosing "
             "if_then_else guards.",
             _k("L^{8}_{i=0} [\n  C^{f32,g}_{i} = A^{f32,g}_{i+1};\n];"),
             "Shrink the loop, fix the subscript, or guard the access: `if_then_else(i+1 < 8, A^{f32,g}_{i+1}, "
             "0.0)`."),
    "E031": ("An intermediate is written at an index that may be negative or that cannot be bounded, so its "
             "shape cannot be inferred.",
             _k("L^{8}_{i=0} [\n  T^{f32,g}_{i-1} = A^{f32,g}_{i};\n];\n" + _COPY),
             "Write intermediates at subscripts that start at 0 (shift the index: `T_{i}` for `T_{i-1}`)."),
    "E032": ("An output is provably written only in part: the elements the loops never reach would be left "
             "undefined.",
             _k("L^{4}_{i=0} [\n  C^{f32,g}_{i} = A^{f32,g}_{i};\n];"),
             "Cover the whole output (extend the loop), or shrink the output in the signature."),
    "E040": ("Two iterations of a P (parallel), V (vectorized) or B (bound) loop touch the same element and "
             "one writes it: a data race.",
             _k("P^{8}_{i=0} [\n  C^{f32,g}_{0} = C^{f32,g}_{0} + A^{f32,g}_{i};\n];\n"
                "L^{7}_{i=0} [\n  C^{f32,g}_{i+1} = A^{f32,g}_{i};\n];"),
             "Make that loop an L loop, or restructure (a reduction across threads needs a B loop's "
             "allreduce or a partial-sum tensor)."),
    "E041": ("A B loop's index does not name a CUDA axis (tx, ty, tz, bx, by, bz, or an axis prefix).",
             _k("B^{8}_{q=0} [\n  C^{f32,g}_{q} = A^{f32,g}_{q};\n];"),
             "Name the index after the axis it binds: `B^{8}_{tx=0}`."),
    "E042": ("One CUDA axis is bound twice along a nest.",
             _k("B^{2}_{tx=0} [\n  B^{4}_{txa=0} [\n    C^{f32,g}_{tx*4+txa} = A^{f32,g}_{tx*4+txa};\n  ];\n];"),
             "Bind the inner loop to another axis (ty), or fuse the two loops into one bound loop."),
    "E043": ("The launch exceeds CUDA's limits: threads per axis 1024/1024/64, threads per block 1024, blocks "
             "2^31-1/65535/65535.",
             _k("B^{2048}_{tx=0} [\n  C^{f32,g}_{tx%8} = A^{f32,g}_{tx%8};\n];"),
             "Split the loop (loop_split) and bind the outer part to a block axis (bx)."),
    "E044": ("A V loop is longer than 64 lanes.",
             _k("V^{128}_{i=0} [\n  C^{f32,g}_{i%8} = A^{f32,g}_{i%8};\n];"),
             "Split the loop and vectorize only the inner part (e.g. 8 or 16 lanes)."),
    "E045": ("A shared (s) or local (l) tensor is larger than a block or thread may hold (48 KiB of shared "
             "memory per block).",
             _k("L^{100000}_{i=0} [\n  T^{f32,s}_{i} = 1.0;\n];\nL^{8}_{i=0} [\n  C^{f32,g}_{i} = T^{f32,s}_{i};\n];"),
             "Tile the computation so each block holds a smaller piece, or keep the tensor in global memory (g)."),
    "E046": ("A statement reads the tensor it writes for the first time, in a form that is neither a reduction "
             "(`X = X + e`, max, min, product), an update, nor a scan: it would read uninitialized memory.",
             _k("L^{8}_{i=0} [\n  C^{f32,g}_{i} = C^{f32,g}_{i}/2.0;\n];"),
             "Write the tensor first (`C = A`), then update it (`C = C/2.0`), or compute into a new tensor."),
    "E047": ("A private tensor (\\alloc) is used outside the body that allocates it, allocated twice, or a "
             "kernel parameter is allocated.",
             _k("L^{8}_{i=0} [\n  \\alloc T^{f32,l}[1];\n  T^{f32,l}_{0} = A^{f32,g}_{i};\n];\n"
                "L^{8}_{i=0} [\n  C^{f32,g}_{i} = T^{f32,l}_{0};\n];"),
             "Use the tile only inside its allocation's body, or allocate it in a body that encloses every use."),
    "E048": ("An invalid private allocation: an extent of 0, a shared tile allocated inside a thread loop, or a "
             "local tile shared by several threads.",
             _k("L^{8}_{i=0} [\n  \\alloc T^{f32,l}[0];\n  C^{f32,g}_{i} = A^{f32,g}_{i};\n];"),
             "Give every dimension a positive extent; allocate shared tiles at block level and subscript local "
             "tiles by their thread index (docs/language.md §3.1)."),
    "E049": ("A private tile (\\alloc) is fresh, uninitialized storage in every execution of the body that "
             "allocates it; this read provably sees an element that this execution has not written (it would read "
             "whatever the previous iteration left, or garbage).",
             _k("L^{8}_{i=0} [\n  \\alloc T^{f32,l}[2];\n  T^{f32,l}_{0} = A^{f32,g}_{i};\n"
                "  C^{f32,g}_{i} = T^{f32,l}_{0} + T^{f32,l}_{1}*0.0;\n];"),
             "Write every element the body reads before reading it (here T_{1}), or read only what was written."),
    "E050": ("Lowering the checked program to TVM TIR failed at the reported expression, statement or loop: a "
             "construct the lowering does not support, or a leirc bug.",
             None, "Rewrite the construct (the message names it); if the program is valid LEIR, report it.",
             "`leirc build` (its lower pass), after the program checked clean"),
    "E051": ("TVM could not build the lowered kernel; the span is the first top-level nest that fails to build "
             "on its own.",
             None, "Simplify or restructure that nest; the message carries TVM's reason. If the program is valid "
             "LEIR, report it.", "`leirc build` (its build pass)"),
    "E052": ("The generated CUDA source does not compile with `nvcc -arch=sm_90` (or the --arch given).",
             None, "Read nvcc's message; lower the launch or memory use, or report the generated source.",
             "`leirc build -t cuda` (its nvcc pass, when nvcc is installed)"),
    "E053": ("An optimized program (-O1, -O2, -O search) gives different results from the original program; "
             "leirc keeps such a result out.",
             None, "Build with -O0 (or a smaller -O level) and report the kernel: an optimization that does not "
             "verify is a leirc bug.", "`leirc build -O1|-O2` (its verify pass)"),
    "W001": ("A commuted accumulation `X = e + X`: leirc treats it as a reduction (X starts at 0), while the "
             "Step-TP reference lowering leaves X uninitialized.",
             _k("L^{8}_{i=0} [\n  L^{8}_{j=0} [\n    C^{f32,g}_{i} = A^{f32,g}_{j} + C^{f32,g}_{i};\n  ];\n];"),
             "Write the accumulator first: `C = C + A`."),
    "W002": ("An accumulation into a tensor that an earlier statement wrote is an in-place update (it adds to "
             "the current values); on a fresh tensor the same text would be a reduction starting at 0.",
             _k("L^{8}_{i=0} [\n  C^{f32,g}_{i} = 0.0;\n];\nL^{8}_{i=0} [\n  L^{8}_{j=0} [\n"
                "    C^{f32,g}_{i} = C^{f32,g}_{i} + A^{f32,g}_{j};\n  ];\n];"),
             "Nothing if an update is meant; otherwise accumulate into a new tensor."),
    "W003": ("A loop starts at a non-zero index. leirc honours the start; the Step-TP reference ignores it.",
             _k("L^{7}_{i=1} [\n  C^{f32,g}_{i} = A^{f32,g}_{i};\n];\nL^{1}_{i=0} [\n  C^{f32,g}_{0} = 0.0;\n];"),
             "Nothing for leirc; for Step-TP compatibility start at 0 and shift the subscripts (`i+1`)."),
    "W004": ("An annotation (align, a pipeline or buffering region) is accepted but has no effect on the code "
             "leirc generates.",
             _k("L^{8}_{i=0} [\n  C=align(0,4,0);\n  C^{f32,g}_{i} = A^{f32,g}_{i};\n];"),
             "Remove it, or keep it as documentation."),
    "W005": ("A scope other than g is written on a kernel parameter; parameters live in global memory, so the "
             "scope is ignored.",
             _k("L^{8}_{i=0} [\n  C^{f32,g}_{i} = A^{f32,l}_{i};\n];"),
             "Write g; to use a faster scope, copy the parameter into an intermediate (cache_read)."),
    "W006": ("A kernel input is never read.",
             _k("L^{8}_{i=0} [\n  C^{f32,g}_{i} = 1.0;\n];"),
             "Read it, or drop it from the signature."),
    "W007": ("An intermediate is written but never read: dead work.",
             _k("L^{8}_{i=0} [\n  T^{f32,g}_{i} = A^{f32,g}_{i};\n  C^{f32,g}_{i} = A^{f32,g}_{i};\n];"),
             "Remove the statement, or read the tensor where it was meant to be used."),
    "W008": ("The file defines no kernel (it is empty, only comments, or a bare Step-TP body checked without "
             "--signature).",
             "% nothing here yet\n",
             "Write a \\kernel, or give a bare body its signature with `leirc check --signature SIG.json`."),
    "W009": ("A float value is stored into an integer tensor: the conversion truncates.",
             _k("L^{8}_{i=0} [\n  C^{i64,g}_{i} = A^{f32,g}_{i};\n];", "(A: f32[8]) -> (C: i64[8])"),
             "Cast explicitly to say it is meant: `i64(A^{f32,g}_{i})` (or round first)."),
    "W014": ("A subscript reads tensor data (indirect indexing): its bounds cannot be proven, so they are checked "
             "when the kernel runs.",
             _k("L^{8}_{i=0} [\n  C^{f32,g}_{i} = A^{f32,g}_{J^{i64,g}_{i}};\n];",
                "(A: f32[8], J: i64[8]) -> (C: f32[8])"),
             "Nothing if the data is known to be in range; otherwise clamp the index with min/max or guard it."),
    "W049": ("A read of a private tile may see an element that this execution of its \\alloc has not written, "
             "and the checker cannot tell (a guarded read, or too many executions to simulate without a covering "
             "write); verification poisons the tile, so a real uninitialized read fails there.",
             _k("L^{8}_{i=0} [\n  \\alloc T^{f32,l}[2];\n  T^{f32,l}_{0} = A^{f32,g}_{i};\n"
                "  C^{f32,g}_{i} = if_then_else(A^{f32,g}_{i} > 0.0, T^{f32,l}_{1}, T^{f32,l}_{0});\n];"),
             "Write the element on every path before the read (or drop the read that may miss); a write that covers "
             "the whole tile proves it."),
    "W050": ("On CUDA a shared or local tensor is kept in global memory: it spans several kernels or exceeds the "
             "per-block/per-thread budget.",
             None, "Allocate the tile inside the block loops that use it (\\alloc), or make it smaller.",
             "`leirc build -t cuda` (the lowering)"),
    "W051": ("On CUDA a kernel runs on a single thread: it has no B loop, or a reduction across a block axis or "
             "statements under different block loops were serialized. Correct, and slower than the CPU.",
             None, "Bind loops with loop_binding (or build with -O1/-O2, which bind them); see the message for "
             "which loop was serialized.", "`leirc build -t cuda` (the lowering)"),
}


def explanation(code: str) -> Optional[Explanation]:
    """The explanation of ``code`` (case-insensitive; ``12`` and ``E12`` mean E012), None if
    there is no such code."""
    c = normalize(code)
    if c is None or c not in CODES:
        return None
    t = _TEXTS.get(c)
    if t is None:  # a code added to the table without its text: still its title
        return Explanation(c, CODES[c], CODES[c] + ".", "See docs/language.md.")
    meaning, example, fix, *by = t
    return Explanation(c, CODES[c], meaning, fix, example, by[0] if by else None)


def normalize(code: str) -> Optional[str]:
    c = code.strip().upper()
    if c.isdigit():
        c = "E" + c
    if len(c) < 2 or c[0] not in "EW" or not c[1:].isdigit():
        return None
    return f"{c[0]}{int(c[1:]):03d}"


def explained_codes() -> list[str]:
    """The codes with a written explanation (the test compares them with CODES)."""
    return sorted(_TEXTS)


__all__ = ["Explanation", "explanation", "explained_codes", "normalize"]
