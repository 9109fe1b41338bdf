"""autoconvert's benchmarks: ratios to the hand-written idiom, measured in one process (python -m benchmarks)."""
