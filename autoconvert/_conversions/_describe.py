"""How tensors, arrays and sparse matrices are named in messages, and warnings placed at the
caller's line (not at autoconvert's own frames or its generated code)."""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

#: The package's folder (this module sits in one of its layer folders): frames there are ours.
_PACKAGE_DIR = os.path.dirname(os.path.dirname(__file__)) + os.sep


_WRAPT_DIR = f"{os.sep}wrapt{os.sep}"


#: How the filenames of autoconvert's generated code begin (see _specialise).
GENERATED = "<autoconvert "


def qualified(obj: Any) -> str:
    """A class's or function's name as messages give it: ``module.Qualname``, builtins' bare."""
    module = getattr(obj, "__module__", None)
    return f"{module}.{obj.__qualname__}" if module and module != "builtins" else obj.__qualname__


def describe_tensor(t: torch.Tensor) -> str:
    """``torch.Tensor(shape=(2, 3), dtype=torch.float32, layout=torch.strided, device=cpu)``."""
    try:
        shape = str(tuple(t.shape))
    except RuntimeError:  # nested tensors have no single shape
        shape = f"<{t.dim()}-d, ragged>"
    return f"{qualified(type(t))}(shape={shape}, dtype={t.dtype}, layout={t.layout}, device={t.device})"


def describe_array(a: NDArray[Any] | np.generic) -> str:
    """``numpy.ndarray(shape=(2,), dtype=<U3)``."""
    return f"{qualified(type(a))}(shape={a.shape}, dtype={a.dtype.str})"


def describe_sparse(m: Any) -> str:
    """``scipy.sparse._csr.csr_array(shape=(3, 3), format='csr')``."""
    return f"{qualified(type(m))}(shape={m.shape}, format={m.format!r})"


def is_ours(filename: str) -> bool:
    """Whether code in ``filename`` is autoconvert's (its generated code too) or wrapt's: not
    the user's, for a warning's location and an error's traceback (see _failures._traceback)."""
    return filename.startswith((_PACKAGE_DIR, GENERATED)) or _WRAPT_DIR in filename


def warn_at_caller(text: str, category: type[Warning], *, past_callee: bool = False) -> None:
    """Warn with the location of the first frame outside autoconvert (generated code too) and
    wrapt; ``past_callee``, said from a callback: of the first such frame past the library
    code that called the callback and the autoconvert frames that called that library (the
    line calling the decorated function), where there is one."""
    level = 2  # stacklevel=2 names sys._getframe(1), our caller
    frame: Any = sys._getframe(1)
    passes = [True, False, True] if past_callee else [True]
    for ours in passes:
        while frame is not None and is_ours(frame.f_code.co_filename) is ours:
            frame = frame.f_back
            level += 1
    if frame is None and past_callee:  # a callback called on another thread: the library's line
        warn_at_caller(text, category)
        return
    warnings.warn(text, category, stacklevel=level)
