"""Program analyses shared by the checker, the strategies and the interpreter.

This package sits below :mod:`leirc.strategies`, :mod:`leirc.interp` and the checker's
race rule: it imports only :mod:`leirc.lang.ast` and :mod:`leirc.lang.affine`, and reads
the checker's statement facts (``StmtInfo``) by their public attributes, so that the
checker itself can call it without an import cycle.

* :mod:`.deps` — the one dependence test (may two statement instances touch the same
  element, under given relations between their loop indices?), loop-carried conflicts,
  and direction vectors / distances for reordering rewrites.
* :mod:`.reductions` — recognizing ``X = X op e`` accumulations.
"""

from .deps import (Ref, carried_conflict, dependence, direction_vectors, find_conflict, loop_independent, may_touch,
                   only_self_conflicts, privatized, refs_of)
from .reductions import reduction_form

__all__ = ["Ref", "carried_conflict", "dependence", "direction_vectors", "find_conflict", "loop_independent",
           "may_touch", "only_self_conflicts", "privatized", "reduction_form", "refs_of"]
