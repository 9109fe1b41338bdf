"""The call: options and their policies, the plan and its spec, the one per-call protocol
(the interpreter), the generated flat call, and the wrapper around a decorated callable.
"""
