"""OpenCV: how it rejects read-only images."""

from __future__ import annotations

from ._adapter import Adapter, RejectionWords


class OpenCV(Adapter):
    name = "OpenCV"
    packages = ("cv2",)
    # cv2.fillPoly drawing on a read-only image.
    rejections = (RejectionWords("cv2", ("provided NumPy array marked as readonly",), writes=True),)
