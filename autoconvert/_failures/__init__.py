"""Compiled code's rejections: arguments it may write into handed as private copies, a rejection
of read-only arrays on entry made again, and read-only rejections read as ReadOnlyError.
"""
