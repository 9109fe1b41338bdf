"""The libraries on the other side of a call, one module each: how each rejects read-only
memory, which arguments it writes, torchify's defaults for it, how its callables take
arguments; ``_table`` is the table the call path consults.
"""
