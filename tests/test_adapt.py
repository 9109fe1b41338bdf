"""adapt: annotations say what each parameter needs; callers get back their own kind."""

from __future__ import annotations

import dataclasses
import functools
import pickle
import warnings
from collections.abc import Sequence
from typing import Any, NamedTuple, Optional

import hypothesis
import numpy as np
import numpy.typing as npt
import pytest
import torch
from hypothesis import strategies as st

import autoconvert as ac

from .conftest import shares


@ac.adapt
def centred(img: np.ndarray) -> np.ndarray:
    """Module level: pickles by reference."""
    assert type(img) is np.ndarray
    return img - img.mean()


@ac.adapt
def row_means(x: torch.Tensor) -> torch.Tensor:
    """torch code: arrays in, arrays out; tensors in, tensors out."""
    assert type(x) is torch.Tensor
    return x.mean(dim=-1)


class Summary(NamedTuple):
    mean: np.ndarray
    count: int


class TestCallerKind:
    """The result's kind follows the caller's: tensors for tensors, arrays for arrays."""

    def test_tensors_in_tensors_out_in_the_callers_dtype(self) -> None:
        for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
            out = centred(torch.tensor([1.0, 3.0], dtype=dtype))
            assert type(out) is torch.Tensor and out.dtype == dtype and out.tolist() == [-1.0, 1.0]

    def test_arrays_lists_and_scalars_in_arrays_out(self) -> None:
        for given in (np.array([1.0, 3.0]), [1.0, 3.0], (1.0, 3.0)):
            out = centred(given)
            assert type(out) is np.ndarray and out.tolist() == [-1.0, 1.0]
        assert centred(2.0).tolist() == 0.0

    def test_a_torch_function_takes_arrays_and_gives_arrays(self) -> None:
        out = row_means(np.ones((2, 3), dtype=np.float32))
        assert type(out) is np.ndarray and out.dtype == np.float32 and out.tolist() == [1.0, 1.0]
        got = row_means(torch.ones(2, 3))
        assert type(got) is torch.Tensor and got.tolist() == [1.0, 1.0]

    def test_a_mixed_call_gives_tensors(self) -> None:
        """Tensors win: the results go where the caller's tensors live."""

        @ac.adapt
        def add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            assert type(a) is np.ndarray and type(b) is np.ndarray
            return a + b

        out = add(torch.ones(2), np.ones(2))
        assert type(out) is torch.Tensor and out.tolist() == [2.0, 2.0]

    def test_a_call_with_neither_returns_what_the_function_returns(self) -> None:
        @ac.adapt
        def count(x: np.ndarray, n: int) -> int:
            return int(x.size) * n

        assert count([1, 2], 3) == 6

    def test_unannotated_parameters_are_untouched(self) -> None:
        seen: list[type] = []

        @ac.adapt
        def f(a: np.ndarray, b):  # type: ignore[no-untyped-def]
            seen.append(type(b))
            return a

        f(torch.ones(1), torch.ones(1))
        assert seen == [torch.Tensor]


class TestAnnotations:
    """What each annotation asks for, element-wise in containers."""

    def test_ndarray_with_a_dtype_casts_floats_only(self) -> None:
        got: list[np.dtype[Any]] = []

        @ac.adapt
        def f(x: npt.NDArray[np.float32]) -> np.ndarray:
            got.append(x.dtype)
            return x * 2

        out = f(torch.ones(2, dtype=torch.float64))
        assert got == [np.float32] and out.dtype == torch.float64  # back in the caller's dtype
        f(np.arange(3))  # integers are never cast to floats
        assert got[-1] == np.arange(3).dtype

    def test_optional_lists_tuples_sequences_and_dicts(self) -> None:
        kinds: list[Any] = []

        @ac.adapt
        def f(
            a: Optional[np.ndarray],  # noqa: UP045 - the typing spelling is the case under test
            b: list[np.ndarray],
            c: tuple[np.ndarray, ...],
            d: dict[str, np.ndarray],
            e: Sequence[np.ndarray] | None = None,
        ) -> None:
            kinds.append((type(a), [type(x) for x in b], [type(x) for x in c], {k: type(v) for k, v in d.items()}))
            kinds.append(None if e is None else [type(x) for x in e])

        t = torch.ones(1)
        f(t, [t, t], (t,), {"k": t}, [t])
        assert kinds[0] == (np.ndarray, [np.ndarray] * 2, [np.ndarray], {"k": np.ndarray})
        assert kinds[1] == [np.ndarray]
        f(None, [], (), {})
        assert kinds[2][0] is type(None) and kinds[3] is None

    @pytest.mark.parametrize("given", ["arrays", "tensors", "mixed"])
    def test_containers_of_tensors_give_torch_code_tensors(self, given: str) -> None:
        """``list[torch.Tensor]`` and its kin hand torch code tensors, each element converted,
        whatever the caller passed (arrays were handed over as arrays); the result comes back
        in the caller's kind, values exact."""
        seen: list[Any] = []

        @ac.adapt
        def f(
            b: list[torch.Tensor],
            c: tuple[torch.Tensor, ...],
            d: dict[str, torch.Tensor],
            e: Sequence[torch.Tensor] | None,
            g: tuple[torch.Tensor, int],
        ) -> list[torch.Tensor]:
            seen.extend([*b, *c, *d.values(), *(e or ()), g[0]])
            return [x * 2 for x in b]

        values = [np.arange(3.0) + i for i in range(6)]
        items: list[Any] = [torch.from_numpy(v) if given == "tensors" else v for v in values]
        if given == "mixed":
            items[5] = torch.from_numpy(values[5])
        out = f(items[:2], (items[2],), {"k": items[3]}, [items[4]], (items[5], 7))
        assert [type(x) for x in seen] == [torch.Tensor] * 6
        assert [x.tolist() for x in seen] == [v.tolist() for v in values]
        assert [type(x) for x in out] == [np.ndarray if given == "arrays" else torch.Tensor] * 2
        assert [x.tolist() for x in out] == [(v * 2).tolist() for v in values[:2]]

    def test_varargs_and_keyword_arguments(self) -> None:
        @ac.adapt
        def total(*arrays: np.ndarray, **weights: np.ndarray) -> np.ndarray:
            assert all(type(a) is np.ndarray for a in (*arrays, *weights.values()))
            return sum(arrays) + sum(weights.values())  # type: ignore[return-value]

        assert total(torch.ones(1), torch.ones(1), w=torch.ones(1)).tolist() == [3.0]

    def test_the_return_annotation_says_which_results_convert(self) -> None:
        @ac.adapt
        def summary(x: np.ndarray) -> tuple[np.ndarray, float]:
            return x * 2, np.float64(x.sum())

        doubled, total = summary(torch.ones(2))
        assert type(doubled) is torch.Tensor and type(total) is np.float64

        @ac.adapt
        def named(x: np.ndarray) -> Summary:
            return Summary(x.mean(keepdims=True), x.size)

        got = named(torch.ones(3))
        assert type(got) is Summary and type(got.mean) is torch.Tensor and got.count == 3

        @ac.adapt
        def listed(x: np.ndarray) -> list[np.ndarray]:
            return [x, x + 1]

        assert [type(v) for v in listed(torch.ones(1))] == [torch.Tensor, torch.Tensor]

    def test_string_annotations_resolve_once(self) -> None:
        """This module uses ``from __future__ import annotations``: every annotation is a string."""
        assert centred.__wrapped__.__annotations__["img"] == "np.ndarray"
        assert type(centred(torch.ones(2))) is torch.Tensor

    def test_an_annotation_that_cannot_be_resolved_is_named(self) -> None:
        def f(x: NotImported) -> None:  # type: ignore[name-defined]  # noqa: F821
            pass

        with pytest.raises(TypeError) as info:
            ac.adapt(f)
        assert str(info.value) == (
            "autoconvert.adapt() on TestAnnotations.test_an_annotation_that_cannot_be_resolved_is_named.<locals>.f(): "
            "parameter 'x' is annotated 'NotImported', which cannot be resolved (NameError: name 'NotImported' is "
            "not defined); import what it names at module level, where annotations are resolved, or annotate "
            "with the object itself"
        )

    def test_a_parameter_asking_for_both_kinds_is_refused(self) -> None:
        def f(pair: tuple[np.ndarray, torch.Tensor]) -> None:
            pass

        with pytest.raises(TypeError, match="asks for arrays and tensors at once; split it into two parameters"):
            ac.adapt(f)


class TestGuarantees:
    """The same copy, read-only, writeback, grad and error rules as accepts_numpy."""

    def test_arrays_share_memory_and_are_read_only(self) -> None:
        handed: list[np.ndarray] = []

        @ac.adapt
        def keep(a: np.ndarray) -> None:
            handed.append(a)

        t = torch.ones(3)
        keep(t)
        assert shares(handed[0], t) and not handed[0].flags.writeable

    def test_lists_for_an_array_parameter_convert_their_tensors_as_arguments(self) -> None:
        """A list of tensors for an array parameter: each tensor converts with the argument
        rules (refusals name the item), then NumPy stacks them; what NumPy cannot stack
        (ragged, self-containing, deeper than NumPy's dimensions) is a ConversionError."""

        @ac.adapt
        def total(a: np.ndarray) -> Any:
            return a.sum(axis=0)

        assert total([torch.ones(2), torch.ones(2)]).tolist() == [2.0, 2.0]  # tensors in: a tensor out
        with warnings.catch_warnings():  # torch 2.13+ deprecates quantized tensors: its warning, not ours
            warnings.simplefilter("ignore", UserWarning)
            quantized = torch.quantize_per_tensor(torch.ones(2), 0.1, 0, torch.quint8)
        with pytest.raises(ac.ConversionError, match=r"total\(\): argument a\[1\] is a quantized tensor"):
            total([torch.ones(2), quantized])
        loop: list[Any] = [torch.ones(1)]
        loop.append(loop)
        with pytest.raises(ac.ConversionError, match=r"argument a contains itself"):
            total(loop)
        with pytest.raises(ac.ConversionError) as info:
            total([torch.ones(1), torch.ones(2)])
        assert str(info.value) == (
            "TestGuarantees.test_lists_for_an_array_parameter_convert_their_tensors_as_arguments.<locals>.total(): "
            "argument a cannot become the one array its annotation asks for (NumPy: setting an array element with "
            "a sequence. The requested array has an inhomogeneous shape after 1 dimensions. The detected shape was "
            "(2,) + inhomogeneous part). Found a list of 2 items. Fix: pass nested lists of equal lengths, or "
            "annotate the parameter as a list of arrays (list[np.ndarray]) to get each item converted on its own."
        )
        deep: list[Any] = [1.0]
        for _ in range(80):
            deep = [deep]
        with pytest.raises(ac.ConversionError, match=r"argument a cannot become the one array"):
            total(deep)

    def test_a_write_into_a_handed_array_is_refused(self) -> None:
        @ac.adapt
        def scale(a: np.ndarray) -> None:
            a *= 2

        with pytest.raises(ac.ReadOnlyError, match="pass copy=True"):
            scale(torch.ones(2))

    def test_copy_and_writeback(self) -> None:
        @ac.adapt(copy=True)
        def private(a: np.ndarray) -> np.ndarray:
            a *= 2
            return a

        t = torch.ones(2)
        assert private(t).tolist() == [2.0, 2.0] and t.tolist() == [1.0, 1.0]

        @ac.adapt(writeback=True)
        def clip_(a: np.ndarray) -> None:
            np.clip(a, 0, 1, out=a)

        narrow = torch.tensor([-1.0, 2.0], dtype=torch.bfloat16)
        clip_(narrow)
        assert narrow.tolist() == [0.0, 1.0]

    def test_gradients_are_never_dropped_silently(self) -> None:
        w = torch.ones(2, requires_grad=True)
        with pytest.warns(ac.GradientWarning, match="no gradient flows through this call"):
            centred(w)
        with pytest.raises(ac.GradientError, match="argument img requires grad"):
            ac.adapt(grad="error")(_first)(w)

    def test_errors_name_the_function_and_the_path(self) -> None:
        @ac.adapt
        def f(batch: dict[str, list[np.ndarray]]) -> None:
            pass

        with pytest.raises(ac.ConversionError) as info:
            f({"masks": [torch.ones(1), torch.ones(1), torch.ones(1, device="meta")]})
        assert str(info.value).startswith(
            "TestGuarantees.test_errors_name_the_function_and_the_path.<locals>.f(): "
            "argument batch['masks'][2] is a meta tensor, which holds no data"
        )

    def test_config_blocks_apply(self) -> None:
        handed: list[np.ndarray] = []

        @ac.adapt
        def keep(a: np.ndarray) -> None:
            handed.append(a)

        t = torch.ones(2)
        with ac.config(copy=True):
            keep(t)
        assert not shares(handed[0], t) and handed[0].flags.writeable

    def test_arrays_for_tensor_parameters_go_to_the_device_asked(self) -> None:
        @ac.adapt(device="meta")
        def where(x: torch.Tensor) -> str:
            return str(x.device)

        assert where(np.ones(1)) == "meta"


def _first(img: np.ndarray) -> np.ndarray:
    return img


class Transform:
    """A MONAI-style transform: NumPy inside, called with tensors or arrays."""

    def __init__(self, k: float) -> None:
        self.k = k

    def __call__(self, img: np.ndarray) -> np.ndarray:
        assert type(img) is np.ndarray
        return img * self.k

    def inverse(self, img: np.ndarray) -> np.ndarray:
        assert type(img) is np.ndarray
        return img / self.k

    @staticmethod
    def shifted(img: np.ndarray) -> np.ndarray:
        assert type(img) is np.ndarray
        return img + 1

    @classmethod
    def made(cls, img: np.ndarray) -> np.ndarray:
        assert type(img) is np.ndarray and cls is Transform
        return img - 1

    def _private(self, img: Any) -> Any:
        return type(img)


ac.adapt(Transform)


class TestPlaces:
    """Functions, methods, classmethods, staticmethods, and whole classes."""

    def test_a_class_has_its_public_methods_and_call_adapted(self) -> None:
        t, transform = torch.ones(2), Transform(3.0)
        assert transform(t).tolist() == [3.0, 3.0] and type(transform(np.ones(2))) is np.ndarray
        assert transform.inverse(t).tolist() == pytest.approx([1 / 3, 1 / 3])
        assert Transform.shifted(t).tolist() == [2.0, 2.0] and transform.shifted(t).tolist() == [2.0, 2.0]
        assert Transform.made(t).tolist() == [0.0, 0.0]
        assert transform._private(t) is torch.Tensor  # private: untouched

    def test_names_docs_and_signatures_stay(self) -> None:
        assert centred.__name__ == "centred" and centred.__doc__ == "Module level: pickles by reference."
        assert str(__import__("inspect").signature(centred)) == "(img: 'np.ndarray') -> 'np.ndarray'"

    def test_pickles_by_reference_and_by_recipe(self) -> None:
        assert pickle.loads(pickle.dumps(centred)) is centred
        rebuilt = pickle.loads(pickle.dumps(ac.adapt(copy=True)(_first)))
        assert type(rebuilt(torch.ones(1))) is torch.Tensor and rebuilt._self_plan.sides == {"adapt": {"copy": True}}

    def test_a_partial_a_callable_object_and_a_ufunc_read_what_they_call(self) -> None:
        """A partial is read through the function it calls (the parameters it leaves), a callable
        object through its class's ``__call__``, and a ufunc, which has no annotations, asks for
        nothing; all three raised typing's "is not a module, class, method, or function"."""

        def scaled(img: np.ndarray, factor: float) -> np.ndarray:
            assert type(img) is np.ndarray
            return img * factor

        class Scale:
            def __call__(self, img: np.ndarray) -> np.ndarray:
                assert type(img) is np.ndarray
                return img * 2

        for adapted in (ac.adapt(functools.partial(scaled, factor=2.0)), ac.adapt(Scale())):
            assert adapted(torch.ones(2, dtype=torch.bfloat16)).dtype == torch.bfloat16
            assert adapted(torch.ones(2)).tolist() == [2.0, 2.0] and type(adapted(np.ones(2))) is np.ndarray
        assert ac.adapt(np.negative)(np.ones(2)).tolist() == [-1.0, -1.0]

    def test_adapting_a_decorated_function_is_refused(self) -> None:
        with pytest.raises(TypeError, match="already decorated by autoconvert"):
            ac.adapt(ac.accepts_numpy(_first))

        class Holding:  # a class's decorated method, though it is no FunctionType (pickling)
            first = ac.accepts_numpy(_first)

        with pytest.raises(TypeError, match="already decorated by autoconvert"):
            ac.adapt(Holding)

    def test_other_decorators_stack_on_top(self) -> None:
        """accepts_numpy over adapt: the arrays it hands are what adapt then sees."""
        stacked = ac.returns_tensor(ac.accepts_numpy(ac.adapt(_first)))
        assert type(stacked(torch.ones(1))) is torch.Tensor


def test_a_tensor_parameter_names_what_torch_cannot_hold() -> None:
    """A number past int64 and a list that contains itself, for a torch.Tensor parameter:
    errors naming the argument, where torch.as_tensor raised its own ValueError."""

    @ac.adapt
    def scaled(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    with pytest.raises(ac.ConversionError) as info:
        scaled(2**70)
    message = str(info.value)  # torch's own words differ by version ("unpacking long", "long long")
    assert message.startswith(
        "test_a_tensor_parameter_names_what_torch_cannot_hold.<locals>.scaled(): argument x cannot become the one "
        "tensor its annotation asks for (torch: Overflow when unpacking long"
    )
    assert message.endswith("). Found 1180591620717411303424. Fix: pass a number within int64, or a float.")
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ac.ConversionError, match=r"argument x cannot become the one tensor .*\(list\[torch.Tensor\]\)"):
        scaled(loop)
    assert scaled([1.0, 2.0]).tolist() == [2.0, 4.0]


# --------------------------------------------------------------------------- container changes
# The decorators' container rule holds for adapt in every mode and both directions: what the
# function changes in a container it was handed rebuilt is what the caller's container holds,
# a value it put in in the caller's kind, the caller's own values where it kept them.

_MODES: dict[str, dict[str, Any]] = {
    "default": {},
    "copy=True": {"copy": True},
    "copy=False": {"copy": False},
    "writeback=True": {"writeback": True},
    "check_writes=True": {"check_writes": True},
}
_CHANGES = ["add", "replace", "delete", "alias", "append", "pop", "nest"]


def _change(state: dict[str, Any], changes: list[str], lib: Any) -> None:
    """The same changes, made with NumPy inside the function or with the caller's ``lib``."""
    for name in changes:
        if name == "add":
            state["new"] = lib.full(2, 7.0)
        elif name == "replace":
            state["x"] = state["x"] * 2
        elif name == "delete":
            state.pop("tag", None)
        elif name == "alias":
            state["y"] = state["x"]
        elif name == "append":
            state.setdefault("seen", []).append(state["x"])
        elif name == "pop" and state["items"]:
            state["items"].pop()
        elif name == "nest":
            state["pair"] = [state["x"], lib.zeros(1)]


class _Torch:
    """torch made to make what NumPy makes (float64), for the twin of a tensor caller."""

    full = staticmethod(lambda n, v: torch.full((n,), v, dtype=torch.float64))
    zeros = staticmethod(lambda n: torch.zeros(n, dtype=torch.float64))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (torch.Tensor, np.ndarray)) or isinstance(b, (torch.Tensor, np.ndarray)):
        return type(a) is type(b) and a.dtype == b.dtype and bool((a == b).all())
    if isinstance(a, dict):
        return type(a) is type(b) and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


@hypothesis.given(
    mode=st.sampled_from(sorted(_MODES)),
    caller=st.sampled_from(["tensors", "arrays"]),
    changes=st.lists(st.sampled_from(_CHANGES), max_size=5),
)
def test_changes_to_a_handed_container_reach_the_callers_in_every_mode(
    mode: str, caller: str, changes: list[str]
) -> None:
    """A dict of tensors handed to a parameter asking for arrays, and a dict of arrays handed to
    one asking for tensors: whatever the function adds, replaces, deletes or appends is what
    the caller's dict holds afterwards, in the caller's kind, in every mode, the caller's own
    values and lists where the function kept them."""
    torch_code = caller == "arrays"  # the function works in the other kind

    if torch_code:

        @ac.adapt(**_MODES[mode])
        def change(state: dict[str, torch.Tensor]) -> None:  # the list inside: its tensors as well
            assert type(state["x"]) is torch.Tensor
            _change(state, changes, _Torch)

    else:

        @ac.adapt(**_MODES[mode])
        def change(state: dict[str, npt.NDArray[np.float64]]) -> None:
            assert type(state["x"]) is np.ndarray
            _change(state, changes, np)

    def make() -> dict[str, Any]:
        x, item = (np.arange(3.0), np.ones(2)) if torch_code else (torch.arange(3.0), torch.ones(2))
        return {"x": x, "tag": "a", "items": [item]}

    state, twin = make(), make()
    x, items = state["x"], state["items"]
    change(state)
    _change(twin, changes, np if torch_code else _Torch)
    assert _same(state, twin), (state, twin)
    assert state["items"] is items
    if "replace" not in changes:
        assert state["x"] is x and all(v is x for v in state.get("seen", []))


@pytest.mark.parametrize("mode", sorted(set(_MODES) - {"copy=False"}))  # NumPy cannot share these dtypes
@pytest.mark.parametrize(
    ("narrow", "options"),
    [(torch.bfloat16, {}), (torch.complex32, {}), (torch.float16, {"widen_float16": True})],
    ids=["bfloat16", "complex32", "float16-widened"],
)
@pytest.mark.parametrize("product", ["adapt", "accepts_numpy"])
def test_values_put_into_a_container_come_back_in_the_dtype_numpy_lacks(
    mode: str, narrow: torch.dtype, options: dict[str, Any], product: str
) -> None:
    """A dtype NumPy lacks is handed over widened (bfloat16 as float32): what the function puts
    into the caller's container, a new key or a replaced value, comes back in the caller's
    dtype, as the result does, never in the widened one."""

    def scale(state: dict[str, npt.NDArray[Any]]) -> npt.NDArray[Any]:
        state["twice"] = state["x"] * 2
        state["x"] = state["x"] + 1
        return state["twice"]

    if product == "adapt":
        fn = ac.adapt(**_MODES[mode], **options)(scale)
    else:
        fn = ac.returns_tensor(ac.accepts_numpy(**_MODES[mode], **options)(scale))
    state = {"x": torch.ones(3, dtype=narrow)}
    result = fn(state)
    assert result.dtype is narrow
    assert state["twice"].dtype is narrow and state["x"].dtype is narrow
    assert state["twice"].to(torch.complex64).tolist() == [2, 2, 2]
    assert state["x"].to(torch.complex64).tolist() == [2, 2, 2]


@pytest.mark.parametrize("mode", sorted(_MODES))
def test_a_list_takes_its_changes_back_and_a_mixed_call_gets_tensors(mode: str) -> None:
    """A list of tensors for ``list[NDArray]`` takes back what the function appended, as a
    tensor; a dict of arrays handed to a tensor parameter beside a tensor argument gets
    tensors back, as the result does (tensors win a mixed call)."""

    @ac.adapt(**_MODES[mode])
    def grow(xs: list[npt.NDArray[np.float64]]) -> None:
        assert type(xs[0]) is np.ndarray
        xs.append(xs[0] * 2)

    xs = [torch.ones(2, dtype=torch.float64)]
    first = xs[0]
    grow(xs)
    assert xs[0] is first and torch.equal(xs[1], torch.full((2,), 2.0, dtype=torch.float64))

    @ac.adapt(**_MODES[mode])
    def put(state: dict[str, torch.Tensor], scale: torch.Tensor) -> None:
        state["scaled"] = state["x"] * scale

    state = {"x": np.ones(2)}
    put(state, torch.tensor(3.0, dtype=torch.float64))
    assert type(state["x"]) is np.ndarray and torch.equal(state["scaled"], torch.full((2,), 3.0, dtype=torch.float64))


@dataclasses.dataclass
class _Log:
    items: list[Any] = dataclasses.field(default_factory=list)


def _put(holder: Any, value: Any) -> None:
    if isinstance(holder, _Log):
        holder.items.append(value)
    elif isinstance(holder, dict):
        holder["new"] = value
    else:
        holder.append(value)


def _put_in(holder: Any) -> list[Any]:
    return holder.items if isinstance(holder, _Log) else list(holder.values()) if isinstance(holder, dict) else holder


@pytest.mark.parametrize("kind", [list, dict, _Log, None], ids=["list", "dict", "dataclass", "unannotated"])
@pytest.mark.parametrize(("given", "expected"), [("tensors", torch.Tensor), ("arrays", np.ndarray), ("neither", list)])
def test_a_container_handed_as_it_is_takes_values_back_in_the_callers_kind(
    kind: type | None, given: str, expected: type
) -> None:
    """A parameter annotated bare ``list``, ``dict``, a dataclass, or not at all, is handed as it
    is, and what the function puts into it comes back in the caller's kind, as in annotated
    containers and as accepts_numpy's rule says (before, an array stayed an array in a call
    with tensors); a call with neither tensors nor arrays leaves it as put."""

    def body(out: Any, x: np.ndarray) -> None:
        _put(out, [1.0] if given == "neither" else np.asarray(x) * 2)

    if kind is not None:
        body.__annotations__["out"] = kind
    holder = {} if kind is dict else _Log() if kind is _Log else []
    x = {"tensors": torch.ones(2), "arrays": np.ones(2), "neither": 1.0}[given]
    ac.adapt(body)(holder, x)
    assert [type(v) for v in _put_in(holder)] == [expected]


def test_tensors_given_to_parameters_that_ask_for_nothing_make_the_callers_kind() -> None:
    """A call whose tensors reach only unannotated parameters has tensors: results and values put
    into its containers come back as tensors (before, as the function made them, arrays)."""

    @ac.adapt
    def doubled(x, out):  # type: ignore[no-untyped-def]
        out.append(np.asarray(x) * 2)
        return np.asarray(x) * 2

    out: list[Any] = []
    assert torch.equal(doubled(torch.ones(2), out), torch.full((2,), 2.0)) and type(out[0]) is torch.Tensor
    fresh: list[Any] = []
    assert type(doubled(np.ones(2), fresh)) is np.ndarray and type(fresh[0]) is np.ndarray
