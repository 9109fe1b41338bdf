"""torchify(): tensor-in, tensor-out views of modules, classes and objects, and their routes
(a library's own torch path, CuPy).
"""
