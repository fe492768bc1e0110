"""`gpuwise catalog ...`: list, show and compare the GPUs gpuwise knows, with their sources."""

from __future__ import annotations

from pathlib import Path

import typer

from gpuwise import api
from gpuwise.api.shell import FEATURES, SEGMENTS, VENDORS
from gpuwise.cli.output import guarded, print_json, stdout
from gpuwise.report.catalog import comparison_json, comparison_table, gpu_json, gpu_list_table, gpu_panel

CatalogOption = typer.Option(None, "--catalog", metavar="FILE", help="YAML file of GPU/offer records that add to or "
                             "patch the shipped catalog (repeatable).")
JsonOption = typer.Option(False, "--json", help="Print machine-readable JSON instead of tables.")


def catalog_files(files: list[Path] | None) -> tuple[Path, ...]:
    return tuple(files or ())


app = typer.Typer(
    help="Browse the GPU catalog: datasheet figures with their sources, prices with their dates.",
    no_args_is_help=True,
)


@app.command("list")
@guarded
def list_(
    vendor: str | None = typer.Option(None, help=f"Only this vendor: {', '.join(VENDORS)}."),
    segment: str | None = typer.Option(None, help=f"Only this segment: {', '.join(SEGMENTS)}."),
    min_memory: float | None = typer.Option(None, "--min-memory", metavar="GB", help="At least this much memory."),
    feature: list[str] | None = typer.Option(
        None, "--feature", help=f"Must have this feature (repeatable): {', '.join(FEATURES)}."
    ),
    sort: str | None = typer.Option(
        None, help="Sort by a numeric field, highest first, e.g. memory_gb, memory_bandwidth_gb_s, "
                   "bf16_dense_tflops, fp8_dense_tflops, tdp_w, price_usd."
    ),
    ascending: bool = typer.Option(False, "--ascending", help="Sort lowest first."),
    as_json: bool = JsonOption,
    catalog: list[Path] | None = CatalogOption,
) -> None:
    """List GPUs, filtered and sorted: `gpuwise catalog list --min-memory 48 --feature fp8 --sort price_usd`."""
    gpus = api.list_gpus(
        vendor=vendor, segment=segment, min_memory_gb=min_memory, features=feature or (),
        sort=sort, descending=not ascending, catalog_files=catalog_files(catalog),
    )
    if as_json:
        print_json([gpu_json(g) for g in gpus])
    else:
        stdout().print(gpu_list_table(gpus, sort=sort))


@app.command()
@guarded
def show(
    gpu: str = typer.Argument(..., help="Id, alias or loose name: h100-sxm-80gb, 'RTX 4090', 4090."),
    as_json: bool = JsonOption,
    catalog: list[Path] | None = CatalogOption,
) -> None:
    """Show every figure of one GPU with its sources, price date and cloud offers."""
    cat = api.load_catalog(catalog_files=catalog_files(catalog))
    record = cat.gpu(gpu)
    offers = cat.offers_for(record.id)
    if as_json:
        print_json({**gpu_json(record), "offers": [o.model_dump(mode="json") for o in offers]})
    else:
        stdout().print(gpu_panel(record, offers))


@app.command()
@guarded
def compare(
    gpus: list[str] = typer.Argument(..., help="Two or more GPUs; ratios are to the first."),
    as_json: bool = JsonOption,
    catalog: list[Path] | None = CatalogOption,
) -> None:
    """Compare GPUs side by side: memory, bandwidth, BF16/FP8 dense, power, price, per-dollar, per-watt."""
    result = api.compare_gpus(gpus, catalog_files=catalog_files(catalog))
    if as_json:
        print_json(comparison_json(result))
    else:
        stdout().print(comparison_table(result))



@app.command()
@guarded
def sync(
    source: Path = typer.Option(..., "--from", metavar="PATH", help="A SkyPilot catalog vms.csv, a gpuhunt "
                                "<provider>.csv, or a folder of them (skypilot-catalog's catalogs/v8)."),
    to: Path | None = typer.Option(None, "--to", metavar="FILE", help="Write here (in an existing folder) instead of "
                                   "the user catalog folder's synced-offers.yaml, which is created when missing."),
    as_of: str | None = typer.Option(None, "--as-of", metavar="YYYY-MM-DD", help="The day the files were published: "
                                     "dates every row that carries no date of its own (default: a date in the path, "
                                     "as gpuhunt's catalog versions have, else today, said in the output)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Read and report; write nothing."),
    as_json: bool = JsonOption,
    catalog: list[Path] | None = CatalogOption,
) -> None:
    """Dated cloud offers (on-demand and spot, cheapest zone per region) from SkyPilot's or gpuhunt's price files,
    into the user catalog every command reads: `gpuwise catalog sync --from skypilot-catalog/catalogs/v8 --as-of
    2026-12-01`. GPUs are matched by name and stated memory; rows that cannot be offers are counted by reason."""
    from dataclasses import asdict

    from gpuwise.report.catalog import sync_lines

    done = api.sync_offers(source, target=to, dry_run=dry_run, as_of=as_of, catalog_files=catalog_files(catalog))
    print_json(asdict(done)) if as_json else stdout().print(sync_lines(done))
