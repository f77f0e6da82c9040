"""The explicit, alphabetical list of strategy family modules. Importing this module
registers every strategy (rust-analyzer keeps one explicit list of assists likewise)."""

from . import blocking  # noqa: F401
from . import gpu  # noqa: F401
from . import graph  # noqa: F401
from . import loops  # noqa: F401
from . import math_expr  # noqa: F401
from . import math_loops  # noqa: F401
from . import memory  # noqa: F401
from . import program  # noqa: F401
from . import schedule  # noqa: F401
