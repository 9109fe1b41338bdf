"""A ``numpy_op`` registered as ``torch.library`` ops, so ``torch.compile`` sees one node.

``torch.library.custom_op`` keeps every op it makes for the life of the process, one leak
per op defined in a loop or a lambda. The lower-level ``Library`` API lets the decorated
function own its registrations instead: they are destroyed when it is collected. The
backward is an op of its own, opaque to tracing like the forward, whose fake gives each
tensor argument a gradient of its shape (torch.library's advice for NumPy backwards).
"""

from __future__ import annotations

import itertools
import re
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ._errors import ConversionError, message
from ._opspec import Spec, inexact, save, saved
from ._schema import Schema

NAMESPACE = "autoconvert"
_numbers = itertools.count()  # op names are unique in the process: lambdas and redefinitions
_NOT_IN_NAMES = re.compile(r"\W")
_GRADS, _OUTPUTS = "autoconvert_grads", "autoconvert_outputs"


class Registration:
    """The forward op (and backward op) of one ``numpy_op``, registered while this object lives.

    ``fake`` is the caller's fake function, or parameter names whose arguments the results
    are shaped like; ``device``/``dtype`` are the ``returns_tensor`` options those follow.
    """

    def __init__(
        self,
        spec: Spec,
        schema: Schema,
        fake: Callable[..., Any] | tuple[str, ...],
        *,
        mutated: bool,
        device: torch.device | None,
        dtype: Any,
    ) -> None:
        name = _NOT_IN_NAMES.sub("_", spec.name.removesuffix("()")) + f"_{next(_numbers)}"
        # Held by this object alone: when the op's function goes, the Library's own
        # finalizer takes its registrations with it.
        self.library = library = torch.library.Library(NAMESPACE, "FRAGMENT")  # type: ignore[no-untyped-call]
        # Torch's own finalizer for a collected Library leaves torch.ops' cached packet behind
        # before torch 2.5, and calling that stale packet segfaults: tear it down as
        # torch.library._scoped_library does, on every version.
        weakref.finalize(self, library._destroy)
        library.define(  # type: ignore[no-untyped-call]
            f"{name}({schema.arguments(mutated)}) -> {schema.returns()}", tags=(torch.Tag.pt2_compliant_tag,)
        )
        library.impl(name, lambda *args, **kwargs: spec.run(args, kwargs), "CompositeExplicitAutograd")  # type: ignore[no-untyped-call]
        faked = fake if callable(fake) else _like(schema, fake, device, dtype)
        torch.library.register_fake(f"{NAMESPACE}::{name}", _counted(spec, schema.results, faked), lib=library)
        self.forward: Callable[..., Any] = getattr(torch.ops.autoconvert, name).default  # type: ignore[attr-defined, unused-ignore]  # not exported in torch 2.4's stubs
        if spec.backward is not None:
            backward = _backward_op(library, f"{name}_backward", spec, schema)
            torch.library.register_autograd(
                f"{NAMESPACE}::{name}", _autograd(backward), setup_context=_setup_context, lib=library
            )


def _backward_op(library: torch.library.Library, name: str, spec: Spec, schema: Schema) -> Callable[..., Any]:
    """The NumPy backward as an op: gradients for the tensor arguments, in order."""
    library.define(f"{name}(Tensor[] {_GRADS}, Tensor[] {_OUTPUTS}, {schema.arguments()}) -> Tensor[]")  # type: ignore[no-untyped-call]

    def backward(grads: list[torch.Tensor], outputs: list[torch.Tensor], *args: Any, **kwargs: Any) -> Any:
        found = spec.gradients(grads, args, kwargs, outputs, tuple_result=schema.results > 1)
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        # An op returns tensors only: no gradient (or an integer input's) is zeros, never read.
        return [
            torch.zeros_like(a) if g is None or inexact(a.dtype) is None else g
            for a, g in zip(tensors, found, strict=True)
        ]

    def fake(grads: list[torch.Tensor], outputs: list[torch.Tensor], *args: Any, **kwargs: Any) -> Any:
        return [torch.empty_like(a) for a in args if isinstance(a, torch.Tensor)]

    def once(ctx: Any, *grads: Any) -> Any:
        raise RuntimeError(f"{spec.name}: double backward is not supported: its backward is NumPy code")

    library.impl(name, backward, "CompositeExplicitAutograd")  # type: ignore[no-untyped-call]
    torch.library.register_fake(f"{NAMESPACE}::{name}", fake, lib=library)
    torch.library.register_autograd(f"{NAMESPACE}::{name}", once, lib=library)
    op: Callable[..., Any] = getattr(torch.ops.autoconvert, name).default  # type: ignore[attr-defined, unused-ignore]  # as above
    return op


def _setup_context(ctx: Any, inputs: Sequence[Any], output: Any, keyword_only_inputs: Any = None) -> None:
    save(ctx, inputs, keyword_only_inputs or {}, output if isinstance(output, tuple) else (output,))


def _autograd(backward: Callable[..., Any]) -> Callable[..., Any]:
    def gradients(ctx: Any, *grads: Any) -> tuple[Any, ...]:
        args, outputs = saved(ctx)
        found = iter(backward(list(grads), list(outputs), *args, **ctx.kwargs))
        gradients: list[torch.Tensor | None] = []
        for a in args:  # one per argument: None for non-tensors and integer tensors
            g = next(found) if isinstance(a, torch.Tensor) else None
            gradients.append(g if g is not None and inexact(a.dtype) is not None else None)
        return tuple(gradients)

    return gradients


def _like(schema: Schema, names: tuple[str, ...], device: torch.device | None, dtype: Any) -> Callable[..., Any]:
    """``fake="x"``: results with argument ``x``'s shape, and its dtype and device unless the
    ``dtype=``/``device=`` options say otherwise."""
    places = [schema.place(n) for n in names]

    def fake(*args: Any, **kwargs: Any) -> Any:
        likes = [kwargs[p] if isinstance(p, str) else args[p] for p in places]
        results = tuple(
            torch.empty(
                t.shape,
                dtype=dtype if isinstance(dtype, torch.dtype) and inexact(t.dtype) is not None else t.dtype,
                device=device or t.device,
            )
            for t in likes
        )
        return results if len(results) > 1 else results[0]

    return fake


def _counted(spec: Spec, results: int, fake: Callable[..., Any]) -> Callable[..., Any]:
    """The caller's fake, with its result count checked against the schema's."""

    def checked(*args: Any, **kwargs: Any) -> Any:
        result = fake(*args, **kwargs)
        count = len(result) if isinstance(result, tuple) else 1
        if count != results:
            raise ConversionError(
                message(
                    spec.name,
                    "fake=",
                    f"must give {results} result(s), as the op was registered with",
                    f"{count}",
                    "annotate the function's return, e.g. -> tuple[np.ndarray, np.ndarray]",
                )
            )
        return result

    return checked
