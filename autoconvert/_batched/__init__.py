"""batched(): the batch converted once, the function once per sample, on the caller's thread,
threads, process pools or Dask; seeds and thread caps per runner.
"""
