"""Operator handlers of the PyTorch frontend, one module per op family.

Each fx call (``call_function``, ``call_method``, ``call_module``) is looked up in the
registration table of :mod:`.registry` and translated by its handler, with the signature of
the PyTorch function (so positional and keyword arguments resolve as in PyTorch). Modules
(``nn.Conv2d``, ``nn.BatchNorm2d``, ...) are translated into the functional form, with their
parameters as kernel inputs.

Families: :mod:`.shape` (views, casts, indexing, creation), :mod:`.elementwise`,
:mod:`.reduce`, :mod:`.linalg`, :mod:`.conv_pool`, :mod:`.norm`, :mod:`.loss`,
:mod:`.modules`; :mod:`.base` has the dispatch and the building blocks, :mod:`.common` the
shared tables.

Conventions of the emitted code (see :mod:`..builder`): one nest per operator, spatial
loops outside, reduction loops inside; view-like operators fold into subscripts; long sums
are split into partial sums; padding is a padded copy (``0`` for convolution and average
pooling, ``-inf`` for max pooling), transposed convolution is a gather with
``(o + p - k*d) % s == 0`` guards.
"""

from .common import ALIASES, BINARY, UNARY, leir_dtype
from .conv_pool import ConvPoolOps
from .elementwise import ElementwiseOps
from .linalg import LinalgOps
from .loss import LossOps
from .modules import ModuleOps
from .norm import NormOps
from .reduce import ReduceOps
from .registry import FUNCTIONS, METHODS, MODULES
from .shape import ShapeOps


class Ops(ShapeOps, ElementwiseOps, ReduceOps, LinalgOps, ConvPoolOps, NormOps, LossOps, ModuleOps):
    """The translator of one traced model: every family's handlers over one builder."""


__all__ = ["Ops", "ALIASES", "UNARY", "BINARY", "FUNCTIONS", "METHODS", "MODULES", "leir_dtype"]
