"""The conversions: one tensor or array to the other (by direction, sparse), dtypes, devices,
copies, memory, the grad policy, and containers. Nothing here knows of decorators or calls.
"""
