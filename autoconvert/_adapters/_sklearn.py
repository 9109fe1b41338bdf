"""scikit-learn: which of its estimators and functions run on torch tensors themselves (its
array API dispatch, which needs SciPy's array API mode), read from scikit-learn, and that
dispatch switched on around a call only.

scikit-learn is imported here only when asked about a value that comes from it.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib
import inspect
import pathlib
from typing import Any

from ._adapter import Adapter, WritesArguments, copy_parameters
from ._scipy import array_api_mode

#: The tables of scikit-learn's tests that list the functions its array API tests run on
#: every namespace, device and dtype (torch's included): the only place it lists them.
_TABLE = "array_api_metric_checkers"


class ScikitLearn(Adapter):
    name = "scikit-learn"
    packages = ("sklearn",)
    switch_on = "set SCIPY_ARRAY_API=1 before SciPy and scikit-learn are imported"

    def torch_mode(self) -> str | None:
        """Why scikit-learn's torch path is off, in words (None: on): scikit-learn is asked
        whether it would switch its array API dispatch on (``config_context`` checks what it
        needs), SciPy whether its array API mode is on, which the dispatch needs and which SciPy
        reads when imported, not when scikit-learn checks."""
        dispatch_off = None
        try:
            with importlib.import_module("sklearn").config_context(array_api_dispatch=True):
                pass
        except TypeError:  # config_context(**an unknown option)
            return "this scikit-learn has no array API dispatch"
        except (ImportError, RuntimeError) as error:  # a SciPy too old; an array-api-compat missing
            dispatch_off = f"scikit-learn refuses its array API dispatch: {error}"
        if not array_api_mode():
            return (
                f"scikit-learn's array API dispatch needs SciPy's array API mode, which is off. Fix: {self.switch_on}"
            )
        return dispatch_off

    def declared_torch_path(self, fn: Any) -> str | None:
        """What scikit-learn declares of ``fn``: an estimator (a bound method answers for its
        estimator) by its tags' ``array_api_support``, a class by those of its instance made
        with default parameters (tags may depend on parameters: ask an instance for its own);
        a function by its array API tests' tables."""
        estimator = getattr(fn, "__self__", fn)
        if isinstance(estimator, type) and _has_tags(estimator):
            made = _made(estimator)
            if made is None:
                return (
                    f"scikit-learn declares array API support in each estimator's tags, and {estimator.__name__} "
                    "takes arguments to be made: ask of an instance"
                )
            return None if _supports(made) else f"{estimator.__name__}()'s tags declare no array API support"
        if _has_tags(estimator):
            return _estimator_path(estimator)
        if not inspect.isroutine(fn):
            return "scikit-learn declares array API support of estimators, in their tags, and of functions only"
        declared = _declared_functions()
        if declared is None:
            return "this scikit-learn ships no array API tests of its functions to read their support from"
        try:
            return None if fn in declared else "scikit-learn's array API tests of functions leave it out"
        except TypeError:  # an unhashable callable: never in the tables
            return "scikit-learn's array API tests of functions leave it out"

    def stores_arguments(self, cls: type) -> bool:
        """An estimator's constructor stores its parameters and nothing more (scikit-learn's
        rule for estimators; its ``fit`` validates them), a tensor ``alpha`` as a tensor."""
        return _has_tags(cls)

    def uncopied(self, fn: Any, owner: type | None = None) -> WritesArguments | None:
        """The calls of ``fn``, a method of the estimator class ``owner``, that write into the
        arrays or tensors they are handed: where the estimator is told not to copy, by the
        method's keyword (``transform(X, copy=False)``) or, where that leaves it to the
        estimator, by its parameter (``copy``, ``copy_X``, ``copy_x``, however set: made so,
        ``set_params``, assigned)."""
        names = getattr(owner, "_get_param_names", None)
        flags = [name for name in names() if name == "copy" or name.startswith("copy_")] if callable(names) else []
        if not flags:
            return super().uncopied(fn, owner)
        copies = copy_parameters(fn)

        def writes(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
            for copy in copies:
                said = copy.says_no_copy(args, kwargs)
                if said is not None:  # the keyword decides over the estimator's parameter
                    return said
            return any(_no_copy(getattr(args[0], flag, None)) for flag in flags)

        return writes

    def switched_on(self) -> contextlib.AbstractContextManager[Any]:
        """scikit-learn's array API dispatch on for a with block: ``config_context``, whose
        configuration is the thread's own, restored on leaving, however the block ends."""
        return importlib.import_module("sklearn").config_context(array_api_dispatch=True)  # type: ignore[no-any-return]


def _no_copy(value: Any) -> bool:
    """Whether a ``copy`` parameter's value tells the estimator not to copy (None: its default)."""
    return value is not None and not value


def _has_tags(value: Any) -> bool:
    """Whether ``value`` is an estimator or its class: tags as scikit-learn 1.6 and later
    declare them (``__sklearn_tags__``), or as earlier ones did (``_get_tags``)."""
    return hasattr(value, "__sklearn_tags__") or hasattr(value, "_get_tags")


def _supports(estimator: Any) -> bool:
    if hasattr(estimator, "__sklearn_tags__"):
        return bool(estimator.__sklearn_tags__().array_api_support)
    return bool(estimator._get_tags().get("array_api_support", False))


def _made(cls: type) -> Any:
    """An instance of the estimator class ``cls`` with default parameters, or None where it
    takes arguments (a meta-estimator's estimator, a pipeline's steps), is abstract, or reads
    its tags from an estimator it was not given."""
    try:
        made = cls()
        _supports(made)  # a meta-estimator made without its estimator has no tags (SelfTrainingClassifier)
    except (TypeError, AttributeError):
        return None
    return made


def _estimator_path(estimator: Any) -> str | None:
    if _supports(estimator):
        return None
    cls = type(estimator)
    made = _made(cls)
    if made is not None and _supports(made):
        defaults = made.get_params(deep=False)
        changed = [
            f"{k}={v!r}" for k, v in estimator.get_params(deep=False).items() if repr(v) != repr(defaults.get(k))
        ]
        return f"its tags declare no array API support with {', '.join(changed)}, where {cls.__name__}()'s do"
    return "its tags declare no array API support"


@functools.cache
def _declared_functions() -> frozenset[Any] | None:
    """The functions of the installed scikit-learn's array API tests' tables (metrics and
    pairwise functions, run there on torch among others), read from its test modules' source,
    never imported; None where it ships none."""
    root = pathlib.Path(importlib.import_module("sklearn").__file__ or "").parent
    found: set[Any] | None = None
    for path in sorted(root.glob("metrics/**/tests/test_*.py")):
        text = path.read_text(encoding="utf-8")
        if _TABLE in text:
            package = ".".join(("sklearn", *path.parent.relative_to(root).parts))
            found = (found or set()) | _listed(ast.parse(text), package)
    return None if found is None else frozenset(found)


def _listed(tree: ast.Module, package: str) -> set[Any]:
    """The functions a test module's table lists, by name or in a ``partial``, found where
    the module imports those names from."""
    imported = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(part for part in (base, node.module) if part)
            imported.update({alias.asname or alias.name: (module, alias.name) for alias in node.names})
    listed = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == [_TABLE]:
            for key in node.value.keys if isinstance(node.value, ast.Dict) else ():
                # partial(mean_tweedie_deviance, power=1.5) lists mean_tweedie_deviance
                named = key.args[0] if isinstance(key, ast.Call) and key.args else key
                if isinstance(named, ast.Name) and named.id in imported:
                    module, name = imported[named.id]
                    listed.add(getattr(importlib.import_module(module), name))
    return listed
