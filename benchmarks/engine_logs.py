"""gpuwise's memory prediction against vLLM's and SGLang's own start-up logs (../shared/data/engine-logs).

Each log is read as `gpuwise calibrate --from LOG` reads it (its figures and the settings it printed, the YAML record
for what it does not print) and predicted for those settings. A log whose model gpuwise does not know offline takes
the preset named in HINTS (with the reason), else it is listed as unanswered with its one-line reason.

Run: python benchmarks/engine_logs.py [--dir PATH] [--json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from gpuwise.api.engine_logs import compare_engine_log
from gpuwise.errors import GpuwiseError

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "engine-logs"
# record id -> (preset, why): the log names a local path or a fine-tune of a preset's architecture
HINTS = {
    "vllm-2025-02-rtx4090-x2-r1-distill-qwen-14b-tp2-fail": (
        "qwen2.5-14b", "DeepSeek-R1-Distill-Qwen-14B is distilled onto Qwen2.5-14B (its config.json's architecture)"),
}
BANDS = {"kv_cache_tokens": 0.05, "kv_cache_gib": 0.05, "weights_gib": 0.10, "cuda_graph_gib": 0.10}


def compare(path: Path) -> dict[str, Any]:
    stem = path.stem
    settings = {"model": HINTS[stem][0]} if stem in HINTS else {}
    try:
        done = compare_engine_log(path, settings=settings)
    except GpuwiseError as exc:
        return {"id": stem, "refused": str(exc)[:200]}
    return {"id": stem, "model": done.model, "gpu": done.gpu, "hint": HINTS.get(stem, (None, None))[1],
            "rows": [{"figure": r.key, "log": r.log, "gpuwise": r.predicted, "error": r.difference}
                     for r in done.rows if r.log is not None]}


def _cell(value: float | None) -> str:
    return "—" if value is None else f"{value:,.2f}" if abs(value) < 1000 else f"{value:,.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=DEFAULT)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = [compare(p) for p in sorted(args.dir.glob("*.yaml"))]
    if args.json:
        print(json.dumps(results, indent=2))
        return
    within: dict[str, list[bool]] = {k: [] for k in BANDS}
    for result in results:
        if "refused" in result:
            print(f"{result['id']}: unanswered: {result['refused']}")
            continue
        print(f"{result['id']}: {result['model']} on {result['gpu']}" + (f" ({result['hint']})" if result["hint"]
                                                                         else ""))
        for row in result["rows"]:
            error = row["error"]
            print(f"    {row['figure']:<18} log {_cell(row['log']):>12}  gpuwise {_cell(row['gpuwise']):>12}  "
                  f"error {'—' if error is None else f'{100 * error:+.1f}%'}")
            if row["figure"] in BANDS and error is not None:
                within[row["figure"]].append(abs(error) <= BANDS[row["figure"]])
    print("\nwithin the issue's bands (KV tokens and GiB 5 %, weights and CUDA graphs 10 %):")
    for figure, hits in within.items():
        print(f"    {figure:<18} {sum(hits)} of {len(hits)} logs")


if __name__ == "__main__":
    main()
