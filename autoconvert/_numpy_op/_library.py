"""A ``numpy_op`` registered as ``torch.library`` ops, so ``torch.compile`` sees one node.

Torch keeps every Python kernel registered with it for the life of the process, also after
its ``Library`` is destroyed. So the kernels it gets are trampolines that reach the decorated
function's ``Registration`` weakly: the function, and everything it captures, goes when
the function goes, and a call of its op after that raises a clear error. What stays is what
torch built for the op (its schema, and the autograd classes ``register_autograd`` generates:
about 8 KiB per op, 50 KiB with a backward; see the numpy_op guide). The backward is an op of its own, opaque to tracing like the forward, whose fake
gives each tensor argument a gradient of its shape (torch.library's advice for NumPy backwards).
"""

from __future__ import annotations

import functools
import itertools
import re
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch

from autoconvert._errors import ConversionError, message

from ._autograd import vmapped
from ._opspec import OpSpec, inexact, no_second_derivative, placed, save, saved
from ._schema import Schema

NAMESPACE = "autoconvert"
_numbers = itertools.count()  # op names are unique in the process: lambdas and redefinitions
_NOT_IN_NAMES = re.compile(r"\W")
_GRADS, _OUTPUTS = "autoconvert_grads", "autoconvert_outputs"
#: A feature read: torch 2.4's torch.library has no register_vmap.
_REGISTERS_VMAP = hasattr(torch.library, "register_vmap")


#: Every op's Library, kept for the life of the process. Torch keeps the Python kernels a
#: Library registers even after it is destroyed (torch 2.4 to 2.15), so destroying one frees
#: nothing, and it leaves a cached op behind whose call segfaults. Kept, an op costs its
#: schema and a few trampolines; the function and what it captures go with the function.
_LIBRARIES: list[torch.library.Library] = []


class Registration:
    """The forward op (and backward op) of one ``numpy_op``, whose kernels work while this
    object lives: torch holds them only as trampolines that reach it weakly (see _trampoline).

    ``fake`` is the caller's fake function, or parameter names whose arguments the results
    are shaped like; ``device``/``dtype`` are the ``returns_tensor`` options those follow.
    """

    def __init__(
        self,
        spec: OpSpec,
        schema: Schema,
        fake: Callable[..., Any] | tuple[str, ...],
        *,
        mutated: bool,
        device: torch.device | None,
        dtype: Any,
    ) -> None:
        name = _NOT_IN_NAMES.sub("_", spec.name.removesuffix("()")) + f"_{next(_numbers)}"
        self.spec, self.schema = spec, schema
        self.faked = fake if callable(fake) else _like(schema, fake, device, dtype)
        library = torch.library.Library(NAMESPACE, "FRAGMENT")  # type: ignore[no-untyped-call]
        _LIBRARIES.append(library)
        library.define(  # type: ignore[no-untyped-call]
            f"{name}({schema.arguments(mutated)}) -> {schema.returns()}", tags=(torch.Tag.pt2_compliant_tag,)
        )
        me = weakref.ref(self)
        library.impl(name, _trampoline(me, name, Registration.run), "CompositeExplicitAutograd")  # type: ignore[no-untyped-call]
        fake_kernel = _counted(spec.name, schema.results, _trampoline(me, name, Registration.fake))
        torch.library.register_fake(f"{NAMESPACE}::{name}", fake_kernel, lib=library)
        self.forward: Callable[..., Any] = getattr(torch.ops.autoconvert, name).default  # type: ignore[attr-defined, unused-ignore]  # not exported in torch 2.4's stubs
        # Else torch.vmap runs the op per sample, and torch warns it has no rule (torch takes no
        # rule for an op with a keyword-only tensor).
        if _REGISTERS_VMAP and not any(p.keyword_only and "Tensor" in p.type for p in schema.parameters):
            vmap_rule = _trampoline(me, name, Registration.vmap)
            torch.library.register_vmap(f"{NAMESPACE}::{name}", vmap_rule, lib=library)  # type: ignore[attr-defined, unused-ignore]  # torch 2.4: none
        if spec.backward is not None:
            kernels = (_trampoline(me, name, Registration.backward), _trampoline(me, name, Registration.backward_vmap))
            backward = self._backward = _backward_op(library, f"{name}_backward", kernels, schema, spec.name)
            torch.library.register_autograd(
                f"{NAMESPACE}::{name}",
                _autograd(backward, len(spec.residuals)),
                setup_context=_setup_context,
                lib=library,
            )

    def run(self, *args: Any, **kwargs: Any) -> Any:
        return self.spec.run(args, kwargs)

    def fake(self, *args: Any, **kwargs: Any) -> Any:
        return self.faked(*args, **kwargs)

    def vmap(self, info: Any, in_dims: tuple[Any, ...], *args: Any, **kwargs: Any) -> Any:
        """The op under ``torch.vmap`` (and torch.func's transforms that batch), as ``vmap=`` says:
        once per sample, stacked, or once for the batch (see autoconvert._numpy_op._autograd)."""
        return vmapped(
            functools.partial(self.forward, **kwargs),
            info,
            in_dims,
            (),
            args,
            vectorized=self.spec.vectorized,
            name=self.spec.name,
        )

    def backward_vmap(self, info: Any, in_dims: tuple[Any, ...], *args: Any, **kwargs: Any) -> Any:
        """The backward op under ``torch.vmap``, per-sample gradients (``vmap(grad(op))``, a
        ``backward()`` through a vmapped call), as the forward runs there: one list per sample."""
        found, dims = vmapped(
            lambda *a: tuple(self._backward(*a, **kwargs)),
            info,
            in_dims,
            (),
            args,
            vectorized=self.spec.vectorized,
            name=self.spec.name,
        )
        return list(found), list(dims)

    def backward(self, grads: list[torch.Tensor], outputs: list[torch.Tensor], *args: Any, **kwargs: Any) -> Any:
        """The NumPy backward's gradients, one tensor per tensor argument, in order."""
        results = self.schema.results - len(self.spec.residuals)
        found = self.spec.gradients(grads, args, kwargs, outputs, tuple_result=results > 1)
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        # An op returns tensors only: no gradient (or an integer input's) is zeros, never read.
        return [
            torch.zeros_like(a) if g is None or inexact(a.dtype) is None else g
            for a, g in zip(tensors, found, strict=True)
        ]


def _trampoline(owner: weakref.ref[Registration], name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    """A kernel that reaches its Registration weakly: torch keeps the kernel, and the kernel
    keeps nothing alive. Once the numpy_op is collected, a call raises instead of crashing."""

    def kernel(*args: Any, **kwargs: Any) -> Any:
        registration = owner()
        if registration is None:
            raise RuntimeError(
                f"{NAMESPACE}::{name}: the numpy_op that registered this op was garbage-collected, and its "
                "kernels went with it; keep the decorated function alive for as long as you use its .op"
            )
        return method(registration, *args, **kwargs)

    return kernel


def _backward_op(
    library: torch.library.Library,
    name: str,
    kernels: tuple[Callable[..., Any], Callable[..., Any]],
    schema: Schema,
    function: str,
) -> Callable[..., Any]:
    """The NumPy backward as an op: gradients for the tensor arguments, in order."""
    library.define(f"{name}(Tensor[] {_GRADS}, Tensor[] {_OUTPUTS}, {schema.arguments()}) -> Tensor[]")  # type: ignore[no-untyped-call]

    def fake(grads: list[torch.Tensor], outputs: list[torch.Tensor], *args: Any, **kwargs: Any) -> Any:
        return [torch.empty_like(a) for a in args if isinstance(a, torch.Tensor)]

    def once(ctx: Any, *grads: Any) -> Any:
        raise no_second_derivative(function)

    kernel, vmap = kernels
    library.impl(name, kernel, "CompositeExplicitAutograd")  # type: ignore[no-untyped-call]
    torch.library.register_fake(f"{NAMESPACE}::{name}", fake, lib=library)
    torch.library.register_autograd(f"{NAMESPACE}::{name}", once, lib=library)
    if _REGISTERS_VMAP:
        torch.library.register_vmap(f"{NAMESPACE}::{name}", vmap, lib=library)  # type: ignore[attr-defined, unused-ignore]  # torch 2.4: none
    op: Callable[..., Any] = getattr(torch.ops.autoconvert, name).default  # type: ignore[attr-defined, unused-ignore]  # as above
    return op


def _setup_context(ctx: Any, inputs: Sequence[Any], output: Any, keyword_only_inputs: Any = None) -> None:
    save(ctx, inputs, keyword_only_inputs or {}, output if isinstance(output, tuple) else (output,))


def _autograd(backward: Callable[..., Any], residuals: int) -> Callable[..., Any]:
    """The op's backward formula: the backward op, given the results' gradients (the
    ``residuals`` last results, the rules' alone, have none to give)."""

    def gradients(ctx: Any, *grads: Any) -> tuple[Any, ...]:
        args, outputs = saved(ctx)
        grads = grads[: len(grads) - residuals]
        found = placed(args, backward(list(grads), list(outputs), *args, **ctx.kwargs))
        # One per argument: None for non-tensors and integer tensors.
        return tuple(
            g if g is not None and inexact(a.dtype) is not None else None for a, g in zip(args, found, strict=True)
        )

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


def _counted(function: str, results: int, fake: Callable[..., Any]) -> Callable[..., Any]:
    """The caller's fake, with its result count checked against the schema's."""

    def checked(*args: Any, **kwargs: Any) -> Any:
        result = fake(*args, **kwargs)
        count = len(result) if isinstance(result, tuple) else 1
        if count != results:
            raise ConversionError(
                message(
                    function,
                    "fake=",
                    f"must give {results} result(s), as the op was registered with",
                    f"{count}",
                    "annotate the function's return, e.g. -> tuple[np.ndarray, np.ndarray]",
                )
            )
        return result

    return checked
