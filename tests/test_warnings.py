"""No warning from torch or NumPy leaks out of a conversion, in a fresh process where torch's
once-per-process warnings have not been spent yet."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


@pytest.mark.parametrize(
    "make",
    [
        "ac.returns_tensor(dtype=torch.complex32)(lambda: np.ones(2, np.complex64))()",
        "ac.to_tensor(np.ones(1, np.complex128), dtype=torch.float16)",  # complex results follow float16
        "ac.returns_tensor(ac.accepts_numpy(np.conj))(torch.ones(1, dtype=torch.complex32))",
    ],
)
def test_complex32_results_do_not_leak_torchs_experimental_warning(make: str) -> None:
    """Each in a fresh process: the first complex32 tensor made there is made by autoconvert."""
    code = f"""
import warnings
warnings.simplefilter("error")
import numpy as np, torch, autoconvert as ac
if "torch.ones(1, dtype=torch.complex32)" in {make!r}:  # the caller's own complex32: its warning is theirs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.ones(1, dtype=torch.complex32)
assert ({make}).dtype == torch.complex32
"""
    subprocess.run([sys.executable, "-c", code], check=True)


def test_read_only_and_broadcast_results_do_not_trigger_torchs_not_writable_warning() -> None:
    code = textwrap.dedent(
        """
        import warnings
        warnings.simplefilter("error")
        import numpy as np, autoconvert as ac
        ro = np.ones(3); ro.setflags(write=False)
        ac.to_tensor([ro, np.broadcast_to(np.ones(1), (4,)), np.ones(3)[::-1], np.ones(2, ">f8")])
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_masked_tensor_result_copied_does_not_leak_torchs_prototype_warning() -> None:
    """returns_tensor(copy=True) of a MaskedTensor: its copy is a new MaskedTensor, which torch
    warns about at each construction; the caller's own one made under its own filter."""
    code = """
import warnings
warnings.simplefilter("error")
import torch, autoconvert as ac
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from torch.masked import masked_tensor
    mask = masked_tensor(torch.ones(3), torch.tensor([True, False, True]))
copied = ac.returns_tensor(copy=True)(lambda: mask)()
assert copied is not mask and type(copied) is type(mask)
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
