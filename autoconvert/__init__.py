"""autoconvert: call NumPy and SciPy code from PyTorch, and torch code from NumPy, with decorators.

``@accepts_numpy`` hands a function NumPy arrays where the caller passed tensors;
``@returns_tensor`` turns its results back into tensors on the caller's device. The
reverse pair, ``@accepts_tensor`` and ``@returns_numpy``, serves torch code called
from NumPy code. Copies follow NumPy 2's ``copy=`` keyword: shared where possible,
copied once where not, and never silently aliased.
"""

from ._adapt._adapt import adapt
from ._batched._batched import batched
from ._conversions._containers import register_container
from ._decorators._decorators import accepts_numpy, accepts_tensor, returns_numpy, returns_tensor
from ._decorators._plain import to_numpy, to_tensor
from ._errors import (
    CompileWarning,
    ConversionError,
    CopyError,
    DeviceMismatchError,
    GradientError,
    GradientWarning,
    ReadOnlyError,
    TransferError,
    TransferWarning,
)
from ._explain._explain import Explanation, explain
from ._numpy_op._ops import numpy_op
from ._observe._observe import FunctionStats, stats
from ._options._config import config
from ._torchify._torchify import torchify

__version__ = "0.1.0"

__all__ = [
    "CompileWarning",
    "ConversionError",
    "CopyError",
    "DeviceMismatchError",
    "Explanation",
    "FunctionStats",
    "GradientError",
    "GradientWarning",
    "ReadOnlyError",
    "TransferError",
    "TransferWarning",
    "__version__",
    "accepts_numpy",
    "accepts_tensor",
    "adapt",
    "batched",
    "config",
    "explain",
    "numpy_op",
    "register_container",
    "returns_numpy",
    "returns_tensor",
    "stats",
    "to_numpy",
    "to_tensor",
    "torchify",
]


# The exceptions and warnings read as autoconvert's own in tracebacks, reprs and pickles
# (``autoconvert.ConversionError``, not ``autoconvert._errors.ConversionError``). Classes
# with doctests keep their module: doctest collects examples by it.
for _name in __all__:
    _public = globals()[_name]
    if isinstance(_public, type) and issubclass(_public, (Exception, Warning)):
        _public.__module__ = __name__
del _name, _public


def __dir__() -> list[str]:
    """The public names: ``dir(autoconvert)`` and completion show the API, not the submodules."""
    return sorted(__all__)
