"""Does a `gpuwise validate --save` record made at one batch bring the prediction at another batch closer to what
this machine measures? The timing half of the check that tests/test_validate.py holds with recorded measurements
(`test_a_record_at_one_batch_brings_the_prediction_at_another_closer`): here the three runs are timed for real, on
the CPU or a GPU, so the answer depends on how loaded the machine is -- which is why it is a benchmark, not a test.

A record saved at batch 2 recalibrates the mechanism its step was bound by; the prediction for batch 8 made with it
should land nearer the batch-8 measurement than the plain one. Prints both errors; exits 1 when the calibrated
prediction is not the nearer one.

Run: python benchmarks/validate_recalibration.py [--device cpu|cuda:0] [--steps 5] [--warmup 2]
     (needs torch and transformers: pip install 'gpuwise[hf]' and a torch build)
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

TINY = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 256, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 1000,
        "max_position_embeddings": 512}


def off(done: Any) -> float:
    """How many times the predicted step is off the measured one, either way, as |ln(predicted / measured)|."""
    return abs(math.log(done.predicted["step_s"] / done.measured["step_s"]))


def main() -> int:
    from gpuwise import api

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args()
    timed = {"device": args.device, "steps": args.steps, "warmup": args.warmup}
    with tempfile.TemporaryDirectory() as folder:
        config, record = Path(folder) / "config.json", Path(folder) / "b2.json"
        config.write_text(json.dumps(TINY))
        api.validate(str(config), run=timed, batch=2, seq=64, save=record)
        plain = api.validate(str(config), run=timed, batch=8, seq=64)
        calibrated = api.validate(str(config), run=timed, batch=8, seq=64, calibration=record)
    for name, done in (("plain", plain), ("calibrated", calibrated)):
        print(f"{name:>10}: predicted {done.predicted['step_s']:.4f} s, measured {done.measured['step_s']:.4f} s, "
              f"off x{math.exp(off(done)):.2f}")
    closer = off(calibrated) < off(plain)
    print("the record brings the batch-8 prediction closer" if closer else "NOT closer")
    return 0 if closer else 1


if __name__ == "__main__":
    sys.exit(main())
