"""``autoconvert.explain``: what a call does, read from the plan, in words and attributes."""

from __future__ import annotations

import functools
import linecache
from typing import Any

import numpy as np
import pytest
import scipy.ndimage
import torch

import autoconvert as ac
from autoconvert._options._options import Policy
from autoconvert._spec import _spec

FLAT = _spec.enabled  # False under pytest --generic-calls: every plan takes the generic call


def _pair(func: Any = None, **options: Any) -> Any:
    return ac.returns_tensor(ac.accepts_numpy(**options)(func))


def smooth(x: np.ndarray, sigma: float = 1.0, mode: str = "reflect") -> np.ndarray:
    return scipy.ndimage.gaussian_filter(x, sigma, mode=mode)


def test_a_fused_pair_is_explained_side_by_side_parameter_by_parameter() -> None:
    """Each option with where its value comes from, each parameter's fate, the result, the path."""
    e = ac.explain(ac.returns_tensor(ac.accepts_numpy(grad="error", exclude="mode")(smooth)), verbose=True)
    text = str(e)
    assert text.startswith(
        "smooth(): accepts_numpy() + returns_tensor(), fused into one wrapper\n"
        "\n"
        "accepts_numpy:\n"
        "    copy=None                      (default)\n"
        "    writeback=False                (default)\n"
        "    grad='error'                   (given)\n"
        "    only=None                      (default)\n"
        "    exclude=['mode']               (given)\n"
    )
    assert (
        "    a config block may change: copy, writeback, nested, sparse, widen_float16, check_writes, transfers, "
        "callbacks\nreturns_tensor:\n    device=None                    (default)\n"
    ) in text
    assert (
        "Arguments: a tensor becomes a read-only NumPy array sharing its memory on the CPU; a copy only where "
        "NumPy cannot share it (a GPU tensor, a dtype NumPy lacks such as bfloat16, a conjugate bit); one that "
        "requires grad or carries a forward-mode tangent (a forward_ad dual tensor) is refused (GradientError); "
        "sparse tensors as scipy.sparse arrays; inside lists, tuples, dicts, namedtuples and dataclasses too\n"
        "    x      converted\n"
        "    sigma  converted if a tensor; a float (its default: 1.0) passes as it is\n"
        "    mode   left as it is (only=/exclude=)\n"
        "Result: arrays and NumPy scalars become tensors on the device of the call's tensors (torch's default "
        "without any), sharing the array's memory where torch can, else copied once; NumPy's dtype, with "
        "bfloat16, float8 and complex32 restored when every floating argument had it; inside lists, tuples, "
        "dicts, namedtuples and dataclasses too\n"
    ) in text
    assert e.policies == {
        "accepts_numpy": Policy(grad="error", exclude=frozenset({"mode"})),
        "returns_tensor": Policy(),
    }
    assert e.explicit == {"accepts_numpy": {"grad": "error", "exclude": frozenset({"mode"})}, "returns_tensor": {}}
    assert e.after is None and e.config == {}
    assert repr(e) == text


def test_a_parameter_meant_for_a_plain_value_says_it_passes_as_it_is() -> None:
    """A parameter annotated or defaulting to a bool, int, float, complex or str is not listed
    as "converted" alone: a tensor passed there converts, the plain value passes as it is. A
    None default or another annotation says nothing of what is passed."""

    @ac.accepts_numpy
    def f(
        x,
        sigma: float,
        n: int,
        *,
        scale=2.5,
        on=True,
        mode="wrap",
        z=1j,
        k: float = 3,
        bins=None,
        w: np.ndarray | int = 1,
    ):
        return x

    assert ac.explain(f).parameters == (
        ("x", "converted"),
        ("sigma", "converted if a tensor; a float (annotated) passes as it is"),
        ("n", "converted if a tensor; an int (annotated) passes as it is"),
        ("scale", "converted if a tensor; a float (its default: 2.5) passes as it is"),
        ("on", "converted if a tensor; a bool (its default: True) passes as it is"),
        ("mode", "converted if a tensor; a str (its default: 'wrap') passes as it is"),
        ("z", "converted if a tensor; a complex (its default: 1j) passes as it is"),
        ("k", "converted if a tensor; a float (its default: 3) passes as it is"),
        ("bins", "converted"),
        ("w", "converted if a tensor; an int (its default: 1) passes as it is"),
    )


def test_printed_by_default_it_is_short_the_call_path_first() -> None:
    """print(explain(f)) shows the call path, what converts, and the options not left at their
    defaults; verbose=True every option and the generated source."""
    e = ac.explain(_pair(smooth, exclude="mode"))
    path = (
        "Call path: flat. Generated for this plan: it converts bare tensors, and exact dicts, lists and tuples of "
        "them, inline; any other call (deeper containers, a tensor NumPy cannot share, an out-parameter passed, a "
        "config block, stats() or the profiler active, an error to report) goes to the generic call, which gives "
        "the same result."
        if FLAT
        else "Call path: generic. The plan has no flat call: flat calls are off."
    )
    assert str(e) == "\n".join(
        [
            "smooth(): accepts_numpy() + returns_tensor(), fused into one wrapper",
            path if FLAT else f"Call path: {e.path}. {e.why}",
            f"Arguments: {e.arguments}",
            "    x      converted",
            "    sigma  converted if a tensor; a float (its default: 1.0) passes as it is",
            "    mode   left as it is (only=/exclude=)",
            f"Result: {e.result}",
            "Options: given: accepts_numpy(exclude=['mode']), the rest default",
            "explain(f, verbose=True) lists every option" + (" and the generated source" if FLAT else ""),
        ]
    )
    assert e.source is not None if FLAT else e.source is None  # the attributes hold every fact
    assert len(str(e).splitlines()) < len(str(ac.explain(_pair(smooth), verbose=True)).splitlines()) / 3


@pytest.mark.skipif(not FLAT, reason="flat calls are off (--generic-calls)")
def test_the_flat_call_s_source_is_the_code_that_runs() -> None:
    """The generated source shown is what linecache holds for the wrapper's own ``__call__``,
    then for each generated helper it calls (the walks of containers of tensors, of arrays)."""
    pair = _pair(smooth)
    e = ac.explain(pair)
    assert e.path == "flat"
    call = type(pair).__dict__["__call__"]
    function = getattr(call, "__func__", call)
    code = function.__code__
    header, source = e.source.split("\n", 1)  # type: ignore[union-attr]
    assert header == f"# {code.co_filename}; p0 is x, p1 is sigma, p2 is mode"
    source, *helpers = source.split("\n\n# ")
    source, names = source.split("# its free names:\n")
    assert source == "".join(linecache.getlines(code.co_filename))
    listed = [line.split(":")[0].strip("# ") for line in names.splitlines()]
    assert listed == sorted(n for n in code.co_names if n in function.__globals__)
    assert "#   numpy_items: generated, below" in names and "#   Tensor: torch.Tensor" in names
    for name, helper in zip(("numpy_items", "shared_items"), helpers, strict=True):
        helper_code = function.__globals__[name].__code__
        filename, helper_source = helper.split("\n", 1)
        assert filename == helper_code.co_filename
        helper_source = helper_source.split("# its free names:\n")[0]
        assert helper_source.rstrip("\n") == "".join(linecache.getlines(helper_code.co_filename)).rstrip("\n")
    assert source.startswith("def __call__(p0, p1=d1, p2=d2):\n    if compiling():\n")
    assert "Call path: flat. Generated for this plan: it converts bare tensors" in str(e)


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (lambda: ac.accepts_numpy(writeback=True)(smooth), "writeback=True writes the arrays back into the "
         "caller's tensors after the call."),
        (lambda: _pair(smooth, check_writes=True), "check_writes=True compares the caller's tensors with their "
         "copies after the call."),
        (lambda: ac.accepts_tensor(dtype="input")(smooth), "dtype='input' casts by the dtypes of all the call's "
         "tensors, known once every argument is seen."),
        (lambda: ac.returns_tensor(dtype="input")(smooth), "dtype='input' casts results by the dtypes of the "
         "call's tensors."),
        (lambda: ac.returns_tensor(ac.accepts_tensor(smooth)), "accepts_tensor with returns_tensor: results are "
         "placed by the tensors the arguments became."),
    ],
)  # fmt: skip
def test_a_plan_without_a_flat_call_says_why(make: Any, why: str) -> None:
    """The reason is the one the generator itself stops at: the plan really has no flat call."""
    wrapper = make()
    e = ac.explain(wrapper)
    assert wrapper._self_plan.default.flat is None
    assert e.path == "generic" and e.source is None
    expected = "flat calls are turned off (the test suite's --generic-calls)." if not FLAT else why
    assert e.why == f"The plan has no flat call: {expected}"


def test_a_transfer_policy_and_adapt_take_the_generic_call() -> None:
    guarded = ac.explain(ac.accepts_numpy(transfers="warn")(smooth))
    assert guarded.path == "generic"
    assert (
        guarded.why == "A transfers= policy other than 'allow' watches every call, to guard its copies between devices."
    )

    @ac.adapt
    def f(img: np.ndarray, k: int, masks: list[torch.Tensor], *rest: np.ndarray) -> np.ndarray:
        return img

    e = ac.explain(f)
    assert e.path == "generic" and e.why == (
        "adapt() gives the generic call its own steps: each parameter converted as its annotation asks."
    )
    assert e.parameters == (
        ("img", "an array"),
        ("k", "left as it is (no annotation asks for an array or a tensor)"),
        ("masks", "each item a tensor"),
        ("*rest", "each one an array"),
    )
    assert e.result.endswith("the return annotation asks for an array")


def test_inside_a_config_block_the_block_s_options_show_where_they_apply() -> None:
    pair = _pair(smooth, grad="error")
    with ac.config(copy=True, grad="detach", device="cpu"):
        e = ac.explain(pair, verbose=True)
        short = str(ac.explain(pair)).splitlines()[-2]
    assert e.config == {"copy": True, "grad": "detach", "device": torch.device("cpu")}
    assert e.policies["accepts_numpy"].copy is True and e.policies["accepts_numpy"].grad == "error"  # given wins
    assert e.policies["returns_tensor"].device == torch.device("cpu")
    assert "    copy=True                      (config)\n" in str(e)
    assert short == (  # grad= is given, so the block's does not apply
        "Options: given: accepts_numpy(grad='error'), the rest default; the active config block sets copy=True, "
        "device='cpu'"
    )
    assert "grad" not in e.configurable["accepts_numpy"]
    assert e.arguments == (
        "a tensor becomes a private, writable NumPy copy; one that requires grad or carries a forward-mode tangent "
        "(a forward_ad dual tensor) is refused (GradientError); sparse tensors as scipy.sparse arrays; inside lists, "
        "tuples, dicts, namedtuples and dataclasses too"
    )
    assert e.path == "generic" if not FLAT else e.path == "flat"
    assert e.why.endswith(" Inside this config block, every call takes the generic call, watched.")
    assert e.source is None


def test_methods_and_out_parameters_are_named_as_such() -> None:
    class Filters:
        @ac.accepts_numpy
        def scale(self, a: np.ndarray, k: float) -> np.ndarray:
            return a * k

        @ac.accepts_numpy
        @classmethod
        def made(cls, a: np.ndarray) -> np.ndarray:
            return a

        @ac.accepts_numpy(only="a", out_params="out")
        @staticmethod
        def add(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
            return np.add(a, b, out=out)

    instance = ("self", "the instance: never converted")
    k = ("k", "converted if a tensor; a float (annotated) passes as it is")
    assert ac.explain(Filters().scale).parameters == (instance, ("a", "converted"), k)
    assert ac.explain(Filters.scale).parameters == ac.explain(Filters().scale).parameters
    assert ac.explain(Filters.made).parameters == (("cls", "the class: never converted"), ("a", "converted"))
    out = "an out-parameter: a tensor here is handed over writable, returned as itself"
    assert ac.explain(Filters.add).parameters == (
        ("a", "converted"),
        ("b", "left as it is (only=/exclude=)"),
        ("out", out),
    )
    assert ac.explain(Filters.add).after == (
        "out-parameters' private copies (off the CPU) are written back into the caller's tensors"
    )


def test_each_side_alone_says_what_it_converts() -> None:
    assert ac.explain(ac.returns_tensor(smooth)).parameters[0] == ("x", "passed as it is, its tensors recorded")
    assert ac.explain(ac.returns_tensor(smooth)).arguments == (
        "passed as they are; the tensors among them decide the results' device"
    )
    back = ac.explain(ac.returns_numpy(copy=True)(smooth))
    assert back.parameters[0] == ("x", "passed as it is") and back.arguments == "passed as they are"
    assert back.result == (
        "tensors become NumPy arrays: detached, on the host, dtypes NumPy lacks widened, always copied; inside "
        "lists, tuples, dicts, namedtuples and dataclasses too"
    )
    into = ac.explain(ac.accepts_tensor(device="cpu", dtype=torch.float16, nested=False)(smooth))
    assert into.arguments == (
        "an array or NumPy scalar becomes a tensor on cpu, sharing its memory where torch can; floating ones "
        "cast to torch.float16; top-level values only"
    )
    assert into.result == "returned as it is"
    checked = ac.explain(ac.accepts_numpy(check_writes=True)(smooth))
    assert checked.after == (
        "each tensor argument's memory (or the private array it was handed) is compared with a copy taken before "
        "the call; a change raises ReadOnlyError, put back where it is the caller's"
    )


def test_torchify_numpy_op_and_batched_say_how_they_were_made() -> None:
    view = ac.explain(ac.torchify(scipy.ndimage))
    assert view.made_by == "torchify(): each function read from it becomes accepts_numpy() + returns_tensor(), fused"
    assert view.explicit["accepts_numpy"] == {"out_params": ("out", "output"), "widen_float16": True}
    assert view.path == "per function" and view.parameters == ()
    function = ac.explain(ac.torchify(scipy.ndimage).gaussian_filter)
    assert function.parameters[0] == ("input", "converted") and function.policies["accepts_numpy"].widen_float16

    def smooth(a: np.ndarray) -> np.ndarray:
        return np.sin(a) * 2

    pair = ac.explain(ac.returns_tensor(ac.accepts_numpy(smooth)))
    for made in (ac.torchify(smooth), ac.torchify(smooth).__call__):  # a plain function's proxy: its call
        call = ac.explain(made)
        assert (call.function, call.parameters) == (smooth.__qualname__ + "()", (("a", "converted"),))
        assert call.compiled is not None and (call.path, call.compiled) == (pair.path, pair.compiled)

    op = ac.explain(ac.numpy_op(np.sin, backward=lambda g, x, output: g * np.cos(x)))
    assert op.made_by == "numpy_op() around accepts_numpy() + returns_tensor(), fused into one wrapper"
    assert op.notes[0] == "numpy_op(): a torch op; backward=given, fake=None, vmap='sequential', jvp=none."
    assert op.policies["accepts_numpy"].grad == "detach"  # the gradient flows through the op's backward
    assert (
        op.compiled == "each call is one graph break, the op run eagerly: pass fake= to make it one node of the graph"
    )
    node = ac.explain(ac.numpy_op(np.sin, backward=lambda g, x, output: g * np.cos(x), fake="x"))
    assert node.compiled == "each call is one node of the graph, its registered op (fake= gives its result's shape)"

    each = ac.explain(ac.batched(np.max, workers=2, threads_per_worker=1))
    assert each.notes == (
        "batched(): each batch converted once by the call below, the function run once per sample along dim 0 on "
        "NumPy views of it, the results gathered with np.stack (field by field for tuples and dicts) and "
        "converted once.",
        "Samples run on 2 threads, in chunks.",
        "A batch whose samples take under 10 ms in all (timed on its first samples) runs in the caller's thread "
        "instead: the executor would cost more than it gives.",
        "While a map runs, BLAS, OpenMP and torch use at most 1 thread per worker.",
    )
    assert str(each).startswith("max(): batched() over accepts_numpy() + returns_tensor()")
    seeded = ac.explain(ac.batched(np.max, seed=0))
    assert seeded.notes[1:] == (
        "Samples run one after another in the caller's thread.",
        "seed=: each sample its own stream (np.random, random and torch's CPU generator seeded per sample).",
    )


def test_anything_else_is_refused_with_the_fix() -> None:
    with pytest.raises(TypeError) as e:
        ac.explain(smooth)
    assert str(e.value) == (
        "autoconvert.explain() explains what autoconvert made (a decorated, torchified or adapted function, a "
        "numpy_op, a batched function); got smooth() (function). Fix: pass the decorated function itself"
    )


def test_a_decorated_partial_is_explained_by_the_function_it_calls() -> None:
    """The decorators and torchify make a partial of their function with its bound arguments
    (converted as arguments at each call): explain describes that function."""

    def scaled(x: Any, factor: Any) -> Any:
        return np.asarray(x) * factor

    decorated = ac.accepts_numpy(functools.partial(scaled, factor=2.0))
    assert isinstance(decorated, functools.partial) and decorated.keywords == {"factor": 2.0}
    assert ac.explain(decorated) == ac.explain(decorated.func)
    assert str(ac.explain(decorated)).startswith(
        "test_a_decorated_partial_is_explained_by_the_function_it_calls.<locals>.scaled(): accepts_numpy()"
    )
