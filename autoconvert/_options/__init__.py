"""What a decorator is given and reads once: the options table, each option's check, and
``config`` blocks' defaults.
"""
