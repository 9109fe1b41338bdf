"""The caller's device: which device a call's tensors live on, and where results go back.

The vote follows torch's own rule for mixing devices: 0-d CPU tensors (scalars such
as ``torch.tensor(0.5)``) don't vote, every other tensor must agree, index included
(``cuda:1`` is not ``cuda:0``). With no tensor at all, torch's default device wins.
"""

from __future__ import annotations

import torch

from autoconvert._errors import DeviceMismatchError, message

CPU = torch.device("cpu")

# torch.get_default_device() walks the torch-function mode stack in Python (benchmarks,
# micro: "the default device"). set_default_device() and `with torch.device(...)` both push a
# mode onto that stack, so an empty stack means the default is the CPU: one C call instead.
_mode_stack_depth = getattr(torch._C, "_len_torch_function_stack", None)

try:  # what torch.get_default_device() itself reads from torch 2.10 on (private, hence guarded)
    from torch.overrides import _get_current_function_mode_stack as _function_modes
    from torch.utils._device import DeviceContext
except ImportError:  # pragma: no cover - a torch without them: its own get_default_device() is all we have
    _function_modes, DeviceContext = list, type(None)  # type: ignore[assignment,misc]


def default_device() -> torch.device:
    """torch's default device for new tensors, cheaply when no device context is active.

    The innermost ``with torch.device(...)`` block wins, then ``set_default_device``. Read
    off the mode stack ourselves: torch.get_default_device() ignores the block before
    torch 2.10 (it only read set_default_device's global), where torch's factories obey it.
    """
    if _mode_stack_depth is not None and _mode_stack_depth() == 0:
        return CPU
    for mode in reversed(_function_modes()):  # type: ignore[no-untyped-call, unused-ignore]
        if isinstance(mode, DeviceContext):
            device = torch.device(mode.device)
            # "cuda" without an index means the current one, as torch's factories take it.
            return normal(device if device.index is not None else torch.empty(0, device=device).device)
    return normal(torch.get_default_device())


def normal(device: torch.device) -> torch.device:
    """``device``, with every CPU device as the one ``CPU`` object: "stays on the CPU" is then
    an identity check on the per-call path."""
    return CPU if device.type == "cpu" else device


def crosses(source: torch.device, target: torch.device) -> bool:
    """Whether ``.to(target)`` copies a tensor on ``source`` to another device: ``"cuda"``
    names the current GPU, so a tensor already there stays put."""
    if source == target:
        return False
    if target.index is None and source.type == target.type:
        module = getattr(torch, target.type, None)
        current = getattr(module, "current_device", None)
        return current is None or source.index != current()
    return True


#: Host tensors of this many bytes or more cross to a CUDA device through pinned memory.
STAGED_FROM = 1 << 20


def to_device(t: torch.Tensor, *, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """``t.to(device=device, dtype=dtype)``. A host tensor of ``STAGED_FROM`` bytes or more
    bound for a CUDA device is copied into pinned memory first, in the narrower of the two
    dtypes, and crosses from there asynchronously: from pageable memory the driver stages the
    copy itself, at a fraction of the link's speed, and the host copy costs less than that
    (benchmarks/RESULTS-gpu.md). torch's pinned allocator keeps the buffer until the copy is done."""
    if device.type != "cuda" or not t.is_cpu or t.requires_grad or t.numel() * t.element_size() < STAGED_FROM:
        return t.to(device=device, dtype=dtype)
    pinned = torch.empty_like(t, dtype=dtype if dtype.itemsize < t.dtype.itemsize else t.dtype, pin_memory=True)
    pinned.copy_(t)
    return pinned.to(device=device, dtype=dtype, non_blocking=True)


def vote(tensors: list[torch.Tensor]) -> torch.device | None:
    """The one device ``tensors`` share, ignoring 0-d CPU tensors; ``None`` if they differ.

    Returns CPU when only 0-d CPU tensors are present, and the default device for none.
    """
    for t in tensors:  # the common case, asked at a third of the cost of the walk below
        if not t.is_cpu:
            break
    else:
        return CPU if tensors else default_device()
    found: torch.device | None = None
    scalars_only = False
    for t in tensors:
        if t.is_cpu and t.ndim == 0:
            scalars_only = True
            continue
        device = t.device
        if found is None:
            found = device
        elif device != found:
            return None
    if found is not None:
        return normal(found)
    return CPU if scalars_only else default_device()


def settle(tensors: list[torch.Tensor]) -> None:
    """Wait for the copies queued from ``tensors`` to the host (see _to_numpy.tensor_to_array):
    once per CUDA device among them, on its current stream, where torch queued them."""
    waited: set[torch.device] = set()
    for t in tensors:
        if t.is_cuda and t.device not in waited:
            waited.add(t.device)
            torch.cuda.current_stream(t.device).synchronize()


def parse(device: object) -> torch.device:
    """An option value as a ``torch.device``; raises ``TypeError``/``RuntimeError`` if it is none."""
    if isinstance(device, torch.device):
        return device
    if isinstance(device, (str, int)) and not isinstance(device, bool):
        return torch.device(device)
    raise TypeError(f"expected a torch.device, a device string such as 'cuda:1', or an index; got {device!r}")


def mismatch(function: str, placed: list[tuple[str, torch.device]]) -> DeviceMismatchError:
    """The error for tensor arguments on different devices, naming each one's path and device."""
    listing = ", ".join(f"{path} on {device}" for path, device in placed)
    return DeviceMismatchError(
        message(
            function,
            "the tensor arguments",
            "are on different devices, so there is no caller's device to return results to",
            listing,
            "move them to one device first, or pass device= to choose where results go",
        )
    )
