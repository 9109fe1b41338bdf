"""numba: how its kernels refuse read-only arrays."""

from __future__ import annotations

from ._adapter import Adapter, RefusalWords


class Numba(Adapter):
    name = "numba"
    packages = ("numba",)
    refusals = (
        RefusalWords("numba", ("Cannot modify readonly array",), writes=True),
        RefusalWords("numba", ("setitem(readonly array(",), writes=True),
        # A kernel whose explicit signature asks for writable arrays: any of its arguments.
        RefusalWords("numba", ("readonly array(",), writes=False),
        RefusalWords("builtins", ("No matching definition for argument type(s) ", "readonly array("), writes=False),
    )
