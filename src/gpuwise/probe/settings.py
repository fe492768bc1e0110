"""The settings of the hardware commands (doctor, bench, burn-in, monitor), each field the one definition of its
flag: type, range, default, help, which command takes it."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from gpuwise.flags import Flag

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


_SERVE = "Server"


class ExporterSettings(_Settings):
    host: Annotated[str, Field(min_length=1, max_length=255, pattern=r"^[A-Za-z0-9.:\-\[\]]+$"),
                    Flag(frozenset({"exporter"}), _SERVE)] = Field(
        default="127.0.0.1", description="address to bind; 0.0.0.0 lets Prometheus on other machines scrape it "
                                         "(as the Kubernetes DaemonSet in deploy/ does)")
    port: Annotated[int, Field(ge=0, le=65535), Flag(frozenset({"exporter"}), _SERVE)] = Field(
        default=9835, description="TCP port of /metrics (dcgm-exporter uses 9400; 0: any free port, printed)")
    interval: Annotated[float, Field(ge=1, le=3600), Flag(frozenset({"exporter"}), _SERVE)] = Field(
        default=30.0, description="seconds a reading is reused between scrapes (dcgm-exporter collects every 30 s)")

    @property
    def loopback(self) -> bool:
        return self.host in ("127.0.0.1", "localhost", "::1", "[::1]")


class CollectiveSettings(_Settings):
    nproc: Annotated[int, Field(ge=2, le=64), Flag(frozenset({"bench-collective"}), _MEASURE)] = Field(
        default=2, description="processes on this node (one per GPU with nccl); torchrun's --nproc-per-node")
    backend: Annotated[Literal["nccl", "gloo"], Flag(frozenset({"bench-collective"}), _MEASURE)] = Field(
        default="nccl", description="nccl between GPUs, gloo on CPUs (no GPU needed: what CI runs)")
    size_mb: Annotated[float, Field(gt=0, le=8192), Flag(frozenset({"bench-collective"}), _MEASURE)] = Field(
        default=256.0, description="MiB of float32 each rank ends with (nccl-tests' size); large sizes measure "
                                   "bandwidth, small ones latency")
    iterations: Annotated[int, Field(ge=1, le=10_000), Flag(frozenset({"bench-collective"}), _MEASURE)] = Field(
        default=20, description="timed calls of each collective, after 3 warm-up calls")
    gpu: Annotated[str | None, Field(max_length=100), Flag(frozenset({"bench-collective"}), _MEASURE)] = Field(
        default=None, description="catalog id of the GPUs, to compare with their link (default: matched from the "
                                  "device name)")


class ValidateSettings(_Settings):
    device: Annotated[str, Field(pattern=r"^(cpu|cuda(:\d{1,3})?)$"), Flag(frozenset({"validate"}), _MEASURE)] = (
        Field(default="cuda:0", description="torch device to run on: cuda:0, cuda:1 ... or cpu (small models)"))
    steps: Annotated[int, Field(ge=1, le=1000), Flag(frozenset({"validate"}), _MEASURE)] = Field(
        default=5, description="timed steps (training steps, or generate calls), after the warm-up")
    warmup: Annotated[int, Field(ge=0, le=100), Flag(frozenset({"validate"}), _MEASURE)] = Field(
        default=2, description="untimed steps first (kernel selection, allocator growth, optimizer states)")
    time_limit_s: Annotated[float, Field(ge=1, le=86_400), Flag(frozenset({"validate"}), _MEASURE)] = Field(
        default=600.0, description="stop after this many seconds with the steps done so far")
    gpu: Annotated[str | None, Field(max_length=100), Flag(frozenset({"validate"}), _MEASURE)] = Field(
        default=None, description="catalog id of the card for the prediction (default: matched from the device)")
