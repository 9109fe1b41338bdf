"""Compiled code's refusals: arguments it may write into handed as private copies, a refusal
of read-only arrays on entry made again, and read-only refusals read as ReadOnlyError.
"""
