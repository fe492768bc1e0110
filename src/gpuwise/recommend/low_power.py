"""Low-power inference: does a slot-powered card (the T4/L4 class, within the PCIe slot's 75 W) serve the request
more efficiently per watt than the best bigger card at the same latency target, and if not, why not."""

from __future__ import annotations

from collections.abc import Sequence

from gpuwise.catalog import Catalog
from gpuwise.estimate import constants as C
from gpuwise.recommend.engine import Option, Rejected
from gpuwise.recommend.request import Request, Workload
from gpuwise.workload.jobs.hpc import HpcJob
from gpuwise.workload.jobs.job import TrainJob

_UNINFORMATIVE = ("offer", "count", "budget")  # no price, sold in boards, over budget: not the card's speed


def slot_powered(catalog: Catalog, gpu_id: str) -> bool:
    """A PCIe card that needs no power cable: within the x16 slot's 75 W (T4 70 W, L4 72 W)."""
    gpu = catalog.gpus[gpu_id]
    return gpu.form_factor == "pcie" and gpu.tdp_w <= C.SLOT_POWER_W.value


def needed_rate(request: Request) -> float | None:
    """The request rate one serving workload must sustain; None when a request has no single rate to meet."""
    rates = [w.qps for w in request.workloads]
    return rates[0] if len(rates) == 1 and rates[0] else None


def delivered_per_watt(option: Option, needed: float | None) -> float:
    """Work per watt at the wall of what the load uses: capacity beyond ``needed`` draws power but serves nobody,
    so for a rate target the ranking is the least power that meets it."""
    delivered = min(option.throughput, needed) if needed else option.throughput
    return delivered / max(option.wall_kw * 1e3, 1e-9)


def per_watt_text(option: Option, needed: float | None) -> str:
    """'1.66 QPS per W at the wall (301 W for 500 QPS, capacity 770)': the perf-per-watt objective's figure."""
    unit = "QPS" if option.fit.qps_capacity is not None else "work/s" if option.fit.work_per_s else "tokens/s"
    watts = option.wall_kw * 1e3
    load = (f" for {needed:,.4g} {unit}, capacity {option.throughput:,.4g}" if needed and option.throughput > needed
            else "")
    return f"{delivered_per_watt(option, needed):,.3g} {unit} per W at the wall ({watts:,.0f} W{load})"


def _serving(workload: Workload) -> bool:
    return not isinstance(workload.job, (TrainJob, HpcJob)) and workload.task == "infer"


def _target(request: Request) -> str:
    """'500 QPS within P99 50 ms of resnet-50', 'the most QPS within P99 TTFT <= 30 ms of yolov8s'."""
    parts = []
    for w in request.workloads:
        rate = f"{w.qps:,.4g} QPS" if w.qps else "the most QPS"
        only_e2e = w.e2e_p99_ms is not None and len(w.slos.targets_ms) == 1
        within = f"P99 {w.e2e_p99_ms:,.4g} ms" if only_e2e else w.slos.text()  # end-to-end: the one said plainly
        parts.append(rate + (f" within {within}" if w.slos else " at 80% of saturation") + f" of {w.model}")
    return "; ".join(parts)


def _no_low_power(request: Request, rejected: Sequence[Rejected], catalog: Catalog) -> str:
    """Why no 75 W card is among the options: the closest rejection that speaks of the card's speed or memory."""
    telling = sorted((r for r in rejected if slot_powered(catalog, r.gpu) and r.code not in _UNINFORMATIVE),
                     key=lambda r: r.gap)
    if not telling:
        return (f"no slot-powered ({C.SLOT_POWER_W.value:g} W) card is offered or priced for {_target(request)}; "
                "a T4/L4 needs a price (--catalog) or a cloud offer to be compared")
    r = telling[0]
    return (f"no slot-powered ({C.SLOT_POWER_W.value:g} W) card meets {_target(request)}: {r.count} x {r.gpu} "
            f"({r.code}): {r.reason}")


def compared(request: Request, options: Sequence[Option], catalog: Catalog) -> tuple[Option | None, Option | None]:
    """The two options a per-watt finding compares: the best slot-powered (T4/L4-class) one and the best bigger
    card; (None, None) when the request is not serving ranked per watt."""
    if request.objective != "perf-per-watt" or not all(_serving(w) for w in request.workloads):
        return None, None
    needed = needed_rate(request)

    def per_watt(option: Option) -> float:
        return delivered_per_watt(option, needed)

    return (max((o for o in options if slot_powered(catalog, o.gpu)), key=per_watt, default=None),
            max((o for o in options if not slot_powered(catalog, o.gpu)), key=per_watt, default=None))


def low_power_finding(request: Request, options: Sequence[Option], rejected: Sequence[Rejected],
                      catalog: Catalog) -> str | None:
    """For a serving request ranked per watt: whether the best T4/L4-class option beats the best bigger card."""
    if request.objective != "perf-per-watt" or not all(_serving(w) for w in request.workloads):
        return None
    needed = needed_rate(request)
    low, big = compared(request, options, catalog)
    if low is None:
        return _no_low_power(request, rejected, catalog)
    if big is None:
        return (f"only slot-powered cards meet {_target(request)}: {low.count} x {low.gpu}, "
                f"{per_watt_text(low, needed)}")
    ratio = delivered_per_watt(low, needed) / delivered_per_watt(big, needed)
    verdict = (f"the {C.SLOT_POWER_W.value:g} W class wins per watt by {ratio:.2f}x" if ratio >= 1 else
               f"the bigger card wins per watt by {1 / ratio:.2f}x")
    return (f"at {_target(request)}: {low.count} x {low.gpu} ({low.acquisition}), {per_watt_text(low, needed)}, "
            f"against {big.count} x {big.gpu} ({big.acquisition}), {per_watt_text(big, needed)}: {verdict}")
