"""What ``explain`` says: each side's policy, each step of a spec (_spec) and the after step, in words."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autoconvert._adapt._wants import ANY, ARRAY, EACH, ITEMS, TENSOR, Want
from autoconvert._interpreter._wrapper import shown
from autoconvert._options._options import Policy, gives_way
from autoconvert._spec._emit import Step
from autoconvert._spec._spec import Spec


def option_words(option: Any) -> str:
    """An option's value as the decorator's repr shows it; parameter names as a sorted list."""
    return repr(sorted(option)) if isinstance(option, frozenset) else shown(option)


def arguments_words(policies: Mapping[str, Policy], adapted: bool) -> str:
    numpy_side = policies.get("accepts_numpy") or policies.get("adapt")
    if numpy_side is not None:
        words = _to_arrays_words(numpy_side)
        if adapted:
            words = (
                f"where a parameter asks for an array, {words}; where it asks for a tensor, an array becomes a tensor"
            )
        return words
    tensor_side = policies.get("accepts_tensor")
    if tensor_side is not None:
        return _to_tensors_words(tensor_side)
    if "returns_tensor" in policies:
        return "passed as they are; the tensors among them decide the results' device"
    return "passed as they are"


def _to_arrays_words(p: Policy) -> str:
    if gives_way("explain's read-only arrays", p):
        words = (
            "a tensor becomes a writable NumPy array (its own memory on the CPU, else a private copy), and what "
            "the function writes reaches the tensor after the call, even if it raises"
        )
    elif p.copy:
        words = "a tensor becomes a private, writable NumPy copy"
    else:
        words = (
            "a tensor becomes a read-only NumPy array sharing its memory on the CPU; "
            + ("a copy is refused (CopyError)" if p.copy is False else "a copy only where NumPy cannot share it")
            + " (a GPU tensor, a dtype NumPy lacks such as bfloat16, a conjugate bit)"
        )
    grad = {"warn": "detached with a GradientWarning once", "detach": "detached", "error": "refused (GradientError)"}
    words += f"; one that requires grad or carries a forward-mode tangent (a forward_ad dual tensor) is {grad[p.grad]}"
    if p.widen_float16:
        words += "; float16 crosses as float32"
    words += f"; sparse tensors as scipy.sparse {'arrays' if p.sparse == 'array' else 'matrices'}"
    if p.callbacks:
        words += "; callables are handed arrays-to-tensors adapters (callbacks=True)"
    return words + _nested_words(p)


def _to_tensors_words(p: Policy) -> str:
    where = f"on {p.device}" if p.device is not None else "on torch's default device"
    copy = {
        None: "sharing its memory where torch can",
        True: "a private copy",
        False: "sharing, never copied (CopyError)",
    }
    return f"an array or NumPy scalar becomes a tensor {where}, {copy[p.copy]}{_dtype_words(p)}" + _nested_words(p)


def _nested_words(p: Policy) -> str:
    return "; inside lists, tuples, dicts, namedtuples and dataclasses too" if p.nested else "; top-level values only"


def _dtype_words(p: Policy) -> str:
    if p.dtype == "input":
        return "; floating ones cast to the floating dtype of the call's tensors"
    if p.dtype is not None:
        return f"; floating ones cast to {p.dtype}"
    return ""


def parameters_words(spec: Spec, scalars: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """Each parameter's step in words; ``scalars``: the parameters a plain Python value is
    meant for (see Parameters.scalars), which a tensor-only conversion leaves as they are."""
    if spec.parameters is None:
        return (("(no signature)", "every argument " + _converted(spec.value)),)
    return tuple((name, _parameter(name, step, spec.value, scalars.get(name))) for name, step in spec.parameters)


def _parameter(name: str, step: Step, value: Step, scalar: str | None) -> str:
    if step.kind == "instance":
        return f"the {'class' if name == 'cls' else 'instance'}: never converted"
    if step.kind == "asks":
        return _want(step.asks, "each one " if name[0] == "*" else "")
    if step.kind == "written":
        return "an out-parameter: a tensor here is handed over writable, returned as itself"
    if step != value:
        return "left as it is (only=/exclude=)"
    converted = _converted(step)
    if scalar is not None and converted == "converted":
        return f"converted if a tensor; {scalar} passes as it is"
    return converted


def _converted(step: Step) -> str:
    """What a value with this step (the side's own) becomes, in short."""
    if step.kind == "unconverted":
        return "passed as it is"
    if step.kind == "recorded":
        return "passed as it is, its tensors recorded"
    return "converted"


def _want(want: Want | None, prefix: str = "") -> str:
    if want is None:
        return "left as it is (no annotation asks for an array or a tensor)"
    return prefix + _asked(want)


def _asked(want: Want) -> str:
    if want.kind == ARRAY:
        return (
            "an array"
            + (f" of {want.dtype}" if want.dtype is not None else "")
            + (" (or None)" if not want.bare else "")
        )
    if want.kind == TENSOR:
        return "a tensor"
    if want.kind == EACH and want.each is not None:
        return f"each item {_asked(want.each)}"
    if want.kind == ITEMS:
        return "items: " + ", ".join(_asked(w) for w in want.items)
    return "as it is" if want.kind != ANY else "whatever it holds"


def result_words(policies: Mapping[str, Policy], adapts: Want | None = None) -> str:
    """What the result becomes; ``adapts``: what an adapted function's return annotation asks."""
    if adapts is not None:
        return (
            "arrays become tensors when the caller passed tensors (on their device, in their floating dtype); "
            "tensors become arrays when it passed arrays and no tensors; "
            f"the return annotation asks for {_asked(adapts)}"
        )
    out = policies.get("returns_tensor")
    if out is not None:
        where = (
            f"on {out.device}"
            if out.device is not None
            else "on the device of the call's tensors (torch's default without any)"
        )
        copy = {
            None: "sharing the array's memory where torch can, else copied once",
            True: "always in memory of their own",
            False: "sharing, never copied (CopyError)",
        }
        dtype = (
            _dtype_words(out)
            or "; NumPy's dtype, with bfloat16, float8 and complex32 restored when every floating argument had it"
        )
        layout = f"; scipy.sparse as {out.sparse_layout}" if out.sparse_layout is not None else ""
        return f"arrays and NumPy scalars become tensors {where}, {copy[out.copy]}{dtype}{layout}{_nested_words(out)}"
    back = policies.get("returns_numpy")
    if back is not None:
        copy = {None: "sharing a CPU tensor's memory", True: "always copied", False: "never copied (CopyError)"}
        return (
            f"tensors become NumPy arrays: detached, on the host, dtypes NumPy lacks widened, {copy[back.copy]}"
            + _nested_words(back)
        )
    return "returned as it is"
