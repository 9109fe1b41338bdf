"""The public features built on the call: the decorators, to_numpy/to_tensor, batched,
torchify, adapt, numpy_op and explain.
"""
