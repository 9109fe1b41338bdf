"""Backward (and jvp) rules for SciPy functions, computed with SciPy on NumPy arrays: the
catalogue ``numpy_op`` and torchify's host route take a function's gradient from."""
