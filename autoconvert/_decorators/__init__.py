"""The decorator pairs (accepts_numpy, returns_tensor and the reverse pair, fused into one
wrapper) and to_numpy/to_tensor.
"""
