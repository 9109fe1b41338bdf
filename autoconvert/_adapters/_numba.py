"""numba: how its kernels reject read-only arrays."""

from __future__ import annotations

from typing import Any

from ._adapter import Adapter, RejectionWords


class Numba(Adapter):
    name = "numba"
    packages = ("numba",)

    def claims(self, value: Any) -> bool:
        """A kernel (``numba.njit(f)``), which names the module of the function it compiled."""
        return type(value).__module__.startswith("numba.")

    rejections = (
        RejectionWords("numba", ("Cannot modify readonly array",), writes=True),
        RejectionWords("numba", ("setitem(readonly array(",), writes=True),
        # A kernel whose explicit signature asks for writable arrays: any of its arguments.
        RejectionWords("numba", ("readonly array(",), writes=False),
        RejectionWords("builtins", ("No matching definition for argument type(s) ", "readonly array("), writes=False),
    )
