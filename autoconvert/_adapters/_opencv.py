"""OpenCV: how it refuses read-only images."""

from __future__ import annotations

from ._adapter import Adapter, RefusalWords


class OpenCV(Adapter):
    name = "OpenCV"
    packages = ("cv2",)
    # cv2.fillPoly drawing on a read-only image.
    refusals = (RefusalWords("cv2", ("provided NumPy array marked as readonly",), writes=True),)
