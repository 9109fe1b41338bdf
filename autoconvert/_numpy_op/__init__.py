"""numpy_op(): a NumPy function as a torch op with a NumPy backward, eagerly, under
torch.func and under torch.compile.
"""
