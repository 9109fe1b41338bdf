"""Misuse that mypy must reject (each line ends in its expected error code)."""

import autoconvert as ac

ac.accepts_numpy(grad="sometimes")  # E: [call-overload]
ac.returns_tensor(copy="yes")  # E: [call-overload]
ac.returns_numpy(device="cpu")  # E: [call-overload]
