"""`--trace` against the measured H200 training runs (benchmarks/results/h200-2026-11-29/training.jsonl): the traced
peak (fake CPU tensors, the model's own transformers code) beside torch.cuda.max_memory_allocated() and the closed
form's allocated part. Needs the hf extra and torch; about a minute per row on two cores.

    python benchmarks/trace_h200.py [--markdown]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gpuwise import api
from gpuwise.report.trace import allocated_bytes
from gpuwise.workload.jobs.job import TrainJob

ROWS = Path(__file__).parent / "results" / "h200-2026-11-29" / "training.jsonl"


def main() -> None:
    markdown = "--markdown" in sys.argv
    if markdown:
        print("| model, batch x seq, checkpointing | max allocated GB | traced GB | error | closed form GB | error |")
        print("|---|---:|---:|---:|---:|---:|")
    for line in ROWS.read_text().splitlines():
        row = json.loads(line)
        job = TrainJob(batch=row["batch"], seq=row["seq"], ckpt=row["ckpt"], precision="bf16", optimizer="adamw")
        traced = api.trace(row["preset"], job).peak_allocated_bytes / 1e9
        closed = allocated_bytes(api.estimate(row["preset"], gpu=row["gpu"], job=job).memory) / 1e9
        measured = row["max_allocated_gb"]
        cells = (f"{row['preset']}, {row['batch']} x {row['seq']}, {row['ckpt']}", f"{measured:.2f}", f"{traced:.2f}",
                 f"{traced / measured - 1:+.1%}", f"{closed:.2f}", f"{closed / measured - 1:+.1%}")
        print("| " + " | ".join(cells) + " |" if markdown else "  ".join(cells))


if __name__ == "__main__":
    main()
