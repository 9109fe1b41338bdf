"""A Griffe extension for the API page: docstrings name a public object as ``CopyError``,
which ``help()`` shows as it is, and the site links it to the object's entry."""

from __future__ import annotations

import re
from typing import Any

import griffe

import autoconvert

_PUBLIC = re.compile(
    r"``(" + "|".join(re.escape(name) for name in sorted(autoconvert.__all__, key=len, reverse=True)) + r")``"
)


class PublicNameLinks(griffe.Extension):
    """Each ````name```` of a public object in a docstring becomes a link to it."""

    def on_instance(self, *, obj: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _PUBLIC.sub(r"[`\1`][autoconvert.\1]", obj.docstring.value)
