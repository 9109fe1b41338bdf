"""The table of adapters the call path consults: the library a value comes from, and each
kind of knowledge gathered from all of them. Adding a library is adding its module to ADAPTERS."""

from __future__ import annotations

from typing import Any

from ._adapter import Adapter, RejectionWords, module_of
from ._array_api_compat import ArrayApiCompat
from ._cython import Cython
from ._f2py import F2py
from ._numba import Numba
from ._numpy import NumPy
from ._opencv import OpenCV
from ._python import BufferProtocol
from ._scipy import SciPy
from ._sklearn import ScikitLearn
from ._torch import Torch

NUMPY = NumPy()
#: Every adapter; those that claim values their module does not name come first.
ADAPTERS: tuple[Adapter, ...] = (
    F2py(),
    ArrayApiCompat(),
    NUMPY,
    SciPy(),
    ScikitLearn(),
    Cython(),
    Numba(),
    OpenCV(),
    BufferProtocol(),
    Torch(),
)
#: The adapter of code no other adapter describes.
OTHERS = Adapter()
_CLAIMING = tuple(a for a in ADAPTERS if type(a).claims is not Adapter.claims)
_BY_PACKAGE = {package: adapter for adapter in ADAPTERS for package in adapter.packages}


def adapter_for(value: Any) -> Adapter:
    """The adapter of the library ``value`` (a module, class, callable or object) comes from."""
    for adapter in _CLAIMING:
        if adapter.claims(value):
            return adapter
    return _BY_PACKAGE.get(module_of(value).partition(".")[0], OTHERS)


def _every(field: str) -> Any:
    return tuple(item for adapter in ADAPTERS for item in getattr(adapter, field))


REJECTED_WRITES: tuple[str, ...] = _every("rejected_writes")
REFUSED_FLAGS: tuple[str, ...] = _every("refused_flags")
REJECTED_DEMANDS: tuple[str, ...] = _every("rejected_demands")
REJECTED_BUFFERS: tuple[str, ...] = _every("rejected_buffers")
REJECTED_ON_ENTRY: tuple[str, ...] = _every("rejected_on_entry")
REJECTIONS: tuple[RejectionWords, ...] = _every("rejections")
READ_ONLY_VIEWS: frozenset[str] = frozenset(_every("read_only_views"))
WRITEABLE_DEFAULTS: dict[str, bool] = {k: v for adapter in ADAPTERS for k, v in adapter.writeable_defaults.items()}


def compiled_rejection(error: BaseException) -> bool | None:
    """Whether ``error`` is compiled code rejecting a read-only array in words its error class
    tells (numba, OpenCV): True for a rejected write (a kernel storing into it, ``cv2.fillPoly``
    drawing on it), False for a rejection on entry (a kernel whose signature asks for writable
    arrays); None where it is neither."""
    module = type(error).__module__.partition(".")[0]
    text = str(error)
    for rejection in REJECTIONS:
        if module == rejection.module and all(w in text for w in rejection.words):
            return rejection.writes
    return None


def rejected_on_entry(error: BaseException) -> bool:
    """Whether ``error`` is compiled code rejecting a read-only array before doing any work: a
    Cython memoryview, a numba kernel's explicit signature."""
    if isinstance(error, ValueError) and str(error) in REJECTED_ON_ENTRY:
        return True
    return compiled_rejection(error) is False
