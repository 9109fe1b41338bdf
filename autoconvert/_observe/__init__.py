"""Watched calls: copies reported as ``transfers=`` asks, counted into ``stats()`` blocks, and
each side's conversions in a profiler range.
"""
