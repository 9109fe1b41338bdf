"""``batched`` over a CUDA batch on CuPy: each sample on CuPy's version of a torchified function.

``batched(torchify(scipy.ndimage).distance_transform_edt)`` over a batch on a CUDA device
runs the function's CuPy route (see _torchify/_cupy) once per sample, on the sample's view of
the batch's memory, and gathers the results there: nothing crosses to the host. The route
decides as it decides a call of its own (tensors on one CUDA device, dtypes CuPy has, no
grad, no callables, no write into an argument, no option or ``config`` block the host path
alone honours), asked of every sample before any runs; a batch it declines takes the host
path, converted once each way, and ``stats()`` counts why. A plain function is never
swapped for CuPy's: its numerics stay SciPy's wherever CuPy is installed.
"""

from __future__ import annotations

from typing import Any, Protocol

from autoconvert._errors import ConversionError, message
from autoconvert._escape import compiling
from autoconvert._interpreter._routes import Declined, DeclinedError, Route, Routed
from autoconvert._observe._observe import count_batch, count_route
from autoconvert._options._config import active

from ._executors import Progress
from ._gather import gather

#: What ``OnDevice.map`` returns for a batch its route declines: the host path takes it.
DECLINED = object()


def device_route(fn: Any) -> Route | None:
    """The route of ``fn`` that runs a call on its CUDA tensors' memory, CuPy's (None: none)."""
    if isinstance(fn, Routed):
        return next((route for route in fn.routes if route.name == "cupy"), None)
    return None


class OnDevice:
    """A batch's samples, each on ``route`` with its view of the batch; ``counted``: the
    function's name in ``stats()``, ``label``: batched's in notes and errors."""

    __slots__ = ("counted", "function", "label", "route")

    def __init__(self, route: Route, function: str, counted: str, label: str) -> None:
        self.route, self.function, self.counted, self.label = route, function, counted, label

    def map(self, batches: Batches, args: tuple[Any, ...], kwargs: dict[str, Any], progress: bool) -> Any:
        """The samples' results gathered on the device, or ``DECLINED`` where the route declines
        a sample (a strict route raises instead)."""
        calls = []
        for i in range(batches.size):  # sample by sample: a CPU batch stops at its first, one view made
            calls.append(_sample_call(batches, args, kwargs, i))
            declined = self.route.declines(*calls[-1])
            if declined is not None:
                return self._declined(declined)
        bar = Progress(progress, batches.size, self.counted)
        results = []
        try:
            for i, (sample_args, sample_kwargs) in enumerate(calls):
                try:
                    results.append(self.route.call(sample_args, sample_kwargs))
                except DeclinedError as e:  # CuPy refused this sample: the whole batch crosses
                    return self._declined(e.declined)
                except Exception as e:
                    e.add_note(f"{self.label}: raised by sample {i} of {batches.size}")
                    raise
                bar.advance(1)
        finally:
            bar.close()
        if not compiling() and active() is not None:
            count_route(self.counted, self.route.name)
            count_batch(self.counted, batches.size, False)
        return gather(results)

    def _declined(self, declined: Declined) -> Any:
        """``DECLINED``, counted in ``stats()``; a strict route's error (``array_module="cupy"``)."""
        if self.route.strict:
            raise ConversionError(message(self.function, *declined[:4]))
        if declined.counted and not compiling() and active() is not None:
            count_route(self.counted, self.route.name, declined.problem)
        return DECLINED


class Batches(Protocol):
    """Which arguments of a call are batches (``_batched.Layout``), and their leading size."""

    @property
    def positions(self) -> frozenset[int]: ...
    @property
    def keys(self) -> frozenset[str]: ...
    @property
    def size(self) -> int: ...


def _sample_call(
    batches: Batches, args: tuple[Any, ...], kwargs: dict[str, Any], i: int
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Sample ``i``'s call: each batched argument's item ``i`` (a view of a tensor batch)."""
    sample_args = tuple(a[i] if k in batches.positions else a for k, a in enumerate(args))
    sample_kwargs = {k: v[i] if k in batches.keys else v for k, v in kwargs.items()} if kwargs else kwargs
    return sample_args, sample_kwargs
