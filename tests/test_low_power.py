"""Low-power inference: perf-per-watt for vision and encoder serving, the wall power it divides by (worked by hand
from datasheet TDPs), and the finding that says when a slot-powered T4/L4 beats a big card at a latency target."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuwise import api
from gpuwise.catalog import Catalog
from gpuwise.cli.main import app
from gpuwise.errors import ConfigError
from gpuwise.estimate.cost import tco as cost
from gpuwise.recommend.engine import Recommendation

runner = CliRunner()


def _per_watt(model: str, *, qps: float | None, p99_ms: float, gpus: list[str] | None = None) -> Recommendation:
    workload = {"model": model, "task": "infer", "qps": qps, "p99_ms": p99_ms, "options": {}}
    request: dict[str, object] = {"workloads": [workload], "objective": "perf-per-watt",
                                  "acquisitions": ["buy-new", "buy-used"]}
    if gpus:
        request["gpus"] = gpus
    return api.recommend(request)


def test_wall_power_by_hand(shipped: Catalog) -> None:
    # NVIDIA datasheets: L4 72 W, T4 70 W, H100 SXM 700 W; GPUs at 70 % of TDP under load; a server's host at 30 %
    # of its GPUs' TDP but never below a 200 W host per machine
    assert cost.wall_kw(shipped.gpus["l4"], 1) == pytest.approx((72 * 0.7 + 200) / 1000)  # not 72 x 0.3 = 22 W
    assert cost.wall_kw(shipped.gpus["t4"], 2, machines=2) == pytest.approx((2 * 70 * 0.7 + 2 * 200) / 1000)
    assert cost.wall_kw(shipped.gpus["h100-sxm-80gb"], 8) == pytest.approx(8 * 700 * (0.7 + 0.3) / 1000)
    assert cost.wall_kw(shipped.gpus["rtx-4090"], 1) == pytest.approx((450 * 0.7 + 200) / 1000)


def test_a_slot_powered_card_wins_per_watt_when_one_serves_the_load() -> None:
    # 500 ResNet-50 images/s within 50 ms: one 70-72 W card does it on ~250 W at the wall; the best card above 75 W
    # needs more power for the same 500 QPS, so per watt the T4/L4 class wins
    rec = _per_watt("resnet-50", qps=500, p99_ms=50)
    best = rec.options[0]
    assert best.gpu in ("t4", "l4") and best.count == 1
    assert best.fit.p99_ms is not None and best.fit.p99_ms <= 50
    assert "QPS per W at the wall" in best.why
    (finding,) = rec.findings
    assert "75 W class wins per watt" in finding and "500 QPS within P99 50 ms of resnet-50" in finding
    # the figure ranked by is the load served per watt drawn: 500 / (72 x 0.7 + 200) for one L4 (or T4's 70 W)
    assert f"{500 / (best.wall_kw * 1e3):,.3g} QPS per W" in finding


def test_a_big_card_wins_per_watt_at_saturation() -> None:
    # no rate to meet: capacity per watt; a B200 batching YOLOv8s does several times an L4's work per watt
    rec = _per_watt("yolov8s", qps=None, p99_ms=30, gpus=["l4", "t4", "b200-sxm-180gb", "h100-sxm-80gb"])
    assert rec.options[0].gpu in ("b200-sxm-180gb", "h100-sxm-80gb")
    (finding,) = rec.findings
    assert "the bigger card wins per watt" in finding


def test_why_no_low_power_card_meets_a_tight_latency() -> None:
    # SAM ViT-H's encoder at 1024 px is about 3 tera-MACs a picture (EfficientViT-SAM, arXiv 2402.05008, table 1):
    # 6 TFLOP on an L4 of 121 dense FP16 TFLOPS is 50 ms at full speed, and it runs at a fraction of that
    rec = _per_watt("sam-vit-h", qps=5, p99_ms=200)
    (finding,) = rec.findings
    assert finding.startswith("no slot-powered (75 W) card meets") and "(slo)" in finding
    assert "one request at a time is already its fastest" in finding


def test_only_a_serving_request_ranked_per_watt_gets_the_finding() -> None:
    tco = api.recommend({"workloads": [{"model": "resnet-50", "task": "infer", "qps": 500, "p99_ms": 50,
                                        "options": {}}], "acquisitions": ["buy-new"]})
    assert tco.findings == ()


def test_findings_reach_json_and_markdown(tmp_path: Path) -> None:
    report = tmp_path / "report.md"
    result = runner.invoke(app, ["recommend", "bert-base-uncased", "--task", "infer", "--qps", "200", "--p99-ms",
                                 "20", "--objective", "perf-per-watt", "--json", "--report", str(report)])
    assert result.exit_code == 0, result.stderr
    (finding,) = json.loads(result.stdout)["findings"]
    assert "200 QPS within P99 20 ms of bert-base-uncased" in finding
    assert f"## Findings\n\n- {finding}" in report.read_text()


def test_an_encoder_request_is_one_forward_pass_within_its_positions() -> None:
    # BERT (Devlin et al. 2018) embeds 512 positions and generates nothing: a served request is one forward pass of
    # at most 512 tokens, so the default prompt is capped there and no output tokens are counted
    served = api.estimate("bert-large-uncased", gpu="l4", task="infer")
    explicit = api.estimate("bert-large-uncased", gpu="l4", task="infer", input_len=512)
    assert served.perf.samples_per_s == pytest.approx(explicit.perf.samples_per_s)
    assert not any("exceeds" in w for w in served.warnings)
    with pytest.raises(ConfigError, match="encoder and generates nothing"):
        api.estimate("bert-large-uncased", gpu="l4", task="infer", output_len=64)
