"""array-api-compat's torch namespace (SciPy vendors one: what ``array_namespace(t)`` gives)."""

from __future__ import annotations

import importlib
import types
from typing import Any

from ._adapter import Adapter, module_of


class ArrayApiCompat(Adapter):
    name = "array-api-compat's torch namespace"

    def claims(self, value: Any) -> bool:
        return ".array_api_compat.torch." in f".{module_of(value)}."

    def written_in_torch(self, fn: Any) -> bool:
        return True  # xp.mean in SciPy's torch-backend code

    def is_torch(self, module: types.ModuleType) -> bool:
        return True

    def array_namespace(self, module: types.ModuleType) -> types.ModuleType | None:
        """The same package's NumPy namespace."""
        name = module.__name__
        return importlib.import_module(name.removesuffix("torch") + "numpy") if name.endswith(".torch") else None
