"""The libraries' own threads while ``batched`` runs samples on workers.

BLAS, OpenMP and torch's intra-op pool each start a thread per core. Two workers each
calling an SVD that uses every core run four threads on two cores, and each waits for the
others: capped to ``cores // workers`` threads each, they share the cores instead. BLAS and
OpenMP are capped through threadpoolctl (an optional dependency, the ``autoconvert[threads]``
extra), torch's pool through ``torch.set_num_threads``; both are put back when the map ends.
The caps are process-wide, as the libraries' thread counts are.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import sys
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
    """BLAS, OpenMP and torch's intra-op threads at most ``threads`` in this process while the
    block runs (None: as they are)."""
    if threads is None:
        yield
        return
    torch: Any = sys.modules.get("torch")  # a worker process may run NumPy alone
    before = torch.get_num_threads() if torch is not None else 0
    if before > threads:
        torch.set_num_threads(threads)
    try:
        with _blas_limited(threads):
            yield
    finally:
        if before > threads:
            torch.set_num_threads(before)


def _blas_limited(threads: int) -> Any:
    if not has_threadpoolctl():
        return contextlib.nullcontext()
    import threadpoolctl

    if _controller[1] != len(sys.modules):
        _controller[:] = [threadpoolctl.ThreadpoolController(), len(sys.modules)]
    return _controller[0].limit(limits=threads)
