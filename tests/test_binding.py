"""Every binding site: decorated callables look and bind like their undecorated twins."""

from __future__ import annotations

import contextlib
import copy
import functools
import gc
import inspect
import multiprocessing
import pickle
import pydoc
import sys
import types
import typing
from typing import Any

import numpy as np
import pytest
import scipy.special
import torch

import autoconvert as ac

from . import sites

nested_twin, nested_decorated = sites.make_nested()

# (decorated object as accessed, undecorated twin as accessed)
PAIRS = {
    "function": (sites.decorated, sites.plain),
    "nested function": (nested_decorated, nested_twin),
    "method via instance": (sites.Sites().method, sites.Twin().method),
    "method via class": (sites.Sites.method, sites.Twin.method),
    "classmethod inside": (sites.Sites.cmethod_inside, sites.Twin.cmethod_inside),
    "classmethod outside": (sites.Sites.cmethod_outside, sites.Twin.cmethod_outside),
    "staticmethod inside": (sites.Sites.smethod_inside, sites.Twin.smethod_inside),
    "staticmethod outside": (sites.Sites.smethod_outside, sites.Twin.smethod_outside),
    "classmethod via instance": (sites.Sites().cmethod_outside, sites.Twin().cmethod_outside),
    "staticmethod via instance": (sites.Sites().smethod_inside, sites.Twin().smethod_inside),
}


@pytest.mark.parametrize("site", list(PAIRS))
def test_looks_like_its_undecorated_twin(site: str) -> None:
    """name, qualname (up to the class's and function's own names), doc, module and signature match."""
    decorated, twin = PAIRS[site]
    assert decorated.__name__ == twin.__name__
    assert decorated.__qualname__.replace("Sites.", "Twin.") == twin.__qualname__
    assert decorated.__doc__ == twin.__doc__
    assert decorated.__module__ == twin.__module__
    assert inspect.signature(decorated) == inspect.signature(twin)


@pytest.mark.parametrize("site", [s for s in PAIRS if s not in ("function", "method via class")])
def test_binds_like_its_twin_and_converts_only_x(site: str) -> None:
    """self/cls arrive as the instance, never as an argument: only= still means x."""
    decorated, _ = PAIRS[site]
    t = torch.ones(1)
    assert decorated(t, t) == ("ndarray", "Tensor")
    assert decorated(t, y=t) == ("ndarray", "Tensor")


def test_method_called_through_the_class_with_an_explicit_instance() -> None:
    assert sites.Sites.method(sites.Sites(), torch.ones(1), torch.ones(1)) == ("ndarray", "Tensor")


def test_function_converts_all_arguments() -> None:
    assert sites.decorated(torch.ones(1), torch.ones(1)) == ("ndarray", "ndarray")


def test_wrapping_is_transparent_to_isinstance_and_introspection() -> None:
    """A routine named and signed as its function, of its function's class, save that a wrapper
    of a plain function is none (FunctionType) but to torch.compile: cloudpickle would send it as
    the undecorated function (see test_cloudpickle)."""
    assert callable(sites.scaled) and inspect.isroutine(sites.scaled) and not inspect.isfunction(sites.scaled)
    assert sites.scaled.__wrapped__.__name__ == "scaled" and sites.scaled.__name__ == "scaled"
    assert isinstance(sites.negated, np.ufunc)


@pytest.mark.parametrize("product", [ac.accepts_numpy, ac.adapt, ac.torchify], ids=lambda p: p.__name__)
def test_a_plain_functions_product_introspects_as_the_function(product: Any) -> None:
    """A routine, named, documented, signed and shown by help() as its function (torchify's proxy
    was no routine, had no docstring, and help() showed its class)."""
    made, twin = product(sites.plain), sites.plain
    assert inspect.isroutine(made) and not inspect.isfunction(made)
    assert (made.__name__, made.__qualname__, made.__module__, made.__doc__) == (
        twin.__name__,
        twin.__qualname__,
        twin.__module__,
        twin.__doc__,
    )
    assert inspect.signature(made) == inspect.signature(twin) and inspect.getdoc(made) == inspect.getdoc(twin)
    assert functools.wraps(made)(lambda: None).__doc__ == twin.__doc__
    shown = pydoc.render_doc(made, renderer=pydoc.plaintext).splitlines()
    assert shown[2:4] == pydoc.render_doc(twin, renderer=pydoc.plaintext).splitlines()[2:4]


def test_a_torchified_function_binds_as_the_function() -> None:
    """Held by a class (``@ac.torchify`` on a method), it binds to the instance as the function
    does; before, the instance was dropped."""

    class Model:
        scale = 2.0

        @ac.torchify
        def scaled(self, x: np.ndarray) -> np.ndarray:
            return x * self.scale

    bound = Model().scaled
    assert inspect.ismethod(bound) and bound.__name__ == "scaled"
    assert torch.equal(bound(torch.ones(2)), torch.full((2,), 2.0))
    assert Model.scaled(Model(), torch.ones(1)).dtype == torch.float32


def test_annotations_and_type_hints_are_the_wrapped_functions() -> None:
    """No annotation of the wrapper class shows through (pydantic, FastAPI and hydra read them)."""
    assert sites.scaled.__annotations__ == sites.scaled.__wrapped__.__annotations__
    assert typing.get_type_hints(sites.scaled) == typing.get_type_hints(sites.scaled.__wrapped__)
    assert sites.registered_square.__annotations__ == sites.registered_square.__wrapped__.__annotations__


class _Shift(torch.nn.Module):
    """A module holding decorated callables as attributes, as models and datasets do."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(2, 2)
        self.function, self.ufunc = sites.scaled, ac.returns_tensor(ac.accepts_numpy(np.negative))
        self.adapted, self.op = ac.adapt(sites.scaled.__wrapped__), ac.numpy_op(np.sin, backward=sites.cos_backward)
        self.offset = 1.0

    @ac.returns_tensor
    @ac.accepts_numpy
    def shift(self, x: np.ndarray) -> np.ndarray:
        return x + self.offset


class _Counter:
    """A callable object with state: a copy of it is another counter."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, x: np.ndarray) -> np.ndarray:
        self.calls += 1
        return x


class TestCopying:
    """copy and deepcopy treat decorated functions as they treat functions: as themselves."""

    @pytest.mark.parametrize("site", list(PAIRS))
    def test_copies_of_decorated_callables_call_as_they_do(self, site: str) -> None:
        decorated, _ = PAIRS[site]
        t = torch.ones(1)
        args = (sites.Sites(), t, t) if site == "method via class" else (t, t)
        for copy_of in (copy.copy, copy.deepcopy):
            assert copy_of(decorated)(*args) == decorated(*args)
            if site.endswith("function"):  # as copy gives a function: itself
                assert copy_of(decorated) is decorated

    def test_a_deepcopied_module_keeps_its_decorated_attributes_and_binds_its_methods_to_the_copy(self) -> None:
        """An EMA of a model, a dataset split: deepcopy must not stop at a decorated attribute."""
        module = _Shift()
        twin = copy.deepcopy(module)
        twin.offset = 10.0
        assert twin.function is module.function and twin.ufunc is module.ufunc and twin.op is module.op
        assert twin.adapted is module.adapted
        assert torch.equal(twin.shift(torch.zeros(1)), torch.full((1,), 10.0))
        assert torch.equal(module.shift(torch.zeros(1)), torch.ones(1))
        bound = copy.deepcopy(module.shift)
        assert bound.__self__ is not module and torch.equal(bound(torch.zeros(1)), torch.ones(1))

    def test_a_wrapped_callable_object_is_copied_and_wrapped_again(self) -> None:
        counting = ac.returns_tensor(ac.accepts_numpy(_Counter()))
        deep, shallow = copy.deepcopy(counting), copy.copy(counting)
        assert deep.__wrapped__ is not counting.__wrapped__ and shallow.__wrapped__ is not counting.__wrapped__
        deep(torch.ones(1))
        assert (deep.__wrapped__.calls, counting.__wrapped__.calls) == (1, 0)
        assert torch.equal(shallow(torch.ones(2)), torch.ones(2))
        assert deep._self_plan.sides == counting._self_plan.sides
        first, second = copy.deepcopy([counting, counting])  # one object, one copy
        assert first is second

    def test_a_torchified_functions_copies_keep_their_plan(self) -> None:
        """scipy.ndimage's functions are guarded objects that copy into new ones: the copy is
        wrapped again with torchify's plan (its package kept), where copying raised TypeError."""
        import scipy.ndimage

        # median_filter has no gradient rule: the converting pair, not a numpy_op
        median = ac.torchify(scipy.ndimage, array_module="numpy").median_filter
        for copy_of in (copy.copy, copy.deepcopy):
            twin = copy_of(median)
            assert twin is not median and type(twin._self_plan) is type(median._self_plan)
            assert torch.equal(twin(torch.arange(5.0), 3), median(torch.arange(5.0), 3))


class TestPickling:
    """Module-level decorated functions and bound methods pickle by reference."""

    def test_module_function_pickles_by_reference(self) -> None:
        data = pickle.dumps(sites.scaled)
        assert b"autoconvert" not in data  # a reference to tests.sites.scaled, not a rebuilt wrapper
        assert pickle.loads(data) is sites.scaled

    def test_bound_method_pickles_with_its_instance(self) -> None:
        restored = pickle.loads(pickle.dumps(sites.Sites().scale))
        assert torch.equal(restored(torch.ones(2)), torch.full((2,), 3.0))

    @pytest.mark.parametrize("site", [s for s in PAIRS if "function" not in s])
    def test_methods_pickle_bound_as_they_were_read(self, site: str) -> None:
        """Through an instance or through the class, a classmethod or staticmethod too (wrapt
        1.x keeps no owner for a read through the class: it is found by the qualname)."""
        decorated, _ = PAIRS[site]
        t = torch.ones(1)
        args = (sites.Sites(), t, t) if site == "method via class" else (t, t)
        assert pickle.loads(pickle.dumps(decorated))(*args) == decorated(*args)

    def test_wrapped_ufunc_is_rebuilt_from_its_options(self) -> None:
        neg = ac.returns_tensor(ac.accepts_numpy(copy=True)(np.negative))
        restored = pickle.loads(pickle.dumps(neg))
        assert torch.equal(restored(torch.ones(2)), -torch.ones(2))
        assert restored._self_plan.sides == neg._self_plan.sides

    def test_a_rewrapped_module_function_pickles_by_its_own_name(self) -> None:
        """returns_tensor(f) kept under another name: a reference to that name, not f's."""
        data = pickle.dumps(sites.halved_tensor)
        assert b"halved_tensor" in data and b"autoconvert" not in data
        assert pickle.loads(data) is sites.halved_tensor

    def test_a_rewrapped_module_function_no_module_holds_is_rebuilt(self) -> None:
        """returns_tensor(f) made on the fly: rebuilt around the function under sites.halved."""
        rewrapped = ac.returns_tensor(device="cpu")(sites.halved)
        restored = pickle.loads(pickle.dumps(rewrapped))
        assert restored is not rewrapped and restored._self_plan.sides == rewrapped._self_plan.sides
        assert restored.__wrapped__ is sites.halved.__wrapped__
        assert torch.equal(restored(torch.full((2,), 4.0)), torch.full((2,), 2.0))

    def test_a_numpy_op_of_a_ufunc_pickles_by_the_name_that_holds_it(self) -> None:
        """sine = numpy_op(np.sin, ...): numpy.sin is the ufunc, so the reference is sites.sine."""
        data = pickle.dumps(sites.sine)
        assert b"sine" in data
        assert pickle.loads(data) is sites.sine

    def test_a_numpy_op_no_module_holds_is_rebuilt_from_its_recipe(self) -> None:
        """Made in a function: rebuilt from the ufunc, the backward and the options, op and all."""
        sine = ac.numpy_op(np.sin, backward=sites.cos_backward, fake="x", dtype=torch.float64)
        restored = pickle.loads(pickle.dumps(sine))
        assert restored is not sine and restored.op is not sine.op
        value, grad = sites.call_with_gradient(restored, torch.tensor([0.0, 1.0]))
        assert value.dtype == torch.float64 and torch.allclose(grad, torch.cos(torch.tensor([0.0, 1.0])))

    def test_a_numpy_op_with_a_lambda_backward_fails_to_pickle_as_pickle_says(self) -> None:
        """No module holds it and its recipe holds a lambda: pickle's own error names the lambda."""
        op = ac.numpy_op(np.sin, backward=lambda g, x, output: g * np.cos(x))
        with pytest.raises((pickle.PicklingError, AttributeError), match="lambda"):
            pickle.dumps(op)

    def test_a_function_its_package_exports_pickles_by_the_package_s_name(self, monkeypatch: Any) -> None:
        """SciPy's array API mode wraps ``scipy.ndimage``'s functions: a wrapper keeps the private
        module's name (``scipy.ndimage._morphology``), whose attribute is the function wrapped,
        and only the package exports the wrapper, so pickle's lookup finds another object. What
        autoconvert makes of it pickles by where the package holds it, and unpickles around it."""
        package, private = types.ModuleType("exporting"), types.ModuleType("exporting._impl")

        def negated(a: np.ndarray) -> np.ndarray:
            return -a

        negated.__module__, negated.__qualname__ = private.__name__, "negated"

        @functools.wraps(negated)
        def dispatching(*args: Any, **kwargs: Any) -> Any:
            return negated(*args, **kwargs)

        private.negated, package.negated, package._impl = negated, dispatching, private  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, package.__name__, package)
        monkeypatch.setitem(sys.modules, private.__name__, private)
        with pytest.raises(pickle.PicklingError, match="not the same object"):
            pickle.dumps(dispatching)
        for made in (ac.accepts_numpy(dispatching), ac.batched(dispatching), ac.numpy_op(dispatching)):
            restored = pickle.loads(pickle.dumps(made))
            assert restored is not made and restored.__wrapped__ is dispatching
            assert torch.equal(torch.as_tensor(restored(torch.ones(2))), -torch.ones(2))

    @pytest.mark.slow
    def test_spawned_workers_receive_numpy_ops_and_rewrapped_functions(self) -> None:
        """Sent as arguments, not imported by name: the child rebuilds or finds each."""
        context = multiprocessing.get_context("spawn")
        local = ac.numpy_op(np.sin, backward=sites.cos_backward, fake="x")
        with context.Pool(1) as pool:
            results = pool.starmap(sites.call_with_gradient, [(sites.sine, torch.zeros(2)), (local, torch.zeros(2))])
            halves = pool.map(sites.halved_tensor, [torch.full((2,), 4.0)])
        assert all(torch.equal(grad, torch.ones(2)) for _, grad in results)
        assert torch.equal(halves[0], torch.full((2,), 2.0))

    @pytest.mark.slow
    def test_multiprocessing_spawn_workers_call_decorated_functions(self) -> None:
        context = multiprocessing.get_context("spawn")
        with context.Pool(2) as pool:
            totals = pool.map(sites.worker_total, [torch.ones(3), torch.arange(4.0)])
        assert totals == [6.0, 12.0]

    @pytest.mark.slow
    def test_spawned_workers_receive_batched_functions_and_wrapped_ufuncs(self) -> None:
        """A module-level batched function pickles by its name (its qualname is batched(...),
        which no module holds); one made in a function by its recipe; wrapped ufuncs, which
        have no __module__, by the ufunc; all run in a spawned pool."""
        context = multiprocessing.get_context("spawn")
        local = ac.batched(sites.row_total, workers=2)
        special = ac.torchify(scipy.special).expit
        assert pickle.loads(pickle.dumps(sites.row_totals)) is sites.row_totals
        with context.Pool(1) as pool:
            totals = pool.map(sites.row_totals, [torch.ones(3, 2)])
            again = pool.map(local, [torch.ones(2, 2)])
            negated = pool.map(sites.negated, [torch.ones(2)])
            halves = pool.map(special, [torch.zeros(2)])
        assert totals[0].tolist() == [2.0, 2.0, 2.0] and again[0].tolist() == [2.0, 2.0]
        assert negated[0].tolist() == [-1.0, -1.0] and halves[0].tolist() == [0.5, 0.5]

    @pytest.mark.slow
    def test_spawned_workers_use_a_registered_numpy_op(self) -> None:
        """Pickled by reference, registered again by the import in the child."""
        context = multiprocessing.get_context("spawn")
        with context.Pool(1) as pool:
            [(value, grad)] = pool.map(sites.worker_square_and_gradient, [torch.arange(3.0)])
        assert value.tolist() == [0.0, 1.0, 4.0] and grad.tolist() == [0.0, 2.0, 4.0]

    @pytest.mark.slow
    def test_dataloader_workers_run_decorated_transforms(self) -> None:
        """A DataLoader with spawned workers pickles a dataset whose transform is decorated."""
        dataset = _Dataset()
        loader = torch.utils.data.DataLoader(dataset, batch_size=2, num_workers=2, multiprocessing_context="spawn")
        batches = list(loader)
        assert torch.equal(torch.cat(batches), torch.arange(4.0) * 2)


class _Dataset(torch.utils.data.Dataset[Any]):
    transform = staticmethod(sites.scaled)

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.transform(torch.tensor(float(i)))


@pytest.mark.parametrize(
    ("source", "kind"),
    [
        ("async def f(a):\n    return a", "a coroutine function (async def)"),
        ("def f(a):\n    yield a", "a generator function"),
        ("async def f(a):\n    yield a", "an async generator function"),
    ],
)
def test_generators_and_coroutines_are_refused_when_decorating(source: str, kind: str) -> None:
    """Their body runs after the call returns: a write-back would run first and returns_tensor
    would see a coroutine (the sweep found an ndarray returned from an async def)."""
    namespace: dict[str, Any] = {}
    exec(source, namespace)
    with pytest.raises(TypeError) as info:
        ac.returns_tensor(ac.accepts_numpy(writeback=True)(namespace["f"]))
    if kind == "a generator function":  # refused for the write-back alone: its values convert as it yields
        assert str(info.value) == (
            "autoconvert.accepts_numpy() on f(): it is a generator function, whose body runs as it is iterated, "
            "after the call returns, so writeback=True and check_writes=True would run before its writes (what "
            "it yields is converted as it comes). Fix: drop writeback= and check_writes=, or decorate the plain "
            "function holding the NumPy code and call that from it"
        )
        assert list(ac.returns_tensor(ac.accepts_numpy(namespace["f"]))(torch.ones(1))) == [torch.ones(1)]
    else:
        assert str(info.value) == (
            f"autoconvert.accepts_numpy() on f(): it is {kind}, whose body runs after the call returns, so "
            "arguments and results cannot be converted around it; decorate the plain function holding the "
            "NumPy code and call that from it"
        )
    module = types.ModuleType("legacy")
    module.f = namespace["f"]  # type: ignore[attr-defined]
    if kind == "a generator function":  # what it yields is converted as it comes (test_call_sites)
        assert ac.torchify(module).f.__wrapped__ is namespace["f"]
    else:
        assert ac.torchify(module).f is namespace["f"]  # a torchified module passes it through


def _holding(kind: str) -> Any:
    """A plain function (no decorator can tell at decoration time) whose result is ``kind``,
    a body that runs after the call returns and writes into the array it was handed."""

    def generator(a: np.ndarray) -> Any:
        def body() -> Any:
            a[...] *= 2
            yield a

        return body()

    def coroutine(a: np.ndarray) -> Any:
        async def body() -> Any:
            return torch.from_numpy(a)  # awaited later, it would alias the caller's tensor

        return body()

    def async_generator(a: np.ndarray) -> Any:
        async def body() -> Any:
            yield a

        return body()

    @contextlib.contextmanager
    def context(a: np.ndarray) -> Any:
        a[...] *= 2
        yield a

    @contextlib.asynccontextmanager
    async def async_context(a: np.ndarray) -> Any:
        yield a

    return locals()[kind]


DEFERRED = {
    "generator": ("a generator", "builtins.generator"),
    "coroutine": ("a coroutine", "builtins.coroutine"),
    "async_generator": ("an async generator", "builtins.async_generator"),
    "context": ("a context manager made by @contextlib.contextmanager", "contextlib._GeneratorContextManager"),
    "async_context": (
        "an async context manager made by @contextlib.asynccontextmanager",
        "contextlib._AsyncGeneratorContextManager",
    ),
}


@pytest.mark.parametrize("kind", DEFERRED)
@pytest.mark.parametrize(
    "decorate",
    [
        lambda f: ac.accepts_numpy(writeback=True)(f),
        lambda f: ac.accepts_numpy(check_writes=True)(f),
        lambda f: ac.returns_tensor(ac.accepts_numpy(f)),
        lambda f: ac.adapt(writeback=True)(f),
        lambda f: ac.returns_numpy(f),
    ],
    ids=["writeback", "check_writes", "pair", "adapt writeback", "returns_numpy"],
)
def test_results_whose_body_runs_after_the_call_are_refused_at_call_time(
    kind: str, decorate: Any, request: pytest.FixtureRequest
) -> None:
    """A generator, coroutine or contextmanager made by a plain function: writeback and
    check_writes would run before its writes, and its values would escape conversion. The
    call raises, naming the function and the fix, and drops the body unrun (no warning of
    a coroutine never awaited leaks: warnings are errors here). Only an output side's
    generator result is converted instead, as it yields (the next test)."""
    if request.node.callspec.id in ("pair-generator", "returns_numpy-generator"):
        pytest.skip("converted as it yields: test_a_returned_generator_converts_as_it_yields")
    words, found = DEFERRED[kind]
    wrapped = decorate(_holding(kind))
    t = torch.ones(2)
    with pytest.raises(ac.ConversionError) as info:
        wrapped(t)
    assert str(info.value) == (
        f"_holding.<locals>.{kind}(): result is {words}, whose body runs after the call returns, so autoconvert "
        "cannot convert around it (the arrays handed to it would stay in use, writeback and check_writes would "
        "run before it, and what it yields or returns would not be converted). "
        f"Found {found}. Fix: decorate the plain function that holds the NumPy code, and call that from inside "
        "the generator, coroutine or context manager."
    )
    assert t.tolist() == [1.0, 1.0]
    gc.collect()  # an unclosed coroutine would warn now


@pytest.mark.parametrize("returns", [ac.returns_tensor, ac.returns_numpy])
def test_a_returned_generator_converts_as_it_yields(returns: Any) -> None:
    """Its body runs when iterated, with the read-only arrays it was handed: a write is
    still refused, and the caller's tensor is unchanged."""
    wrapped = returns(ac.accepts_numpy(_holding("generator")))
    t = torch.ones(2)
    body = wrapped(t)
    assert isinstance(body, types.GeneratorType)
    with pytest.raises(ValueError, match="read-only"):
        next(body)
    assert t.tolist() == [1.0, 1.0]
    copied = returns(ac.accepts_numpy(copy=True)(_holding("generator")))(t)
    (doubled,) = list(copied)
    assert type(doubled) is (torch.Tensor if returns is ac.returns_tensor else np.ndarray)
    assert doubled.tolist() == [2.0, 2.0] and t.tolist() == [1.0, 1.0]


def test_a_deferred_result_inside_a_container_is_named_by_its_path() -> None:
    """The output side walks results: the generator is found where it sits."""
    pair = ac.returns_tensor(ac.accepts_numpy(lambda a: (a.sum(), (x for x in a))))
    with pytest.raises(ac.ConversionError, match=r"<lambda>\(\): result\[1\] is a generator, whose body"):
        pair(torch.ones(2))


def test_accepts_numpy_alone_hands_a_deferred_result_through() -> None:
    """With nothing to do after the call and no result to convert, a generator comes back as
    it is; the arrays it holds stay read-only, so a write in its body is still refused."""
    wrapped = ac.accepts_numpy(_holding("generator"))
    t = torch.ones(2)
    body = wrapped(t)
    with pytest.raises(ValueError, match="read-only"):
        next(body)
    assert t.tolist() == [1.0, 1.0]
