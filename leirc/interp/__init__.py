"""Reference interpreter (NumPy): the oracle that defines what a LEIR program computes.

    >>> from leirc.interp import run, random_inputs, check_source
    >>> r = check_source(text)                 # CheckResult of the (only) kernel
    >>> outs = run(r, random_inputs(r.kernel, seed=0))

See :mod:`leirc.interp.core` for the semantics and :mod:`leirc.interp.plan` for when loops
run vectorized. ``Interpreter(r, vectorize=False)`` runs literally, loop by loop: that is
the meaning, and the vectorized plan must agree with it (tests/test_interp_oracle.py).
``run(..., check_uninit=True)`` turns reads of never-written elements into errors;
:func:`leirc.interp.shrink.shrink` gives a small stand-in of a big kernel.
"""

from .core import MAX_ELEMENTS, InterpError, Interpreter, check_source, run, run_source
from .inputs import DISTS, index_ranges, random_inputs
from .plan import describe as describe_plan

__all__ = ["run", "run_source", "check_source", "random_inputs", "index_ranges", "InterpError", "Interpreter",
           "MAX_ELEMENTS", "DISTS", "describe_plan"]
