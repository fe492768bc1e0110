"""The records ``--calibration FILE`` reads: a `bench --save` record's measured rates, or a `validate --save` or
`calibrate --save` record's recalibrated mechanism, each checked against the card it is applied to.

``api.jobs`` (every command that takes --calibration) and ``api.validation`` (``validate --calibration``) both read
them here; neither imports the other for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gpuwise.catalog import GPU, Catalog
from gpuwise.errors import AmbiguousGPU, ConfigError, UnknownGPU
from gpuwise.estimate.calibration import Calibration
from gpuwise.workload.run_limits import beyond_datasheet

VALIDATE_KIND = "gpuwise-validate"
CALIBRATE_KIND = "gpuwise-calibration"
HOST_CPU = "host-cpu"  # the card a validate run on the CPU is predicted on: its rates measured then
CALIBRATION_ABOVE_PEAK = 1.25  # GeForce boost clocks run matmuls up to ~1.05x the spec; more is not this card
MAX_RECORD_BYTES = 200_000


class _Mechanism(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, allow_inf_nan=False)

    bound: str = Field(max_length=40)
    predicted_over_measured: float = Field(gt=0, le=1e4)
    # keyed by the dtype the prediction's matmuls ran in (the plan's matmul_dtype: fp4 for NVFP4/MXFP4 on Blackwell)
    gemm_tflops: dict[Literal["fp32", "tf32", "fp16", "bf16", "fp8", "int8", "fp4"], Annotated[
        float, Field(gt=0, le=1e5)]] | None = None
    memory_gb_s: float | None = Field(default=None, gt=0, le=1e5)
    host_op_s: float | None = Field(default=None, gt=0, le=1.0)
    not_applied: str | None = Field(default=None, max_length=2000)  # calibrate: why the rates apply to nothing


class _Record(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, allow_inf_nan=False)

    kind: Literal["gpuwise-validate", "gpuwise-calibration"]
    gpu: str = Field(min_length=1, max_length=100)
    job_class: str = Field(max_length=40)
    taken_at: str = Field(default="", max_length=40)
    calibration: _Mechanism


def read_validation(path: Path) -> dict[str, Any] | None:
    """A `validate --save` or `calibrate --save` record (validated), or None when the file is another kind of
    record (a `bench --save` one)."""
    from gpuwise.safe_io import parse_json, read_text

    data = parse_json(read_text(path, what="calibration", max_bytes=MAX_RECORD_BYTES), origin=str(path))
    if not isinstance(data, dict) or data.get("kind") not in (VALIDATE_KIND, CALIBRATE_KIND):
        return None
    try:
        return _Record.model_validate(data).model_dump()
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(record)"
        raise ConfigError(f"{path}: not a complete validate record (field {where!r}: {err['msg']}); write one with "
                          "`gpuwise validate ... --save FILE`") from None


def cards_named(name: str, catalog: Catalog) -> tuple[str, ...]:
    """The catalog ids a record's ``gpu`` may name: its id, or every variant a shared NVML name stands for (old
    records carry the device name, and NVML calls both H200 variants "NVIDIA H200")."""
    try:
        return (catalog.gpu(name).id,)
    except AmbiguousGPU as exc:
        return exc.candidates
    except UnknownGPU:
        return ()


def calibration_for(path: Path | str, card: GPU, catalog: Catalog) -> Calibration:
    """A `bench --save` record, or a `validate --save` record, as the roofline's rates, after checking it was
    measured on ``card`` and is a plausible measurement of it (no rate above 1.25x the card's datasheet peak)."""
    found = read_validation(Path(path))
    if found is not None:
        return _validated(path, found, card, catalog)
    from gpuwise.probe.bench import load_calibration

    record = load_calibration(Path(path))
    _same_card(path, record.gpu, card, catalog)
    _plausible(path, card, record.gemm_tflops, record.memory_gb_s)
    return Calibration(gemm_flops={k: v * 1e12 for k, v in record.gemm_tflops.items()},
                       memory_bytes_per_s=record.memory_gb_s * 1e9 if record.memory_gb_s else None,
                       source=f"bench record {Path(path).name}")


def _same_card(path: Path | str, measured_on: str, card: GPU, catalog: Catalog) -> None:
    candidates = cards_named(measured_on, catalog)
    if card.id not in candidates and measured_on != card.id:
        raise ConfigError(f"calibration {str(path)!r} was measured on {', '.join(candidates) or measured_on[:60]}, "
                          f"not {card.id}")


def _plausible(path: Path | str, card: GPU, gemm_tflops: Mapping[Any, float], memory_gb_s: float | None,
               above: float = CALIBRATION_ABOVE_PEAK) -> None:
    for what, rate, sheet in beyond_datasheet(card, gemm_tflops, memory_gb_s, above=above)[:1]:
        if what == "memory":
            raise ConfigError(f"calibration {str(path)!r}: {rate:,.3g} GB/s is not within 1%-{above:.0%} of "
                              f"{card.id}'s {sheet:,.0f} GB/s datasheet bandwidth")
        raise ConfigError(f"calibration {str(path)!r}: {what} {rate:,.3g} TFLOPS is not within 1%-{above:.0%} "
                          f"of {card.id}'s {sheet:,.1f} dense peak: not a measurement of this card")


def _validated(path: Path | str, record: Mapping[str, Any], card: GPU, catalog: Catalog) -> Calibration:
    """A validate run's recalibrated mechanism: its host seconds per operator, or its achieved matmul or memory
    rate, for the card it ran on."""
    _same_card(path, str(record["gpu"]), card, catalog)
    mechanism = record["calibration"]
    gemm = {str(k): float(v) for k, v in (mechanism.get("gemm_tflops") or {}).items()}
    memory = mechanism.get("memory_gb_s")
    if mechanism.get("not_applied"):  # calibrate found the run beyond the card's datasheet (workload/run_limits.py)
        raise ConfigError(f"calibration {str(path)!r} is not applied: {mechanism['not_applied']}")
    if card.id != HOST_CPU:  # a rate derived from served runs (calibrate) is held to the datasheet peak itself
        _plausible(path, card, gemm, memory, 1.0 if record["kind"] == CALIBRATE_KIND else CALIBRATION_ABOVE_PEAK)
    return Calibration(gemm_flops={k: v * 1e12 for k, v in gemm.items()},
                       memory_bytes_per_s=float(memory) * 1e9 if memory else None,
                       host_op_s=mechanism.get("host_op_s"),
                       source=f"{'validate run' if record['kind'] == VALIDATE_KIND else 'measured runs'} "
                              f"{Path(path).name} ({record.get('job_class')}"
                              + (f", {record['taken_at']})" if record.get("taken_at") else ")"))
