"""Catalog records and comparisons as rich tables and as JSON-ready values."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from gpuwise.api import GPU
from gpuwise.api.reporting import CloudOffer, Comparison, price_usd
from gpuwise.report.format import number, quantity, ratio
from gpuwise.report.narrow import Column, narrow_table, span, terminal_width


def gpu_json(gpu: GPU) -> dict[str, Any]:
    """The record as stored (datasheet units), dates as ISO strings."""
    return gpu.model_dump(mode="json")


def comparison_json(comparison: Comparison) -> dict[str, Any]:
    ids = [g.id for g in comparison.gpus]
    return {
        "gpus": ids,
        "baseline": ids[0],
        "rows": [
            {
                "key": row.key, "label": row.label, "unit": row.unit, "derived": row.derived,
                "higher_is_better": row.higher_is_better,
                "values": dict(zip(ids, row.values, strict=True)),
                "ratios": dict(zip(ids, row.ratios, strict=True)),
            }
            for row in comparison.rows
        ],
    }


GPU_LIST_COLUMNS = (Column("id", "left"), Column("vendor", "left"), Column("segment", "left"), Column("memory GB"),
                    Column("bandwidth GB/s"), Column("BF16 dense TFLOPS"), Column("FP8 dense TFLOPS"),
                    Column("TDP W"), Column("price USD"))
GPU_LIST_DROPS = ("vendor", "segment", "FP8 dense TFLOPS", "TDP W")  # first to go on a narrow terminal


def gpu_list_table(gpus: Sequence[GPU], *, sort: str | None = None) -> Table:
    """The GPUs, one row each; on a narrow terminal the vendor, segment, FP8 and TDP columns leave before any
    figure is cut (``catalog list --json`` keeps every field)."""
    rows = [(g.id, g.vendor, g.segment, number(g.memory_gb), number(g.memory_bandwidth_gb_s),
             number(g.bf16_dense_tflops), number(g.fp8_dense_tflops), number(g.tdp_w), number(price_usd(g)))
            for g in gpus]
    return narrow_table(f"{len(gpus)} GPUs" + (f", sorted by {sort}" if sort else ""), GPU_LIST_COLUMNS, rows,
                        drop=GPU_LIST_DROPS)


def _spec_rows(gpu: GPU) -> list[tuple[str, str]]:
    s = gpu.software
    link = f"{gpu.scale_up_link} {number(gpu.scale_up_gb_s)} GB/s" if gpu.scale_up_link else "none"
    rows = [
        ("vendor / segment", f"{gpu.vendor} / {gpu.segment}"),
        ("architecture", gpu.architecture + (f" (sm_{gpu.compute_capability.replace('.', '')})"
                                             if gpu.compute_capability else "")),
        ("launch year", str(gpu.launch_year)),
        ("memory", f"{number(gpu.memory_gb)} GB {gpu.memory_type}, {number(gpu.memory_bandwidth_gb_s)} GB/s"
                   f", ECC {'yes' if gpu.ecc else 'no'}"),
        ("FP64 / FP32", f"{number(gpu.fp64_tflops)} / {number(gpu.fp32_tflops)} TFLOPS (non-tensor)"),
        ("TF32 dense", quantity(gpu.tf32_dense_tflops, "TFLOPS")),
        ("FP16 / BF16 dense", f"{number(gpu.fp16_dense_tflops)} / {number(gpu.bf16_dense_tflops)} TFLOPS"
                              " (FP32 accumulate)"),
        ("FP16 / FP8 dense, FP16 acc.", f"{number(gpu.fp16_fp16acc_dense_tflops)} / "
                                        f"{number(gpu.fp8_fp16acc_dense_tflops)} TFLOPS (GeForce double rate)"),
        ("FP8 dense", quantity(gpu.fp8_dense_tflops, "TFLOPS") + " (FP32 accumulate)"),
        ("INT8 dense", quantity(gpu.int8_dense_tops, "TOPS")),
        ("FP4 dense", quantity(gpu.fp4_dense_tflops, "TFLOPS")),
        ("dense from sparse", "yes: datasheet lists sparse figures, halved" if gpu.dense_from_sparse else "no"),
        ("power", f"{number(gpu.tdp_w)} W, connector {gpu.power_connector or 'none (baseboard)'}"),
        ("board", f"{gpu.form_factor}, {number(gpu.slot_width)} slot(s), {gpu.cooling} cooling"),
        ("host link", (f"PCIe gen{gpu.pcie_gen} x{gpu.pcie_lanes}" if gpu.pcie_gen else "none: on the CPU's package")
         + f"; peer-to-peer {'yes' if gpu.p2p else 'no'}"),
        ("unified memory", _unified(gpu)),
        ("scale-up link", link),
        ("MIG", f"up to {gpu.mig_max_instances} instances" if gpu.mig_max_instances else "no"),
        ("software", f"{s.stack}; bf16 {_yn(s.bf16)}, fp8 {_yn(s.fp8)}, FlashAttention-2 "
                     f"{_yn(s.flash_attention_2)}, bitsandbytes {_yn(s.bitsandbytes)}, vLLM {_yn(s.vllm)}"),
    ]
    if gpu.fp16_fp16acc_dense_tflops is None and gpu.fp8_fp16acc_dense_tflops is None:
        rows = [r for r in rows if "FP16 acc." not in r[0]]
    return rows


def _unified(gpu: GPU) -> str:
    u = gpu.unified_memory
    if u is None:
        return "no: dedicated memory"
    return (f"GPU may use {u.gpu_default_fraction:.0%} ({gpu.usable_memory_bytes / 2**30:,.0f} GiB) by default "
            f"({u.basis}); to raise it: {u.raise_with}")


def _yn(flag: bool) -> str:
    return "yes" if flag else "no"


def gpu_panel(gpu: GPU, offers: Sequence[CloudOffer] = ()) -> Panel:
    specs = Table.grid(padding=(0, 2))
    specs.add_column(style="bold")
    specs.add_column()
    for label, value in _spec_rows(gpu):
        specs.add_row(label, value)
    if gpu.price is not None:
        p = gpu.price
        specs.add_row("price", f"MSRP {number(p.msrp_usd)}, street {number(p.street_usd)}, used "
                               f"{number(p.used_usd)} USD (as of {p.as_of}; {p.source})")
    parts: list[Any] = [specs]
    if offers:
        table = Table(title="cloud offers (on demand, per GPU-hour)", title_justify="left")
        for header in ("provider", "tier", "instance", "GPUs", "USD/GPU-h", "as of"):
            table.add_column(header)
        for o in offers:
            table.add_row(o.provider, o.tier, escape(o.instance), str(o.gpus), f"{o.usd_per_gpu_hour:.2f}",
                          str(o.as_of))
        parts.append(table)
    sources = "\n".join(f"- {s.title}{f' ({s.table})' if s.table else ''}: {s.url}" for s in gpu.sources)
    parts.append(f"[bold]sources[/bold] (checked {gpu.as_of})\n{sources}")
    if gpu.notes:
        parts.append(f"[bold]notes[/bold] {gpu.notes}")
    return Panel(Group(*parts), title=f"{gpu.name} [dim]({gpu.id})[/dim]", title_align="left")


COMPARE_CAPTION = "* derived: per k$ uses the street price, else the MSRP. BF16/FP8 are dense, FP32 accumulate."


def comparison_table(comparison: Comparison, *, width: int | None = None) -> Group:
    """The GPUs side by side, ratios to the first in brackets; when they do not fit the terminal side by side they
    follow in several tables, as many GPUs to each as fit, every figure whole."""
    shown = [[_cell(v, r, baseline=i == 0) for i, (v, r) in enumerate(zip(row.values, row.ratios, strict=True))]
             for row in comparison.rows]
    labels = [row.label + (" *" if row.derived else "") for row in comparison.rows]
    widths = [max(len(g.id), *(len(Text.from_markup(row[i]).plain) for row in shown))
              for i, g in enumerate(comparison.gpus)]
    first = comparison.gpus[0].id
    parts = _groups(max(map(len, ["metric", *labels])), widths, width or terminal_width())
    tables = []
    for n, part in enumerate(parts):
        table = Table(title=f"{'(continued) ' if n else ''}ratios in brackets are to {first}", title_justify="left",
                      caption=COMPARE_CAPTION if n == len(parts) - 1 else None, caption_justify="left")
        table.add_column("metric", no_wrap=True)
        for i in part:
            table.add_column(comparison.gpus[i].id, justify="right", no_wrap=True, min_width=widths[i])
        for label, row in zip(labels, shown, strict=True):
            table.add_row(label, *(row[i] for i in part))
        tables.append(table)
    return Group(*tables)


def _groups(label_width: int, widths: list[int], limit: int) -> list[list[int]]:
    """The GPU columns in runs whose table (the metric column, then each GPU's) fits ``limit`` characters."""
    groups: list[list[int]] = [[]]
    columns = [label_width, *widths]  # the metric column first, then each GPU's
    for i in range(len(widths)):
        if groups[-1] and span(columns, [0, *(j + 1 for j in groups[-1]), i + 1]) > limit:
            groups.append([])
        groups[-1].append(i)
    return groups


def _cell(value: float | None, ratio_to_first: float | None, *, baseline: bool) -> str:
    if value is None or baseline or ratio_to_first is None:
        return number(value)
    return f"{number(value)} [dim]({ratio(ratio_to_first)})[/dim]"


def sync_lines(done: Any) -> str:
    """What a catalog sync wrote, what it could not place or skipped and why, and how the offers are dated (names
    from the files escaped: they are printed as written, never read as markup)."""
    where = f"wrote {escape(done.written)}" if done.written else "dry run: nothing written"
    lines = [f"{done.offers:,} GPU offers ({done.spot:,} spot) from {len(done.files)} file(s); {where}"]
    lines += [f"  {provider}: {n:,}" for provider, n in sorted(done.by_provider.items())]
    if done.as_of:
        lines.append(f"dated {done.as_of[0]}" + (f" to {done.as_of[-1]}" if len(done.as_of) > 1 else ""))
    if done.folded_rows:
        lines.append(f"{done.folded_rows:,} offer(s) of other zones folded into their region's cheapest")
    if done.unmapped:
        lines.append(f"not in the catalog ({sum(done.unmapped.values()):,} rows; add the GPU with --catalog FILE to "
                     "use them):")
        lines += [f"  {escape(name)}: {n:,} row(s)" for name, n in list(done.unmapped.items())[:15]]
    if done.skipped_rows:
        lines.append(f"{done.skipped_rows:,} row(s) skipped:")
        lines += [f"  {escape(reason)}: {n:,}" for reason, n in done.skipped.items()]
    lines += [f"note: {escape(note)}" for note in done.notes]
    return "\n".join(lines)
