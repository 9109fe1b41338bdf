"""Cython: its rejection of a read-only array on entry, and the frames it reports."""

from __future__ import annotations

import dis

from ._adapter import Adapter

#: The code of the frames Cython reports for its functions (``PyCode_NewEmpty``'s, never run).
FRAME = bytes([dis.opmap["RESUME"], 0, dis.opmap["LOAD_ASSERTION_ERROR"], 0, dis.opmap["RAISE_VARARGS"], 1])


class Cython(Adapter):
    name = "Cython"
    # A typed memoryview not declared const (scipy.signal.sosfilt, Rotation.apply in SciPy
    # 1.17): refused on entry, before the function reads or writes.
    rejected_on_entry = ("buffer source array is read-only",)
