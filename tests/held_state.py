"""A module of state that functions of other modules change: another module's globals."""

from __future__ import annotations

SEEN: list[int] = []


def remember(value: int) -> None:
    SEEN.append(value)
