"""--weights: a checkpoint's exact bytes from its header, locally and over HTTP range requests served by a server
this test starts; the files are made with the formats' own libraries (safetensors, gguf) and the expected bytes are
elements x bytes per element, by hand."""

from __future__ import annotations

import json
import struct
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuwise import api
from gpuwise.cli.main import app
from gpuwise.errors import ConfigError
from gpuwise.workload.weights_file import read_weights
from ranges import send_range

np = pytest.importorskip("numpy")
gguf = pytest.importorskip("gguf")
safetensors_numpy = pytest.importorskip("safetensors.numpy")
runner = CliRunner()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("weights")
    safetensors_numpy.save_file({"w": np.zeros((64, 32), dtype=np.float16), "b": np.zeros((10,), dtype=np.float32)},
                                str(folder / "model.safetensors"))
    writer = gguf.GGUFWriter(str(folder / "model.gguf"), "llama")
    writer.add_string("general.name", "tiny")
    writer.add_array("tokenizer.ggml.scores", [0.5] * 1000)
    writer.add_tensor("q8", np.zeros((4, 64), dtype=np.float32), raw_dtype=gguf.GGMLQuantizationType.F32)
    q8 = gguf.quantize(np.zeros((8, 64), dtype=np.float32), gguf.GGMLQuantizationType.Q8_0)
    writer.add_tensor("blk.0.w", q8, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return folder


def test_local_headers_give_the_exact_bytes(files: Path) -> None:
    st = read_weights(str(files / "model.safetensors"))
    assert (st.total_bytes, st.tensors) == (64 * 32 * 2 + 10 * 4, 2)
    g = read_weights(str(files / "model.gguf"))
    # F32 4 x 64 = 1,024 B; Q8_0 blocks of 32 weights in 34 bytes: 8 x 64 / 32 x 34 = 544 B
    assert (g.total_bytes, g.by_dtype) == (4 * 64 * 4 + 8 * 64 // 32 * 34, {"F32": 1024, "Q8_0": 544})


class _Ranges(BaseHTTPRequestHandler):
    root = Path()

    def do_GET(self) -> None:
        data = (self.root / self.path.lstrip("/")).read_bytes()
        send_range(self, data)

    def log_message(self, *args: object) -> None:
        """Quiet."""


@pytest.fixture(scope="module")
def server(files: Path) -> Iterator[str]:
    handler = type("Handler", (_Ranges,), {"root": files})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_urls_read_only_the_header_by_range_requests(files: Path, server: str) -> None:
    for name in ("model.safetensors", "model.gguf"):
        assert read_weights(f"{server}/{name}").total_bytes == read_weights(str(files / name)).total_bytes


def test_hostile_headers_are_one_line_errors(tmp_path: Path) -> None:
    huge = tmp_path / "huge.safetensors"
    huge.write_bytes(struct.pack("<Q", 2**40) + b"{}")
    with pytest.raises(ConfigError, match="more than"):
        read_weights(str(huge))
    cut = tmp_path / "cut.safetensors"
    header = json.dumps({"w": {"dtype": "F16", "shape": [4], "data_offsets": [0, 8]}}).encode()
    cut.write_bytes(struct.pack("<Q", len(header)) + header[:10])
    with pytest.raises(ConfigError, match="ends inside its header"):
        read_weights(str(cut))
    fake = tmp_path / "fake.gguf"
    fake.write_bytes(b"GGML" + bytes(100))
    with pytest.raises(ConfigError, match="not a GGUF"):
        read_weights(str(fake))
    lying = tmp_path / "lying.safetensors"
    header = json.dumps({"w": {"dtype": "F16", "shape": [4], "data_offsets": [0, 999]}}).encode()
    lying.write_bytes(struct.pack("<Q", len(header)) + header)
    with pytest.raises(ConfigError, match="spans"):
        read_weights(str(lying))


def test_the_estimate_uses_them_and_says_so(files: Path) -> None:
    path = str(files / "model.safetensors")
    result = runner.invoke(app, ["estimate", "llama-3.2-1b", "--gpu", "rtx-4090", "--task", "infer", "--weights",
                                 path, "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["memory"]["weights_bytes"] == 64 * 32 * 2 + 10 * 4
    assert any("--weights" in a for a in doc["assumptions"])
    with pytest.raises(ConfigError, match="--task infer"):
        api.estimate("llama-3.2-1b", gpu="rtx-4090", weights=path)


def test_recommend_takes_the_checkpoints_bytes_too(files: Path) -> None:
    path = str(files / "model.safetensors")
    result = runner.invoke(app, ["recommend", "llama-3.2-1b", "--task", "infer", "--qps", "1", "--rent", "--top", "2",
                                 "--weights", path, "--json"])
    assert result.exit_code == 0, result.output
    with_file = json.loads(result.output)["options"]
    plain = json.loads(runner.invoke(app, ["recommend", "llama-3.2-1b", "--task", "infer", "--qps", "1", "--rent",
                                           "--top", "2", "--json"]).output)["options"]
    assert with_file[0]["per_gpu_gib"] < plain[0]["per_gpu_gib"]  # a 4 KB checkpoint instead of 2.5 GB of weights


def test_the_decode_step_reads_the_checkpoints_bytes() -> None:
    """A header that says twice the format's bytes: the card holds twice the weights, and a batch-1 decode, which
    reads every weight once per token, can go no faster than the datasheet bandwidth over those bytes."""
    from gpuwise.api.shell import InferJob

    plain = api.estimate("llama-3.2-1b", gpu="h100-sxm-80gb", job=InferJob(batch=1, quant="bf16"))
    formula_bytes = plain.memory.breakdown_bytes["weights"]
    doubled = api.estimate("llama-3.2-1b", gpu="h100-sxm-80gb",
                           job=InferJob(batch=1, quant="bf16", weights_bytes=2 * formula_bytes))
    assert doubled.memory.breakdown_bytes["weights"] == pytest.approx(2 * formula_bytes)
    assert plain.perf is not None and doubled.perf is not None
    rate, rate_doubled = plain.perf.decode_tokens_per_s, doubled.perf.decode_tokens_per_s
    assert rate is not None and rate_doubled is not None
    assert rate_doubled < rate
    assert rate_doubled <= 3350e9 / (2 * formula_bytes)  # H100 SXM datasheet: 3.35 TB/s of HBM3


def test_a_header_of_no_bytes_divides_nothing_by_zero() -> None:
    """The reader refuses a header with no weights, but a job that says 0 bytes some other way (model_copy skips
    validation) is still estimated: the card holds the file's 0 bytes of weights, and the note does not divide by
    the header's zero scale (it was a ZeroDivisionError)."""
    from gpuwise.api.shell import InferJob

    job = InferJob(batch=1, quant="bf16").model_copy(update={"weights_bytes": 0.0})
    result = api.estimate("llama-3.2-1b", gpu="h100-sxm-80gb", job=job)
    assert result.memory.breakdown_bytes["weights"] == 0
    assert any("--weights" in note and "an unknown number" in note for note in result.memory.assumptions)
