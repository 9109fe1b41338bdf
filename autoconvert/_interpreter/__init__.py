"""The call itself: the after step, the one per-call protocol (Runner), the Plan resolved
per config block, the routes tried before the converting wrapper, and the wrapper.
"""
