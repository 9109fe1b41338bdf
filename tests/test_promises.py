"""The promise matrix: each promise of the Concepts page, once, over every product, route and
runner of ``tests/promise_sites.py``. A site that breaks a promise fails here on its first
run, whichever feature brought it."""

from __future__ import annotations

import contextlib
import pickle
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import torch
from torch.autograd import forward_ad

import autoconvert as ac
from tests import promise_bodies as bodies
from tests.promise_sites import SITES, Runners, Site, runners

ALL = [site.param() for site in SITES]
CONVERTING = [site.param() for site in SITES if site.converts_results]
WHOLE = [site.param() for site in SITES if not site.samples]
PICKLING = [site.param() for site in SITES if site.pickles]
WITH_METHODS = [site.param() for site in SITES if site.result_methods and site.converts_results and not site.samples]


@pytest.fixture(scope="module")
def slow_runners() -> Iterator[Runners]:
    with runners() as made:
        yield made


def _site(site: Site, request: pytest.FixtureRequest, body: Callable[..., Any], **options: Any) -> Callable[..., Any]:
    """What the caller calls: ``body`` through ``site`` with ``options``."""
    made = request.getfixturevalue("slow_runners") if site.slow else {}
    return site.wrap(body, options, made)


def _batch() -> torch.Tensor:
    return torch.arange(1.0, 7.0).reshape(2, 3)


def _tensor(result: Any) -> torch.Tensor:
    """A site's result as a tensor: converted by the site, or by hand where it hands back arrays."""
    return result if isinstance(result, torch.Tensor) else torch.as_tensor(np.asarray(result))


# --------------------------------------------------------------------------- the caller's data


@pytest.mark.parametrize("site", ALL)
def test_a_write_into_an_argument_is_refused_and_the_callers_tensor_kept(site: Site, request: Any) -> None:
    """By default the body's arguments are read-only: its write is autoconvert's
    ReadOnlyError naming the function and the argument, and the caller's tensor is as it was
    (traced, the write stays in the private copy the trace hands)."""
    x = _batch()
    before = x.clone()
    if site.traced:
        _site(site, request, bodies.writes_first)(x)
        assert torch.equal(x, before)
        return
    function, argument = site.names(bodies.writes_first)
    with pytest.raises(ac.ReadOnlyError) as info:
        _site(site, request, bodies.writes_first)(x)
    assert str(info.value).startswith(f"{function}(): argument {argument} was written into by the function;")
    assert torch.equal(x, before)


@pytest.mark.parametrize("site", ALL)
def test_private_copies_take_the_writes_and_the_caller_keeps_its_tensor(site: Site, request: Any) -> None:
    """With ``copy=True`` the body writes into private copies: its result sees its writes,
    the caller's tensor does not."""
    x = _batch()
    before = x.clone()
    out = _tensor(_site(site, request, bodies.writes_first, copy=True)(x))
    written = before.clone()
    written[:, 0] = 99.0
    assert torch.equal(out, written.sum(-1)) and torch.equal(x, before)


@pytest.mark.parametrize("site", ALL)
def test_writeback_makes_the_writes_the_callers_or_is_refused_by_name(site: Site, request: Any) -> None:
    """With ``writeback=True`` the body's writes are the caller's, or, where it runs on an
    executor the caller passed (whose workers may be other processes), the option is refused
    by name and the caller's tensor kept."""
    x = _batch()
    before = x.clone()
    written = before.clone()
    written[:, 0] = 99.0
    if site.on_executor:
        with pytest.raises(ValueError, match="writeback"):
            _site(site, request, bodies.writes_first, writeback=True)(x)
        assert torch.equal(x, before)
    else:
        out = _tensor(_site(site, request, bodies.writes_first, writeback=True)(x))
        assert torch.equal(x, written) and torch.equal(out, written.sum(-1))


def _refusal(site: Site, body: Callable[..., Any], changed: str, kind: str) -> str:
    """autoconvert's refusal of a change ``body`` made on a copy of its arguments at ``site``."""
    argument = changed.partition(".")[0]
    what = f"argument {changed}, a {kind}," if kind == "container" else f"{changed}, in argument {argument},"
    copy = "it" if kind == "container" else argument
    return (
        f"autoconvert.batched({body.__qualname__}): the function changed {what} on {site.worker}, which holds a copy "
        f"of {copy}: the change cannot reach the caller's {kind}, as it does where the samples run sequentially or "
        "on threads. Fix: return what the function computes, or run it sequentially (no executor) or on threads "
        "(workers=)"
    )


@pytest.mark.parametrize("site", ALL)
def test_changes_to_a_plain_container_reach_the_caller_or_are_refused_by_name(site: Site, request: Any) -> None:
    """What the body adds to a plain dict it is handed is in the caller's dict afterwards (one
    entry per call: one per sample where it maps); on an executor, whose workers hold copies,
    the change is refused naming the container, never dropped."""
    x = _batch()
    log: dict[str, Any] = {}
    if site.on_executor:
        with pytest.raises(ValueError) as info:
            _site(site, request, bodies.logs_calls)(x, log)
        assert str(info.value) == _refusal(site, bodies.logs_calls, "log", "container") and log == {}
        return
    _site(site, request, bodies.logs_calls)(x, log)
    expected = x.sum(-1).tolist() if site.samples else [float(x.sum())]
    assert sorted(log.get("seen", [])) == sorted(expected), log


_APPENDING = [bodies.appends_an_array, bodies.appends_to_a_bare_list, bodies.appends_to_an_unannotated_list]


@pytest.mark.parametrize("body", _APPENDING, ids=lambda body: body.__name__)
@pytest.mark.parametrize("site", ALL)
def test_an_array_put_into_a_list_without_tensors_reaches_the_caller_as_a_tensor(
    site: Site, body: Callable[..., Any], request: Any
) -> None:
    """The caller works in torch: an array the body appends to a list it is handed, which held
    no tensors (so it is handed as it is), is a tensor in the caller's list afterwards, as in
    a list that held tensors, and the caller's own items stay, however the list is annotated
    (adapt left an array in a bare or unannotated one); on an executor, whose workers hold
    copies, the change is refused naming the list, never dropped."""
    x = _batch()
    out: list[Any] = ["kept"]
    if site.on_executor:
        with pytest.raises(ValueError) as info:
            _site(site, request, body)(x, out)
        assert str(info.value) == _refusal(site, body, "out", "container") and out == ["kept"]
        return
    _site(site, request, body)(x, out)
    assert out[0] == "kept" and all(type(value) is torch.Tensor for value in out[1:]), out
    expected = [x[i].sum() * 2 for i in range(2)] if site.samples else [x.sum(-1) * 2]
    assert sorted(v.tolist() for v in out[1:]) == sorted(torch.as_tensor(e).tolist() for e in expected)


@pytest.mark.parametrize("site", ALL)
def test_changes_to_a_set_reach_the_caller_or_are_refused_by_name(site: Site, request: Any) -> None:
    """A set is no container the conversion walks, yet what the body adds to one it is handed
    is the caller's, or refused by name on an executor: never dropped."""
    x = _batch()
    seen: set[float] = set()
    if site.on_executor:
        with pytest.raises(ValueError) as info:
            _site(site, request, bodies.notes_in_a_set)(x, seen)
        assert str(info.value) == _refusal(site, bodies.notes_in_a_set, "seen", "container") and seen == set()
        return
    _site(site, request, bodies.notes_in_a_set)(x, seen)
    assert seen == set(x.sum(-1).tolist() if site.samples else [float(x.sum())])


@pytest.mark.parametrize("site", ALL)
def test_changes_to_an_objects_attributes_reach_the_caller_or_are_refused_by_name(site: Site, request: Any) -> None:
    """What the body changes of an object it is handed (an attribute counting its calls) is the
    caller's object's afterwards, or refused on an executor naming the attribute, never dropped."""
    x = _batch()
    counter = bodies.Counter()
    if site.on_executor:
        with pytest.raises(ValueError) as info:
            _site(site, request, bodies.counts_on)(x, counter)
        assert str(info.value) == _refusal(site, bodies.counts_on, "counter.calls", "object") and counter.calls == 0
        return
    _site(site, request, bodies.counts_on)(x, counter)
    assert counter.calls == (len(x) if site.samples else 1)


@pytest.mark.parametrize("site", ALL)
def test_an_object_filling_its_caches_is_never_refused(site: Site, request: Any) -> None:
    """An object the body only reads through its caches (a cached_property, a memo dict, an
    attribute built on first use) gives the same values on every site: filling a cache on a
    worker's copy loses nothing the caller would see."""
    x = _batch()
    out = _tensor(_site(site, request, bodies.reads_through_caches)(x, bodies.Counter()))
    assert torch.equal(out, x.sum(-1) * 2)


@pytest.mark.parametrize("site", WHOLE)
def test_changes_to_a_container_of_tensors_reach_the_caller(site: Site, request: Any) -> None:
    """An array the body adds to a dict of tensors it is handed reaches the caller's dict as
    a tensor; the caller's own tensor stays where it was."""
    x = _batch()
    d = {"a": x}
    _site(site, request, bodies.adds_a_key)(d)
    assert d["a"] is x and set(d) == {"a", "new"}
    assert torch.equal(_tensor(d["new"]), x * 2)


# --------------------------------------------------------------------------- what comes back


@pytest.mark.parametrize("site", ALL)
def test_the_same_values_on_every_site(site: Site, request: Any) -> None:
    """Every product, route and runner gives what NumPy gives on the caller's values."""
    x = _batch()
    out = _tensor(_site(site, request, bodies.doubled_sum)(x))
    assert torch.equal(out, torch.from_numpy(bodies.doubled_sum(x.numpy())))
    assert out.device == x.device


@pytest.mark.parametrize("site", CONVERTING)
def test_a_masked_result_is_refused_naming_the_fix(site: Site, request: Any) -> None:
    """A mask is never dropped: a masked result is autoconvert's ConversionError naming
    ``.filled()``, on every runner, never a tensor of the fill values."""
    with pytest.raises(ac.ConversionError, match=r"is a masked array; a tensor has no mask.*\.filled\(fill_value\)"):
        _site(site, request, bodies.masked)(_batch())


@pytest.mark.parametrize("site", CONVERTING)
def test_bfloat16_crosses_widened_and_comes_back_narrow(site: Site, request: Any) -> None:
    """NumPy sees float32 for bfloat16 (the body checks), and the result is bfloat16 again."""
    x = _batch().to(torch.bfloat16)
    out = _site(site, request, bodies.halved)(x)
    assert out.dtype == torch.bfloat16 and torch.equal(out, x / 2)


@pytest.mark.parametrize("site", CONVERTING)
def test_integer_results_keep_numpys_dtype(site: Site, request: Any) -> None:
    """SciPy's int32 indices stay int32 on every site, as the Dtypes section says."""
    x = torch.tensor([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]])
    out = _site(site, request, bodies.ranks)(x)
    assert out.dtype == torch.int32 and out.tolist() == [[1, 2, 0], [0, 2, 1]]


@pytest.mark.parametrize("site", WITH_METHODS)
def test_a_result_s_method_runs_on_the_fields_the_caller_holds_now(site: Site, request: Any) -> None:
    """A result container's method sees what the caller set on the result: a field
    reassigned (converted back at the call), one deleted, one put back; never the value the
    function returned in its place."""
    fit = _site(site, request, bodies.fitted)(_batch())
    x = torch.ones(1, 3)
    fit.w = torch.tensor([1.0, 0.0, 2.0])
    assert torch.equal(fit.predict(x), torch.tensor([3.0]))
    del fit.w
    with pytest.raises(AttributeError) as missing:
        fit.predict(x)
    assert str(missing.value) == "'Fit' object has no attribute 'w'"
    fit.w = torch.tensor([0.0, 0.0, 1.0])
    assert torch.equal(fit.predict(x), torch.tensor([1.0]))


# --------------------------------------------------------------------------- gradients


@pytest.mark.parametrize("site", ALL)
def test_a_dropped_gradient_is_said_once_naming_the_argument(site: Site, request: Any) -> None:
    """NumPy code passes no gradient back: the argument is detached and a GradientWarning
    names it, on every runner; ``grad="error"`` raises GradientError instead."""
    x = _batch().requires_grad_()
    said = "{}(): argument {} requires grad".format(*site.names(bodies.doubled_sum))
    with pytest.warns(ac.GradientWarning) as warned:
        out = _site(site, request, bodies.doubled_sum)(x)
    assert [str(w.message).startswith(said) for w in warned] == [True]
    assert not _tensor(out).requires_grad
    with pytest.raises(ac.GradientError) as info:
        _site(site, request, bodies.doubled_sum, grad="error")(x)
    assert str(info.value).startswith(said)


@pytest.mark.parametrize("site", ALL)
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated")  # torch's own, from make_dual's first use
def test_a_dropped_forward_mode_tangent_is_said_as_a_dropped_gradient(site: Site, request: Any) -> None:
    """A dual tensor (forward_ad.make_dual) requires no grad, yet NumPy drops its tangent: a
    GradientWarning names it, on every runner, or GradientError under ``grad="error"`` (or
    always, where the site has no rule for it); ``grad="detach"`` drops it silently."""
    said = "{}(): argument {} carries a forward-mode tangent".format(*site.names(bodies.doubled_sum))
    with forward_ad.dual_level():
        x = forward_ad.make_dual(_batch(), torch.ones(2, 3))
        if site.refuses_tangents:
            with pytest.raises(ac.GradientError, match="no NumPy rule for it"):
                _site(site, request, bodies.doubled_sum)(x)
            return
        with pytest.warns(ac.GradientWarning) as warned:
            out = _site(site, request, bodies.doubled_sum)(x)
        assert [str(w.message).startswith(said) for w in warned] == [True]
        assert forward_ad.unpack_dual(_tensor(out)).tangent is None
        with pytest.raises(ac.GradientError) as info:
            _site(site, request, bodies.doubled_sum, grad="error")(x)
        assert str(info.value).startswith(said)
        with warnings.catch_warnings():
            warnings.simplefilter("error", ac.GradientWarning)
            _site(site, request, bodies.doubled_sum, grad="detach")(x)


# --------------------------------------------------------------------------- errors and pickling


@pytest.mark.parametrize("site", ALL)
def test_what_cannot_cross_is_autoconverts_error_naming_function_argument_and_fix(site: Site, request: Any) -> None:
    """A tensor without data is refused before the body runs, by a message naming the
    function, the argument, what was found and the fix, on every site."""
    with pytest.raises(ac.ConversionError) as info:
        _site(site, request, bodies.doubled_sum)(torch.ones(2, 3, device="meta"))
    assert str(info.value) == (
        "{}(): argument {} is a meta tensor, which holds no data. Found torch.Tensor(shape=(2, 3), dtype=torch.float32, "
        "layout=torch.strided, device=meta). Fix: run the call on tensors with real data."
    ).format(*site.names(bodies.doubled_sum))


@pytest.mark.parametrize("site", PICKLING)
def test_what_the_caller_holds_pickles_and_gives_the_same_values(site: Site, request: Any) -> None:
    """Each product pickles (its body by reference) and unpickles to the same behaviour."""
    made = _site(site, request, bodies.doubled_sum)
    again = pickle.loads(pickle.dumps(made))
    x = _batch()
    assert torch.equal(_tensor(again(x)), _tensor(made(x)))


# --------------------------------------------------------------------------- routes with a body of their own


def _writes_saved(grad: np.ndarray, a: np.ndarray, output: np.ndarray) -> np.ndarray:
    """A backward that writes into what it is handed, as soft-DTW's kernel does."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            a[..., 0] = -np.inf
            output[..., 0] = -np.inf
        except ValueError:
            pass
    return grad * 2


def test_a_backward_never_changes_the_callers_tensor_or_the_result() -> None:
    """numpy_op's backward is a route of its own: what it writes into the saved input and
    output never reaches the caller's tensor or the result the caller holds."""
    op = ac.numpy_op(lambda a: a * 2, backward=_writes_saved)
    x = _batch().requires_grad_()
    before = x.detach().clone()
    out = op(x)
    kept = out.detach().clone()
    with contextlib.suppress(ac.ReadOnlyError):
        out.sum().backward()
    assert torch.equal(x.detach(), before) and torch.equal(out.detach(), kept)


# --------------------------------------------------------------------------- the reverse direction

#: Torch code called from NumPy code, each product as the NumPy caller holds it.
REVERSE = {
    "the reverse pair": lambda body, **o: ac.returns_numpy(ac.accepts_tensor(body, **o)),
    "accepts_tensor alone": lambda body, **o: ac.accepts_tensor(body, **o),
}


def _writes_first_tensor(t: torch.Tensor) -> torch.Tensor:
    t[..., 0] = 99.0
    return t.sum(-1)


@pytest.mark.parametrize("product", sorted(REVERSE))
def test_torch_code_shares_the_callers_array_as_documented_and_copies_when_asked(product: str) -> None:
    """torch has no read-only tensors: by default the function's tensor is the caller's
    array's memory, so its writes are the caller's (the reverse guide says so); with
    ``copy=True`` they are the function's alone, and a read-only array is always copied."""
    make = REVERSE[product]
    shared = np.arange(6.0).reshape(2, 3)
    make(_writes_first_tensor)(shared)
    assert shared[:, 0].tolist() == [99.0, 99.0]
    private = np.arange(6.0).reshape(2, 3)
    out = make(_writes_first_tensor, copy=True)(private)
    assert private.tolist() == np.arange(6.0).reshape(2, 3).tolist()
    assert np.asarray(out).tolist() == [102.0, 108.0]
    frozen = np.arange(6.0).reshape(2, 3)
    frozen.flags.writeable = False
    make(_writes_first_tensor)(frozen)
    assert frozen.tolist() == np.arange(6.0).reshape(2, 3).tolist()
