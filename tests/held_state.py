"""A module of state that functions of other modules change: another module's globals."""

from __future__ import annotations

SEEN: list[int] = []


def remember(value: int) -> None:
    SEEN.append(value)


#: What ``__getattr__`` makes up attributes from.
_LAZY: dict[str, list[int]] = {"lazy_seen": []}


def __getattr__(name: str) -> list[int]:
    """Attributes made up on access (PEP 562), as a lazily loading module makes them."""
    if name in _LAZY:
        return _LAZY[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
