"""Software maturity: how fast a stack other than CUDA runs, from what has been measured on it.

PyTorch work (training, diffusers) on a consumer or workstation card of a stack with no published end-to-end
measurement is cut by a stated discount (constants.UNMEASURED_STACK_DISCOUNT); a card the user calibrated with
`gpuwise bench --save`, and data-center cards (measured by MLPerf-class runs and MAMF), are not.

llama.cpp on a backend other than CUDA: its decode speed scaled by one published measurement of that backend.

The decode model (perf.py) is built from CUDA's kernels and held to CUDA measurements (benchmarks/). ROCm's and
SYCL's kernels reach a different share of what the hardware allows, so for each such stack one published llama-bench
run (constants.LLAMACPP_DECODE_REFERENCE: the card, llama 7B Q4_0, tg128) is set against the model's own figure for
that very run; the ratio scales llama.cpp decode on the stack's consumer and workstation cards. Data-center cards
(MI300X) are not scaled: their decode at one sequence is bound by kernel latency, which one consumer card does not
measure. Other cards of a stack are the out-of-sample check (benchmarks/maturity.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuwise.catalog import GPU, Catalog
from gpuwise.estimate import constants as C

if TYPE_CHECKING:
    from gpuwise.estimate.roofline import Calibration

REFERENCE_MODEL, REFERENCE_QUANT = "llama-2-7b", "gguf-q4_k_m"  # llama 7B Q4_0 maps to q4_k_m (about 7% more bytes)


def decode_factor(gpu: GPU, engine: str, catalog: Catalog) -> float:
    """Measured / modelled decode speed of llama.cpp on ``gpu``'s stack; 1.0 where no reference applies."""
    if engine != "llamacpp" or gpu.segment == "datacenter":
        return 1.0
    reference = C.LLAMACPP_DECODE_REFERENCE.get(gpu.software.stack)
    if reference is None or reference[0] not in catalog.gpus:
        return 1.0
    card = catalog.gpus[reference[0]]
    key = (gpu.software.stack, card)  # the reference card's record: an override of it is a new reference
    if key not in _FACTORS:
        _FACTORS[key] = _factor(card, reference[1].value, catalog)
    return _FACTORS[key]


_FACTORS: dict[tuple[str, GPU], float] = {}  # one entry per stack and version of its reference card's record


def _factor(card: GPU, measured_tokens_per_s: float, catalog: Catalog) -> float:
    from gpuwise.estimate.perf import infer_perf
    from gpuwise.workload.job import InferJob
    from gpuwise.workload.resolve import resolve_model

    job = InferJob(engine="llamacpp", quant=REFERENCE_QUANT, batch=1, input_len=1, output_len=128)
    modelled = infer_perf(resolve_model(REFERENCE_MODEL), job, card, catalog, backend_scaled=False)
    assert modelled.decode_tokens_per_s
    return measured_tokens_per_s / modelled.decode_tokens_per_s


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
