"""Routines built by f2py (SciPy's LAPACK and BLAS wrappers): which arguments they write.

f2py ignores NumPy's read-only flag: ``scipy.linalg.blas.daxpy(x, y)`` writes into ``y``
with no flag at all, and ``lapack.dppsv`` into ``ap``, which its signature calls an input.
"""

from __future__ import annotations

import re
from typing import Any

from ._adapter import Adapter, Overwritten

#: f2py's docstring starts with its signature: ``lu,piv,info = dgetrf(a,[overwrite_a])``
#: (a routine with no results has no ``=``).
_SIGNATURE = re.compile(r"^(?:[^=(]*=\s*)?\w+\((?P<names>[^)]*)\)")


class F2py(Adapter):
    name = "f2py"

    def claims(self, value: Any) -> bool:
        return type(value).__name__ == "fortran" and isinstance(value.__doc__, str)

    def overwritten(self, fn: Any) -> list[Overwritten]:
        """An f2py routine may write into any array it is handed: an argument with an
        ``overwrite_X`` flag when the flag is set (else f2py copies it), and every other one
        always, since f2py passes arrays of the right type and order through uncopied and the
        signatures do not always say which the routine writes (``dppsv`` writes into ``ap``,
        declared an input)."""
        doc = fn.__doc__
        signature = _SIGNATURE.match(doc)
        if signature is None:
            return []
        names = [n.strip(" []") for n in signature["names"].split(",") if n.strip(" []")]
        found = []
        for position, name in enumerate(names):
            if name.startswith("overwrite_"):
                continue
            flag = f"overwrite_{name}"
            if flag in names:
                default = re.search(rf"^{flag} : .*\n\s+Default: (\d+)", doc, re.MULTILINE)
                on = int(default[1]) if default else 1  # a default not found: assume it overwrites
                found.append(Overwritten(name, position, flag, names.index(flag), on))
            else:
                found.append(Overwritten(name, position, None, None, True))
        return found
