"""The settings of the hardware commands (doctor, bench, burn-in, monitor), each field the one definition of its
flag: type, range, default, help, which command takes it."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from gpuwise.workload.flags import Flag

_MEASURE = "Measurement"


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class DoctorSettings(_Settings):
    load_seconds: Annotated[float, Field(ge=0, le=60), Flag(frozenset({"doctor"}), _MEASURE)] = Field(
        default=2.0, description="seconds of matmul load while reading the PCIe link (0: idle)")


class BenchSettings(_Settings):
    device: Annotated[str, Field(pattern=r"^(cpu|cuda(:\d{1,3})?)$"), Flag(frozenset({"bench"}), _MEASURE)] = Field(
        default="cuda:0", description="torch device to measure: cuda:0, cuda:1 ... (cpu: only to try it)")
    quick: Annotated[bool, Flag(frozenset({"bench"}), _MEASURE)] = Field(
        default=False, description="smaller problems and fewer repeats (about 10 s)")
    gpu: Annotated[str | None, Field(max_length=100), Flag(frozenset({"bench"}), _MEASURE)] = Field(
        default=None, description="catalog id of the card (default: matched from the device name)")


class BurnInSettings(_Settings):
    minutes: Annotated[float, Field(gt=0, le=7 * 24 * 60), Flag(frozenset({"burn-in"}), _MEASURE)] = Field(
        default=10.0, description="how long to load the card")
    device: Annotated[int, Field(ge=0, le=255), Flag(frozenset({"burn-in"}), _MEASURE)] = Field(
        default=0, description="GPU index")


class MonitorSettings(_Settings):
    interval: Annotated[float, Field(gt=0, le=3600), Flag(frozenset({"monitor"}), _MEASURE)] = Field(
        default=1.0, description="seconds between readings")
    count: Annotated[int, Field(ge=0, le=10_000_000), Flag(frozenset({"monitor"}), _MEASURE)] = Field(
        default=0, description="stop after this many readings (0: until Ctrl-C)")
