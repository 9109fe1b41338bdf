"""What a decorator is given and reads once: the options table and each option's check,
config blocks, the function's signature and out-parameters; and what every call may use
(observation, the compile escape).
"""
