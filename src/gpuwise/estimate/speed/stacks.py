"""Software maturity: how fast a stack other than CUDA runs, from what has been measured on it.

PyTorch work (training, diffusers) on a consumer or workstation card of a stack with no published end-to-end
measurement is cut by a stated discount (constants.UNMEASURED_STACK_DISCOUNT); a card the user calibrated with
`gpuwise bench --save`, and data-center cards (measured by MLPerf-class runs and MAMF), are not.

llama.cpp on a backend other than CUDA has its decode speed scaled by one published measurement of that backend
(estimate/speed/inference.py, ``decode_factor``): the decode model is built from CUDA's kernels and held to CUDA
measurements (benchmarks/). ROCm's and SYCL's kernels reach a different share of what the hardware allows, so for
each such stack one published llama-bench run (constants.LLAMACPP_DECODE_REFERENCE: the card, llama 7B Q4_0, tg128)
is set against the model's own figure for that very run; the ratio scales llama.cpp decode on the stack's consumer
and workstation cards. Data-center cards (MI300X) are not scaled: their decode at one sequence is bound by kernel
latency, which one consumer card does not measure. Other cards of a stack are the out-of-sample check: ROCm's
llama-bench runs on the Radeon Pro W7900 and the Ryzen AI Max+ 395, never used to set the scale
(benchmarks/data/public-measurements.yaml, B-llamacpp-llama7b-q4_0-tg128-w7900-rocm and -strixhalo-rocm, scored by
benchmarks/accuracy.py and held in tests/test_maturity.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuwise.catalog import GPU
from gpuwise.estimate import constants as C

if TYPE_CHECKING:
    from gpuwise.estimate.calibration import Calibration

def unmeasured_stack_factor(gpu: GPU, calibration: Calibration | None = None) -> float:
    """The speed factor of PyTorch work on ``gpu``'s stack: UNMEASURED_STACK_DISCOUNT where nothing end-to-end was
    published for this class of card, else 1.0."""
    if calibration is not None or gpu.segment == "datacenter" or gpu.software.stack not in C.UNMEASURED_STACKS:
        return 1.0
    return C.UNMEASURED_STACK_DISCOUNT.value


def unmeasured_stack_note(gpu: GPU, calibration: Calibration | None, work: str) -> tuple[str, ...]:
    factor = unmeasured_stack_factor(gpu, calibration)
    if factor == 1.0:
        return ()
    return (f"no published end-to-end {work} measurement for {gpu.software.stack} on {gpu.id}: the modelled speed "
            f"is cut to {factor:.0%} (gpuwise policy; `gpuwise bench --save` on the card replaces it)",)
