"""Every option, declared once: its type, default, the decorators that take it, a line of
doc and its validator, as the fields of ``Policy`` (a side's conversion options) and of
``OpSettings``, ``BatchSettings`` and ``TorchifySettings`` (``numpy_op``'s, ``batched``'s and
``torchify``'s own).

From this one table come the decorators' keyword signatures (``shows_options``), validation
(``validate``), ``config()``'s keywords, the docs' options table, and the resolved options as
frozen records (``policy_of``, ``settings_of``), which is all the code below the fronts reads.
Options are checked once, when a decorator is applied or a ``config`` block is created,
never per call.
"""

from __future__ import annotations

import dataclasses
import inspect
import reprlib
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, TypedDict, TypeVar

import torch

from . import _checks as checks
from ._checks import (
    ARRAY_MODULES,
    COMPILE_MODES,
    GRAD_MODES,
    TRANSFER_POLICIES,
    VMAP_MODES,
    ArrayModule,
    Compile,
    DeviceLike,
    DtypeLike,
    Fake,
    Grad,
    Names,
    Native,
    Residuals,
    Rule,
    Seed,
    Sparse,
    Transfers,
    Vmap,
)

#: The decorators and functions that take options, in the order the docs list them.
#: ``config`` takes every option that is not about one function's parameters.
TAKERS = (
    "accepts_numpy",
    "returns_tensor",
    "accepts_tensor",
    "returns_numpy",
    "adapt",
    "torchify",
    "numpy_op",
    "batched",
    "to_numpy",
    "to_tensor",
    "config",
)


#: Who takes the options every converting taker takes (``"all"``): all but ``batched``, whose
#: batches are the containers (``nested``) and whose call's parameters are its samples' (``only``).
_CONVERTING_TAKERS = tuple(t for t in TAKERS if t != "batched")


def _option(
    default: Any,
    takers: str,
    doc: str,
    check: Callable[[Any], Any],
    *,
    accepts: Any = None,
    defaults: Mapping[str, Any] | None = None,
) -> Any:
    """One option of the table: a field of ``Policy`` or a taker's own settings (``OpSettings``...)
    (see ``TABLES``), its ``check`` one of _checks'. ``takers`` names who takes it (``"all"``:
    every converting taker); ``accepts`` is the type a signature shows when it is wider than the
    resolved value's; ``defaults`` are takers' own defaults where they differ."""
    named = tuple(name for taker in takers.split() for name in (_CONVERTING_TAKERS if taker == "all" else (taker,)))
    unknown = set(named) - set(TAKERS)
    assert not unknown, unknown
    metadata = {"takers": named, "doc": doc, "check": check, "accepts": accepts, "defaults": defaults or {}}
    return dataclasses.field(default=default, metadata=metadata)


#: What builds an accepts_numpy + returns_tensor pair takes its sides' options (batched: the pair
#: each batch is converted with).
_PAIRS = "torchify numpy_op batched"


@dataclasses.dataclass(frozen=True, slots=True)
class Policy:
    """One side's options, resolved: the decorator's own, else the active ``config``
    block's, else the table's defaults. Built once per plan and per ``config`` variant."""

    device: torch.device | None = _option(
        None,
        f"returns_tensor accepts_tensor adapt {_PAIRS} to_tensor config",
        "where tensors go; None: the device of the call's tensors (torch's default without any)",
        checks.device,
        accepts=DeviceLike,
    )
    dtype: torch.dtype | Literal["input"] | None = _option(
        None,
        f"returns_tensor accepts_tensor {_PAIRS} to_tensor config",
        "a torch.dtype or 'input' casts floating results; None keeps NumPy's dtype",
        checks.dtype,
        accepts=DtypeLike,
    )
    copy: bool | None = _option(
        None, "all batched", "None: copy only when needed; True: always; False: never (CopyError)", checks.copy_mode
    )
    writeback: bool = _option(
        False,
        f"accepts_numpy adapt {_PAIRS} config",
        "hand writable arrays and copy the function's writes back into the caller's tensors",
        checks.flag,
    )
    grad: Grad = _option(
        "warn",
        f"accepts_numpy adapt {_PAIRS} to_numpy config",
        "a tensor that requires grad: 'warn' once per function, 'detach' silently, or 'error'",
        checks.one_of(GRAD_MODES),
        defaults={"to_numpy": "detach"},
    )
    only: frozenset[str] | None = _option(
        None, "accepts_numpy accepts_tensor", "the parameter names to convert", checks.names, accepts=Names
    )
    exclude: frozenset[str] | None = _option(
        None, "accepts_numpy accepts_tensor", "the parameter names to leave alone", checks.names, accepts=Names
    )
    nested: bool = _option(True, "all", "look inside containers; False: top-level values only", checks.flag)
    sparse: Sparse = _option(
        "array",
        f"accepts_numpy returns_numpy adapt {_PAIRS} to_numpy config",
        "sparse tensors become scipy.sparse arrays ('array') or spmatrix ('matrix')",
        checks.sparse_kind,
    )
    sparse_layout: torch.layout | None = _option(
        None,
        f"returns_tensor accepts_tensor {_PAIRS} to_tensor config",
        "the layout of tensors made from scipy.sparse; None: as the SciPy format",
        checks.sparse_layout,
    )
    widen_float16: bool = _option(
        False,
        f"accepts_numpy adapt {_PAIRS} config",
        "hand float16 tensors over as float32, for code that rejects float16 (on for SciPy's, torchified)",
        checks.flag,
    )
    check_writes: bool = _option(
        False,
        f"accepts_numpy adapt {_PAIRS} config",
        "compare each CPU tensor argument after the call; undo and raise ReadOnlyError on a write",
        checks.flag,
    )
    transfers: Transfers = _option(
        "allow",
        f"accepts_numpy returns_tensor accepts_tensor returns_numpy adapt {_PAIRS} config",
        "copies between devices: 'allow', 'log', 'warn' (TransferWarning) or 'error' (TransferError)",
        checks.one_of(TRANSFER_POLICIES),
    )
    callbacks: bool = _option(
        False,
        f"accepts_numpy {_PAIRS} config",
        "callables among the arguments are torch code: NumPy code calling them hands them tensors",
        checks.flag,
    )
    compile: Compile = _option(
        "auto",
        "accepts_numpy adapt torchify",
        "under torch.compile: 'auto' traces NumPy-only code into the graph, 'trace' always, 'escape' never",
        checks.one_of(COMPILE_MODES),
    )
    out_params: tuple[str, ...] = _option(
        (),
        "accepts_numpy torchify",
        "the parameters the function writes its results into: handed over writable",
        checks.out_params,
        accepts=str | Iterable[str],
        defaults={"torchify": ("out", "output")},
    )

    def retries_with_copies(self) -> bool:
        """Whether a call whose library rejected read-only arrays is made again with writable copies (a
        torchified function's guard): with ``copy=None``, NumPy 2's "copy when needed"
        (``copy=False`` keeps the ReadOnlyError, ``writeback=True`` hands writable arrays)."""
        return self.copy is None and not self.writeback


@dataclasses.dataclass(frozen=True, slots=True)
class OpSettings:
    """``numpy_op``'s own options, resolved: how the op is differentiated, traced and batched."""

    backward: Rule = _option(
        None,
        "numpy_op",
        "backward(grad, *args, output=output, **kwargs) as arrays: the op's gradients",
        checks.rule("backward", "grad"),
    )
    fake: Fake | None = _option(
        None,
        "numpy_op",
        "what results look like (a parameter's name, names, or a function): a registered op",
        checks.fake,
    )
    vmap: Vmap = _option(
        "sequential",
        "numpy_op",
        "under torch.vmap: 'sequential' (per sample) or 'vectorized' (the batch at once)",
        checks.one_of(VMAP_MODES),
    )
    jvp: Rule = _option(
        None,
        "numpy_op",
        "jvp(tangent, *args, output=output, **kwargs) as arrays: forward-mode gradients",
        checks.rule("jvp", "tangent"),
    )
    residuals: tuple[str, ...] = _option(
        (),
        "numpy_op",
        "names of arrays the function returns after its results, handed to backward and jvp by keyword",
        checks.residuals,
        accepts=Residuals,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class BatchSettings:
    """``batched``'s own options, resolved: where and how the samples run."""

    workers: int | None = _option(
        None, "batched", "run samples on a pool of this many threads", checks.count("threads")
    )
    executor: Any = _option(
        None,
        "batched",
        "run samples on an Executor, a multiprocessing pool, a Dask client or Ray instead",
        checks.executor,
    )
    chunksize: int | None = _option(
        None, "batched", "samples per task; None: about four per worker", checks.count("samples")
    )
    progress: bool = _option(False, "batched", "show a tqdm progress bar over the samples", checks.flag)
    threads_per_worker: int | None = _option(
        None,
        "batched",
        "cap BLAS and OpenMP threads per worker (threadpoolctl); None: cores shared out",
        checks.count("threads"),
    )
    seed: Seed = _option(
        None, "batched", "seed each sample's own stream (its rng=, and the global generators)", checks.seed
    )
    in_caller: bool = _option(
        True, "batched", "run a batch too short to pay for threads or an executor in the caller's thread", checks.flag
    )


@dataclasses.dataclass(frozen=True, slots=True)
class TorchifySettings:
    """``torchify``'s own options, resolved: which path a module's functions take."""

    native: Native = _option(
        "auto",
        "torchify",
        "SciPy's own torch path, tensors as they are: 'auto' (where it has one), True, or False",
        checks.native,
    )
    array_module: ArrayModule = _option(
        "auto",
        "torchify",
        "CUDA tensors' calls on CuPy: 'auto' (where it mirrors the function), 'numpy' (never), 'cupy'",
        checks.one_of(ARRAY_MODULES),
    )


#: The tables, in the docs' order: a side's options, then each taker's own.
TABLES = (Policy, OpSettings, BatchSettings, TorchifySettings)
Settings = TypeVar("Settings", OpSettings, BatchSettings, TorchifySettings)


class Option(typing.NamedTuple):
    """A row of the table, as the docs list it."""

    name: str
    accepts: Any  # the type a signature shows
    takers: tuple[str, ...]
    doc: str
    check: Callable[[Any], Any]
    defaults: Mapping[str, Any]  # taker -> its default

    def default(self, taker: str) -> Any:
        return self.defaults[taker]


def _rows() -> tuple[Option, ...]:
    rows = []
    for table in TABLES:
        hints = typing.get_type_hints(table)
        for f in dataclasses.fields(table):
            m = f.metadata
            defaults = {taker: m["defaults"].get(taker, f.default) for taker in m["takers"]}
            rows.append(Option(f.name, m["accepts"] or hints[f.name], m["takers"], m["doc"], m["check"], defaults))
    return tuple(rows)


#: The table, in signature order.
OPTIONS = _rows()
#: Each taker's option names and defaults, in signature order.
DEFAULTS: dict[str, dict[str, Any]] = {
    taker: {o.name: o.default(taker) for o in OPTIONS if taker in o.takers} for taker in TAKERS
}
#: The options of a fused pair's input side and output side.
INPUT_SIDE = frozenset(DEFAULTS["accepts_numpy"])
OUTPUT_SIDE = frozenset(DEFAULTS["returns_tensor"])
#: Each taker's defaults of the options a side's ``Policy`` holds.
_SIDE_DEFAULTS = {
    taker: {name: default for name, default in DEFAULTS[taker].items() if name in Policy.__dataclass_fields__}
    for taker in TAKERS
}
#: Where ``torchify``'s defaults differ from its sides' (``out_params``): what it hands them.
PAIR_DEFAULTS = {
    name: default
    for name, default in _SIDE_DEFAULTS["torchify"].items()
    if default != {**DEFAULTS["returns_tensor"], **DEFAULTS["accepts_numpy"]}[name]
}
_CHECKS = {o.name: o.check for o in OPTIONS}


def validate(options: Mapping[str, Any], taker: str) -> dict[str, Any]:
    """``options`` given to ``taker``, checked and normalised; unknown names and bad values
    raise ``TypeError``/``ValueError`` naming the taker and the option."""
    allowed = DEFAULTS[taker]
    where = f"autoconvert.{taker}()"
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise TypeError(f"{where} got unknown option(s) {', '.join(unknown)}; it takes {', '.join(sorted(allowed))}")
    checked = {}
    for name, value in options.items():
        try:
            checked[name] = _CHECKS[name](value)
        except (TypeError, ValueError) as e:
            raise type(e)(f"{where}: {name}= {e}") from None
    return checked


def policy_of(taker: str, configured: Mapping[str, Any], explicit: Mapping[str, Any]) -> Policy:
    """``taker``'s policy: its ``explicit`` options over a ``config`` block's (those it takes)
    over its defaults. Options it does not take keep the table's inert defaults."""
    defaults = _SIDE_DEFAULTS[taker]
    return Policy(**{**defaults, **{k: v for k, v in configured.items() if k in defaults}, **explicit})


#: The policy of a side that was given no options, and no ``config`` applies to.
DEFAULT_POLICY = Policy()


@dataclasses.dataclass(frozen=True, slots=True)
class GivesWay:
    """A place in a product or route whose own way gives way to the options that act on the
    caller's tensors past the function's own arrays (``features``): what it says where it
    refuses them (``error``, ``words`` a format string of the place's names), or only says
    (``error`` None: ``words`` for its messages, if any)."""

    features: tuple[str, ...]
    error: type[Exception] | None = None
    words: str = ""

    def named(self, suffix: str = "") -> str:
        """Its features as messages name them, each with ``suffix`` ("=True")."""
        return " and ".join(feature + suffix for feature in self.features)


#: Every place that gives way to writeback (what the function writes reaches the caller's
#: tensors), check_writes (the caller's tensors compared after the call) or out-parameters:
#: place -> what it gives way to, and its words. Products and routes ask ``gives_way`` and
#: ``reject_given`` by place, so that where a feature acts is read here, in one table.
AFTER_CALL: dict[str, GivesWay] = {
    # Its samples are copies in other processes.
    "batched's executors": GivesWay(
        ("writeback", "out_params"),
        ValueError,
        "autoconvert.batched({name}): {name} writes into its arguments (writeback=True or out_params{source}), "
        "and on an executor it runs in other processes, whose writes cannot reach the caller's tensors. "
        "Fix: run it on threads (workers=), or return what it computes",
    ),
    "numpy_op's backward": GivesWay(
        ("writeback",),
        TypeError,
        "autoconvert.numpy_op(): {name} has a backward, so it cannot write into its arguments "
        "(autograd has no formula for that); drop writeback=True or backward=",
    ),
    # Its body runs as it is iterated, after the after steps (see _spec._signature).
    "generator functions": GivesWay(
        ("writeback", "check_writes"),
        TypeError,
        "autoconvert.{sides} on {function}: it is a generator function, whose body runs "
        "as it is iterated, after the call returns, so writeback=True and check_writes=True would run "
        "before its writes (what it yields is converted as it comes). Fix: drop writeback= and "
        "check_writes=, or decorate the plain function holding the NumPy code and call that from it",
    ),
    # CuPy's results stay where its arguments are, and nothing is written back: the host path.
    "CuPy's path": GivesWay(("writeback", "check_writes")),
    # The native route hands copies to a library's calls that write into their tensors.
    "the native route's copies": GivesWay(
        ("writeback",), words="writeback=True lets the library write into the caller's tensors"
    ),
    # A catalogue rule or builder has no gradient formula for writes into the arguments.
    "the gradient catalogue": GivesWay(("writeback",)),
    # numpy_op's op is registered as mutating the arguments it writes through.
    "numpy_op's pure op": GivesWay(("writeback",)),
    # A cast copy could not be written back.
    "adapt's dtype casts": GivesWay(("writeback",)),
    # A traced call's arguments are the caller's tensors themselves.
    "trace's private copies": GivesWay(("writeback",)),
    "explain's read-only arrays": GivesWay(("writeback",)),
}


def gives_way(place: str, options: Policy | Mapping[str, Any]) -> bool:
    """Whether ``place`` (see AFTER_CALL) gives way under ``options``: a side's policy, or a
    product's checked options."""
    if isinstance(options, Policy):
        return any(getattr(options, feature) for feature in AFTER_CALL[place].features)
    return any(options.get(feature) for feature in AFTER_CALL[place].features)


def reject_given(place: str, options: Policy | Mapping[str, Any], **names: str) -> None:
    """Raise ``place``'s rejection of the options (see AFTER_CALL), its words filled with
    ``names``, where it gives way under ``options``."""
    if gives_way(place, options):
        refusal = AFTER_CALL[place]
        assert refusal.error is not None
        raise refusal.error(refusal.words.format(**names))


def settings_of(table: type[Settings], checked: Mapping[str, Any]) -> tuple[Settings, dict[str, Any]]:
    """A taker's ``checked`` options (see ``validate``) split: its own, resolved as ``table``,
    and the rest, the options its sides take (as given: a plan's recipe)."""
    own = table.__dataclass_fields__
    return table(**{k: v for k, v in checked.items() if k in own}), {k: v for k, v in checked.items() if k not in own}


def shows_options(function: Any, leading: list[inspect.Parameter], *takers: str) -> None:
    """Give ``function`` (taking options as ``**options``) the signature ``help()``,
    ``inspect.signature``, editors and the API pages show: ``leading``, then each option of
    ``takers`` keyword-only, with its type and default: a taker's own options first."""
    parameters = list(leading)
    named = {p.name for p in leading}
    for o in sorted(OPTIONS, key=lambda o: len(o.takers) > 1):
        taker = next((t for t in takers if t in o.takers), None)
        if taker is not None and o.name not in named:
            kind = inspect.Parameter.KEYWORD_ONLY
            parameters.append(inspect.Parameter(o.name, kind, default=o.default(taker), annotation=o.accepts))
    function.__signature__ = inspect.Signature(parameters, return_annotation=inspect.Signature.empty)


#: The leading parameter of a decorator used bare or called: ``func`` (positional-only, optional).
FUNC = inspect.Parameter("func", inspect.Parameter.POSITIONAL_ONLY, default=None)


def check_callable(func: object, decorator: str) -> None:
    """A decorator's positional argument is the function (or a descriptor of one, such as a
    classmethod): anything else (``@accepts_numpy("x")`` meaning ``only="x"``) would be wrapped
    as if callable and fail at the first call."""
    if not callable(func) and not hasattr(type(func), "__get__"):
        raise TypeError(
            f"autoconvert.{decorator}() decorates a function or other callable; got {reprlib.repr(func)} "
            f"({type(func).__name__}). Fix: decorate the function itself, and pass options by keyword: "
            f"@{decorator}(option=value)."
        )


class _ConvertingOptions(TypedDict, total=False):
    """The options every converting product of a function takes, for type checkers."""

    device: DeviceLike
    copy: bool | None
    writeback: bool
    grad: Grad
    nested: bool
    sparse: Sparse
    widen_float16: bool
    check_writes: bool
    transfers: Transfers


class AdaptOptions(_ConvertingOptions, total=False):
    """The options of ``adapt``, for type checkers (``**options: Unpack[AdaptOptions]``)."""

    compile: Compile


class OpOptions(_ConvertingOptions, total=False):
    """The options of ``numpy_op``: ``adapt``'s, the result's dtype and sparse layout, and
    callbacks (an op's outputs are torch.library's to declare: no out-parameters)."""

    dtype: DtypeLike
    sparse_layout: torch.layout | None
    callbacks: bool


class BatchedOptions(TypedDict, total=False):
    """The options of ``batched``, for type checkers (``**options: Unpack[BatchedOptions]``): its
    own, and those of the pair each batch is converted with (no ``nested``, ``only``,
    ``exclude`` or ``out_params``: its batches and their samples are the arguments)."""

    device: DeviceLike
    dtype: DtypeLike
    copy: bool | None
    writeback: bool
    grad: Grad
    sparse: Sparse
    sparse_layout: torch.layout | None
    widen_float16: bool
    check_writes: bool
    transfers: Transfers
    callbacks: bool
    workers: int | None
    executor: Any
    chunksize: int | None
    progress: bool
    threads_per_worker: int | None
    seed: Seed
    in_caller: bool


class PairOptions(OpOptions, total=False):
    """The options of ``accepts_numpy`` and ``returns_tensor`` together, as ``torchify`` hands them on."""

    out_params: str | Iterable[str]
    compile: Compile


class TorchifyOptions(PairOptions, total=False):
    """The options of ``torchify``: a pair's, and its own."""

    native: Native
    array_module: ArrayModule
