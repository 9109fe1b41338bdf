"""Python's buffer protocol: how it rejects a read-only buffer for writing."""

from __future__ import annotations

from ._adapter import Adapter


class BufferProtocol(Adapter):
    name = "Python's buffer protocol"
    # memoryview(a)[0] = x, ctypes.c_double.from_buffer(a), BytesIO.readinto(a): TypeErrors.
    rejected_buffers = (
        "cannot modify read-only memory",
        "underlying buffer is not writable",
        "must be read-write bytes-like",
    )
