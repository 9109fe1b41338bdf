"""A call's specification: what the decorator reads from the function (its signature, its
out-parameters), what each selected argument and each result becomes (the input and output
sides, callables written for torch), the emitters of each step, and the frozen Spec built by
keyword that holds every decision.
"""
