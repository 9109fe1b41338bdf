"""A module of state that functions of other modules change: another module's globals."""

from __future__ import annotations

import torch

SEEN: list[int] = []


class Counted(torch.nn.Module):
    """A layer counting its calls in its class."""

    calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        type(self).calls += 1
        return x


def remember(value: int) -> None:
    SEEN.append(value)


#: What ``__getattr__`` makes up attributes from.
_LAZY: dict[str, list[int]] = {"lazy_seen": []}


def __getattr__(name: str) -> list[int]:
    """Attributes made up on access (PEP 562), as a lazily loading module makes them."""
    if name in _LAZY:
        return _LAZY[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
