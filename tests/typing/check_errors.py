"""Misuse that mypy must reject (each line ends in its expected error code)."""

import numpy as np

import autoconvert as ac

ac.accepts_numpy(grad="sometimes")  # E: [call-overload]
ac.returns_tensor(copy="yes")  # E: [call-overload]
ac.returns_numpy(device="cpu")  # E: [call-overload]
ac.accepts_numpy(sparse="dense")  # E: [call-overload]
ac.to_tensor(np.zeros(1), sparse="array")  # E: [call-overload]
ac.to_numpy(np.zeros(1), device="cpu")  # E: [call-arg]
ac.numpy_op(np.sin, copy="yes")  # E: [call-overload]
ac.torchify(np, grad="sometimes")  # E: [arg-type]
ac.torchify(np, native="yes")  # E: [arg-type]
ac.torchify(np, array_module="jax")  # E: [arg-type]
ac.batched(np.max, chunksize="auto")  # E: [call-overload]
ac.batched(np.max, seed="fixed")  # E: [call-overload]
ac.batched(np.max, dtype="float32")  # E: [call-overload]
ac.batched(np.max, nested=False)  # E: [call-overload]
