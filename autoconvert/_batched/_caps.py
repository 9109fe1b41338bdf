"""The libraries' own threads while ``batched`` runs samples on workers.

BLAS, OpenMP and torch's intra-op pool each start a thread per core. Two workers each
calling an SVD that uses every core run four threads on two cores, and each waits for the
others: capped to ``cores // workers`` threads each, they share the cores instead. BLAS and
OpenMP are capped through threadpoolctl (an optional dependency, the ``autoconvert[threads]``
extra), torch's pool through ``torch.set_num_threads``; both are put back when the map ends.
The caps are process-wide, as the libraries' thread counts are, and only ever lower a count.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any

#: A ThreadpoolController per process, and how many modules were loaded when it was made:
#: making one lists the loaded libraries (about 2 ms), so it is made again only when an
#: import may have loaded another BLAS.
_controller: list[Any] = [None, -1]


@functools.cache
def has_threadpoolctl() -> bool:
    """Whether BLAS and OpenMP threads can be capped (threadpoolctl is installed)."""
    return "threadpoolctl" in sys.modules or importlib.util.find_spec("threadpoolctl") is not None


def per_worker(workers: int, cores: int | None = None) -> int:
    """Threads each worker's libraries get by default: the cores shared out, at least one."""
    return max(1, (cores or os.cpu_count() or 1) // max(1, workers))


@contextlib.contextmanager
def capped(threads: int | None) -> Iterator[None]:
    """BLAS, OpenMP and torch's intra-op threads at most ``threads`` while the block runs (None:
    as they are); a cap only ever lowers a count.

    BLAS's and torch's counts are process-wide and maps may overlap (two caller threads, a
    Dask worker's threads in the caller's process), so every open block is counted: each
    such library runs at the lowest cap open and gets its own count back when the last
    block closes. OpenMP's count is the calling thread's own, so each block sets and gives
    back the count of its own thread."""
    if threads is None:
        yield
        return
    with _lock:
        libraries = _libraries()
        own = {name: library.num_threads for name, library in libraries.items() if _per_thread(library)}
        _open_caps.append(threads)
        _apply(libraries)
    _set(libraries, {name: min(count, threads) for name, count in own.items()})
    try:
        yield
    finally:
        with _lock:
            _open_caps.remove(threads)
            _apply(_libraries())
        _set(libraries, own)  # after torch's, which sets this thread's OpenMP count too


#: The caps of the blocks open in this process, the counts each process-wide library had
#: before the first (by name), and the lock that keeps both in step with the libraries.
_open_caps: list[int] = []
_before: dict[str, int] = {}
_lock = threading.Lock()


def _apply(libraries: dict[str, Any]) -> None:
    """Each process-wide library at the lowest open cap, or at its count from before the first
    block once none is open (an import during a block may load another: its count is taken
    then). All counts are read before any is set: torch's sets OpenMP's too."""
    shared = {name: library for name, library in libraries.items() if not _per_thread(library)}
    counts = {name: library.num_threads for name, library in shared.items()}
    for name, count in counts.items():
        _before.setdefault(name, count)
    _set(shared, {name: min(_before[name], *_open_caps) if _open_caps else _before.pop(name) for name in shared})


def _set(libraries: dict[str, Any], counts: dict[str, int]) -> None:
    for name, count in counts.items():
        if libraries[name].num_threads != count:
            libraries[name].set_num_threads(count)


def _per_thread(library: Any) -> bool:
    """Whether a library's count is the calling thread's own: OpenMP's (an ICV of each thread)."""
    return getattr(library, "user_api", None) == "openmp"


def _libraries() -> dict[str, Any]:
    """What has a thread count to cap here, by name: threadpoolctl's controllers of the loaded
    BLAS and OpenMP libraries, torch's intra-op pool where torch is loaded (a worker may run
    NumPy alone)."""
    found: dict[str, Any] = {}
    if has_threadpoolctl():
        import threadpoolctl

        if _controller[1] != len(sys.modules):
            _controller[:] = [threadpoolctl.ThreadpoolController(), len(sys.modules)]
        found = {library.filepath: library for library in _controller[0].lib_controllers}
    if "torch" in sys.modules:
        found["torch"] = _TORCH
    return found


class _TorchThreads:
    """torch's intra-op pool as threadpoolctl's controllers are: a count read and set."""

    @property
    def num_threads(self) -> int:
        return int(sys.modules["torch"].get_num_threads())

    def set_num_threads(self, threads: int) -> None:
        sys.modules["torch"].set_num_threads(threads)


_TORCH = _TorchThreads()
