"""GGUF files as models: real GGUF files written by llama.cpp's own writer (gguf-py's GGUFWriter) with quantized
tensor types, read as models locally, from their parts, and from a Hugging Face-shaped server this test starts
(HTTP range requests, HF_ENDPOINT pointed at it). The expected figures are worked by hand: element counts from the
shapes, and bytes from ggml's block layouts (ggml/src/ggml-common.h: block_q4_K holds 256 weights in 2 + 2 + 12 + 128
= 144 bytes, block_q6_K 256 in 128 + 64 + 16 + 2 = 210, block_q8_0 32 in 2 + 32 = 34; F32 4 bytes a weight).

Tensor data is never written: the writer's header is followed by a sparse extension of the file to its full size,
so a file with Qwen3-8B's real shapes costs no disk."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from typer.testing import CliRunner

from gpuwise import api
from gpuwise.cli.main import app
from gpuwise.errors import ConfigError
from gpuwise.workload.model.gguf_source import choose_file
from gpuwise.workload.model.resolve import resolve_model
from ranges import send_range

np = pytest.importorskip("numpy")
gguf = pytest.importorskip("gguf")
T = gguf.GGMLQuantizationType
runner = CliRunner()
BLOCK = {T.Q4_K: (256, 144), T.Q6_K: (256, 210), T.Q8_0: (32, 34), T.F32: (1, 4)}  # weights, bytes (by hand)
Tensor = tuple[str, tuple[int, ...], Any]


def write_gguf(path: Path, arch: str, values: dict[str, Any], tensors: list[Tensor], *, split_tensors: int = 0,
               ) -> list[Path]:
    """A GGUF file (or its split parts) as llama.cpp's writer lays it out; shapes in numpy order (rows, columns)."""
    writer = gguf.GGUFWriter(str(path), arch, split_max_tensors=split_tensors)
    for key, value in values.items():
        if isinstance(value, list):
            writer.add_array(key, value)
        elif isinstance(value, float):
            writer.add_float32(key, value)
        elif isinstance(value, str):
            writer.add_string(key, value)
        else:
            writer.add_uint32(key, value)
    for name, shape, kind in tensors:
        weights, size = BLOCK[kind]
        writer.add_tensor_info(name, shape, np.dtype(np.float32), int(np.prod(shape)) // weights * size, raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    ends = [-(-out.tell() // 32) * 32 + sum(-(-info.nbytes // 32) * 32 for info in part.values())
            for out, part in zip(writer.fout or [], writer.tensors, strict=True)]
    names = writer.format_shard_names(Path(path))
    writer.close()
    for name, end in zip(names, ends, strict=True):
        with open(name, "r+b") as handle:
            handle.truncate(end)  # the data section, sparse
    return names


def stored_bytes(tensors: list[Tensor]) -> int:
    return sum(int(np.prod(shape)) // BLOCK[kind][0] * BLOCK[kind][1] for _, shape, kind in tensors)


def decoder_tensors(*, layers: int, hidden: int, ffn: int, heads: int, kv_heads: int, head_dim: int, vocab: int,
                    qk_norm: bool = False) -> list[Tensor]:
    """A Llama/Qwen3 decoder's tensors, named as llama.cpp names them (gguf-py tensor_mapping), Q4_K_M-like types."""
    found: list[Tensor] = [("token_embd.weight", (vocab, hidden), T.Q4_K), ("output_norm.weight", (hidden,), T.F32),
                           ("output.weight", (vocab, hidden), T.Q6_K)]
    for b in range(layers):
        found += [(f"blk.{b}.attn_norm.weight", (hidden,), T.F32),
                  (f"blk.{b}.attn_q.weight", (heads * head_dim, hidden), T.Q4_K),
                  (f"blk.{b}.attn_k.weight", (kv_heads * head_dim, hidden), T.Q4_K),
                  (f"blk.{b}.attn_v.weight", (kv_heads * head_dim, hidden), T.Q6_K),
                  (f"blk.{b}.attn_output.weight", (hidden, heads * head_dim), T.Q4_K),
                  (f"blk.{b}.ffn_norm.weight", (hidden,), T.F32),
                  (f"blk.{b}.ffn_gate.weight", (ffn, hidden), T.Q4_K),
                  (f"blk.{b}.ffn_up.weight", (ffn, hidden), T.Q4_K),
                  (f"blk.{b}.ffn_down.weight", (hidden, ffn), T.Q8_0 if ffn % 256 else T.Q6_K)]
        if qk_norm:
            found += [(f"blk.{b}.attn_q_norm.weight", (head_dim,), T.F32),
                      (f"blk.{b}.attn_k_norm.weight", (head_dim,), T.F32)]
    return found


def metadata(arch: str, *, layers: int, hidden: int, ffn: int, heads: int, kv_heads: int, head_dim: int, vocab: int,
             context: int, **extra: Any) -> dict[str, Any]:
    return {f"{arch}.block_count": layers, f"{arch}.context_length": context, f"{arch}.embedding_length": hidden,
            f"{arch}.feed_forward_length": ffn, f"{arch}.attention.head_count": heads,
            f"{arch}.attention.head_count_kv": kv_heads, f"{arch}.attention.key_length": head_dim,
            f"{arch}.attention.value_length": head_dim, f"{arch}.attention.layer_norm_rms_epsilon": 1e-6,
            "general.file_type": 15, "tokenizer.ggml.tokens": [f"t{i}" for i in range(vocab)],
            **{f"{arch}.{key}": value for key, value in extra.items()}}


TINY = dict(layers=2, hidden=256, ffn=512, heads=4, kv_heads=2, head_dim=64, vocab=1000)
# by hand: embedding and head 1000 x 256 each = 512,000; final norm 256; per layer 2 norms 512, q and o 256 x 256
# = 65,536 each, k and v 128 x 256 = 32,768 each, gate/up/down 512 x 256 = 131,072 each: 590,336; two layers
TINY_PARAMS = 512_000 + 256 + 2 * (512 + 2 * 65_536 + 2 * 32_768 + 3 * 131_072)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gguf")


@pytest.fixture(scope="module")
def tiny(folder: Path) -> Path:
    write_gguf(folder / "tiny-Q4_K_M.gguf", "llama", metadata("llama", context=8192, **TINY), decoder_tensors(**TINY))
    return folder / "tiny-Q4_K_M.gguf"


def test_a_llama_file_is_its_own_model(tiny: Path) -> None:
    arch = resolve_model(str(tiny))
    assert (arch.family, arch.layers, arch.hidden, arch.heads, arch.kv_heads, arch.head_dim, arch.intermediate,
            arch.vocab, arch.max_positions) == ("llama", 2, 256, 4, 2, 64, 512, 1000, 8192)
    assert arch.total_params == TINY_PARAMS == 1_692_928
    assert arch.checkpoint is not None and arch.checkpoint.quant == "gguf-q4_k_m"  # general.file_type 15
    assert arch.checkpoint.exact_bytes == stored_bytes(decoder_tensors(**TINY))


def test_the_estimate_holds_the_files_bytes(tiny: Path) -> None:
    result = runner.invoke(app, ["estimate", str(tiny), "--gpu", "rtx-4090", "--task", "infer", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    # Q4_K: embedding 256,000 + per layer q, k, o, gate, up 65,536 + 32,768 + 65,536 + 2 x 131,072 = 425,984;
    # Q6_K: head 256,000 + v 32,768 and down 131,072 a layer; F32: the norms, 256 + 2 x 512
    q4 = 256_000 + 2 * 425_984
    q6 = 256_000 + 2 * (32_768 + 131_072)
    by_hand = q4 // 256 * 144 + q6 // 256 * 210 + (256 + 2 * 512) * 4
    assert document["memory"]["weights_bytes"] == by_hand == 623_232 + 478_800 + 5_120
    assert document["workload"]["params"] == TINY_PARAMS


def test_a_moe_file_reads_its_experts(folder: Path) -> None:
    shape = dict(layers=2, hidden=256, ffn=64, heads=4, kv_heads=2, head_dim=64, vocab=512)
    tensors = [t for t in decoder_tensors(**shape, qk_norm=True) if "ffn_" not in t[0] or "norm" in t[0]]
    for b in range(2):
        tensors += [(f"blk.{b}.ffn_gate_inp.weight", (8, 256), T.F32),
                    (f"blk.{b}.ffn_gate_exps.weight", (8, 64, 256), T.Q4_K),
                    (f"blk.{b}.ffn_up_exps.weight", (8, 64, 256), T.Q4_K),
                    (f"blk.{b}.ffn_down_exps.weight", (8, 256, 64), T.Q8_0)]
    values = metadata("qwen3moe", context=32768, **shape, expert_count=8, expert_used_count=2,
                      expert_feed_forward_length=64)
    write_gguf(folder / "moe.gguf", "qwen3moe", values, tensors)
    arch = resolve_model(str(folder / "moe.gguf"))
    assert (arch.family, arch.experts, arch.experts_per_token, arch.intermediate) == ("qwen3_moe", 8, 2, 64)
    # by hand: embedding + head 2 x 512 x 256 = 262,144, final norm 256; per layer 2 norms 512, q/o 65,536 each,
    # k/v 32,768 each, q/k norms 64 each, router 8 x 256 = 2,048, experts 3 x 8 x 64 x 256 = 393,216
    layer = 512 + 2 * 65_536 + 2 * 32_768 + 128 + 2_048 + 393_216
    assert arch.total_params == 262_144 + 256 + 2 * layer == 1_447_424
    # two of eight experts run: 3 x 2 x 64 x 256 = 98,304 of the 393,216 per layer
    assert arch.active_params == arch.total_params - 2 * (393_216 - 98_304)


QWEN3_8B = dict(layers=36, hidden=4096, ffn=12288, heads=32, kv_heads=8, head_dim=128, vocab=151936)


def test_qwen3_8b_metadata_gives_the_presets_figures(folder: Path) -> None:
    """Qwen3-8B's real shapes (Qwen/Qwen3-8B config.json: 36 layers, 32 heads, 8 KV heads, head_dim 128, hidden
    4096, intermediate 12288, 40960 positions, vocab 151936, untied) as a Q4_K_M GGUF's header: the architecture
    gpuwise's preset builds from the config.json, and the parameters counted from the tensors."""
    tensors = decoder_tensors(**QWEN3_8B, qk_norm=True)
    write_gguf(folder / "Qwen3-8B-Q4_K_M.gguf", "qwen3", metadata("qwen3", context=40960, **QWEN3_8B), tensors)
    arch, preset = resolve_model(str(folder / "Qwen3-8B-Q4_K_M.gguf")), api.model("qwen3-8b")
    fields = ("family", "layers", "hidden", "heads", "kv_heads", "head_dim", "intermediate", "vocab", "max_positions",
              "experts", "qk_norm", "rms_norm")
    assert {f: getattr(arch, f) for f in fields} == {f: getattr(preset, f) for f in fields}
    # by hand: 2 x 151,936 x 4,096 (embedding, head) + 4,096 + 36 x (2 x 4096^2 + 2 x 1024 x 4096 + 3 x 4096 x 12288
    # + 2 x 4096 + 2 x 128) = 8,190,735,360 (the card: 8.2B)
    assert arch.total_params == preset.total_params == 8_190_735_360
    assert arch.checkpoint is not None and arch.checkpoint.exact_bytes == stored_bytes(tensors)


def test_split_parts_are_read_together(folder: Path) -> None:
    tensors = decoder_tensors(**TINY)
    parts = write_gguf(folder / "split.gguf", "llama", metadata("llama", context=8192, **TINY), tensors,
                       split_tensors=8)
    assert [p.name for p in parts] == [f"split-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    for part in (parts[0], parts[2]):  # any part names the whole model
        arch = resolve_model(str(part))
        assert arch.total_params == TINY_PARAMS
        assert arch.checkpoint is not None and arch.checkpoint.exact_bytes == stored_bytes(tensors)
    parts[1].unlink()
    with pytest.raises(ConfigError, match="no such file"):
        resolve_model(str(parts[0]))


def test_bad_files_are_one_line_errors(folder: Path, tiny: Path) -> None:
    (folder / "text.gguf").write_text("hello")
    cut = folder / "cut.gguf"
    cut.write_bytes(tiny.read_bytes()[:300])
    write_gguf(folder / "rwkv.gguf", "rwkv6", {"rwkv6.block_count": 2}, [("token_embd.weight", (8, 256), T.Q4_K)])
    cases = {"text.gguf": "not a GGUF file", "cut.gguf": "ends inside its GGUF header",
             "rwkv.gguf": "architecture 'rwkv6' is not one gpuwise reads; supported: llama, mistral, qwen2"}
    for name, message in cases.items():
        result = runner.invoke(app, ["estimate", str(folder / name), "--gpu", "rtx-4090", "--task", "infer",
                                     "--json"])
        assert result.exit_code == 2
        error = json.loads(result.stdout)["error"]
        assert message in error and "\n" not in error


def test_quant_tags_choose_one_file() -> None:
    files = ["README.md", "Qwen3-8B-Q4_K_M.gguf", "Qwen3-8B-Q4_K_S.gguf", "Qwen3-8B-UD-Q4_K_XL.gguf",
             "Q8_0/Qwen3-8B-Q8_0-00001-of-00002.gguf", "Q8_0/Qwen3-8B-Q8_0-00002-of-00002.gguf", "mmproj-F16.gguf"]
    assert choose_file(files, "q4_k_m", "-hf") == ["Qwen3-8B-Q4_K_M.gguf"]
    assert choose_file(files, None, "-hf") == ["Qwen3-8B-Q4_K_M.gguf"]  # llama.cpp's default tag
    assert choose_file(files, "Q8_0", "-hf") == files[4:6]
    with pytest.raises(ConfigError, match="matches 3 models"):
        choose_file(files, "Q4_K", "-hf")
    with pytest.raises(ConfigError, match=r"matches no file.*'Qwen3-8B-Q4_K_S\.gguf'"):
        choose_file(files, "F16", "-hf")  # the projector is not a model


# ---- a Hugging Face-shaped server ------------------------------------------------------------------------------
class _Hub(BaseHTTPRequestHandler):
    repos: ClassVar[dict[str, dict[str, Path]]] = {}
    seen: ClassVar[list[tuple[str, str, str]]] = []

    def do_GET(self) -> None:
        self.seen.append((self.path, self.headers.get("Range", ""), self.headers.get("Authorization", "")))
        if self.path.startswith("/api/models/"):
            files = self.repos.get(self.path.removeprefix("/api/models/"))
            body = json.dumps({"sha": "a" * 40, "siblings": [{"rfilename": n} for n in files or {}]}).encode()
            self.send_response(200 if files else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if self.path.startswith("/cdn/"):  # where a redirect sends the file, as the hub sends to its CDN
            self.path = f"/someone/Tiny-GGUF/resolve/{'a' * 40}/" + self.path.removeprefix("/cdn/")
        elif self.path.startswith("/someone/Moved-GGUF/resolve/"):
            self.send_response(302)
            self.send_header("Location", "/cdn/" + self.path.rsplit("/", 1)[-1])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        owner, repo, _, commit, name = self.path.lstrip("/").split("/", 4)
        data = self.repos[f"{owner}/{repo}"][name].read_bytes() if commit == "a" * 40 else b""
        send_range(self, data)

    def log_message(self, *args: object) -> None:
        """Quiet."""


@pytest.fixture(scope="module")
def hub(folder: Path, tiny: Path) -> Iterator[str]:
    parts = write_gguf(folder / "big.gguf", "llama", metadata("llama", context=8192, **TINY), decoder_tensors(**TINY),
                       split_tensors=10)
    _Hub.repos = {"someone/Tiny-GGUF": {"tiny-Q4_K_M.gguf": tiny, "mmproj-tiny-F16.gguf": tiny,
                                        **{f"tiny-Q8_0-0000{i}-of-00003.gguf": p for i, p in enumerate(parts, 1)}},
                  "someone/Moved-GGUF": {"tiny-Q4_K_M.gguf": tiny}}
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_hf_repo_and_quant_read_by_range_requests(hub: str, tiny: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", hub)
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    _Hub.seen.clear()
    result = runner.invoke(app, ["estimate", "-hf", "someone/Tiny-GGUF:q4_k_m", "--gpu", "rtx-4090", "--task",
                                 "infer", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["workload"]["params"] == TINY_PARAMS
    assert document["memory"]["weights_bytes"] == stored_bytes(decoder_tensors(**TINY))
    assert _Hub.seen[0] == ("/api/models/someone/Tiny-GGUF", "bytes=0-7999999", "Bearer hf_test")
    reads = [s for s in _Hub.seen if "/resolve/" in s[0]]
    assert reads and all(s[0] == f"/someone/Tiny-GGUF/resolve/{'a' * 40}/tiny-Q4_K_M.gguf" for s in reads)
    assert all(s[2] == "Bearer hf_test" for s in reads)


def test_the_token_does_not_follow_a_redirect(hub: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", hub)
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    _Hub.seen.clear()
    assert api.model("hf.co/someone/Moved-GGUF").total_params == TINY_PARAMS
    moved = [s for s in _Hub.seen if s[0].startswith("/someone/Moved-GGUF/resolve/")]
    followed = [s for s in _Hub.seen if s[0].startswith("/cdn/")]
    assert moved and followed
    assert all(s[2] == "Bearer hf_secret" for s in moved) and all(s[2] == "" for s in followed)


def test_hf_split_model_reads_every_part(hub: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", hub)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    arch = api.model("hf.co/someone/Tiny-GGUF:Q8_0")
    assert arch.total_params == TINY_PARAMS
    assert arch.checkpoint is not None and arch.checkpoint.exact_bytes == stored_bytes(decoder_tensors(**TINY))
    assert arch.name == "someone/Tiny-GGUF:tiny-Q8_0-00001-of-00003.gguf"


def test_hf_errors_name_what_was_found(hub: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", hub)
    result = runner.invoke(app, ["estimate", "-hf", "someone/Tiny-GGUF:IQ2_XS", "--gpu", "rtx-4090", "--task",
                                 "infer", "--json"])
    assert result.exit_code == 2
    error = json.loads(result.stdout)["error"]
    assert "matches no file" in error and "'tiny-Q4_K_M.gguf', 'tiny-Q8_0.gguf'" in error
    result = runner.invoke(app, ["estimate", "-hf", "nobody/None-GGUF", "--gpu", "rtx-4090", "--task", "infer"])
    assert result.exit_code == 2 and "HTTP 404" in result.output
    result = runner.invoke(app, ["fit", "llama-3.1-8b", "-hf", "someone/Tiny-GGUF", "--gpu", "rtx-4090"])
    assert result.exit_code == 2 and "not both" in result.output
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = runner.invoke(app, ["serve-sim", "-hf", "someone/Other-GGUF", "--gpu", "rtx-4090"])
    assert result.exit_code == 2 and "HF_HUB_OFFLINE" in result.output


LLAMA_BENCH = Path(__file__).resolve().parents[2] / "shared" / "data" / "exports" / "llama-bench" / (
    "brayniac-rtx4090-snowpiercer15b-q3kl-b5606.json")


@pytest.mark.skipif(not LLAMA_BENCH.is_file(), reason="../shared/data/exports is not here")
def test_llama_bench_records_use_the_gguf_in_the_folder_given(tmp_path: Path, tiny: Path) -> None:
    """The record (brayniac/llm-performance @ d653fd7f) loaded
    /mnt/llm-models/GGUF/TheDrummer/Snowpiercer-15B-v1/Snowpiercer-15B-v1.Q3_K_L.gguf (7,982,305,280 bytes): with
    --model naming a folder that holds a file of that name, calibrate reads the model from it, not from the record's
    parameter count, and says when the file's bytes are not the record's."""
    (tmp_path / "Snowpiercer-15B-v1.Q3_K_L.gguf").write_bytes(tiny.read_bytes())
    result = runner.invoke(app, ["calibrate", "--from", str(LLAMA_BENCH), "--model", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["model"] == "Snowpiercer-15B-v1.Q3_K_L.gguf"
    note = next(n for n in document["notes"] if n.startswith("--model"))
    assert "from the GGUF header" in note and "the record says 7,982,305,280" in note
    without = json.loads(runner.invoke(app, ["calibrate", "--from", str(LLAMA_BENCH), "--json"]).output)
    assert without["model"].startswith("dense 14.97B")  # the record's own parameter count, as before


# ---- each family, from its preset's config.json as llama.cpp's converter writes it ---------------------------
def _kind(shape: tuple[int, ...]) -> Any:
    """A type whose block divides the row (ggml's rule): Q4_K, else Q8_0, else F32 (norms, biases)."""
    return T.F32 if len(shape) == 1 else T.Q4_K if shape[-1] % 256 == 0 else T.Q8_0


def _attention(c: dict[str, Any], b: int, family: str) -> list[tuple[str, tuple[int, ...]]]:
    h, heads, kv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    d = c.get("head_dim") or h // heads
    p = f"blk.{b}."
    if family == "deepseek_v3":  # MLA (llama.cpp LLM_ARCH_DEEPSEEK2's tensors)
        rope, nope, v = c["qk_rope_head_dim"], c["qk_nope_head_dim"], c["v_head_dim"]
        q, kvr = c["q_lora_rank"], c["kv_lora_rank"]
        return [(p + "attn_q_a.weight", (q, h)), (p + "attn_q_a_norm.weight", (q,)),
                (p + "attn_q_b.weight", (heads * (nope + rope), q)), (p + "attn_kv_a_mqa.weight", (kvr + rope, h)),
                (p + "attn_kv_a_norm.weight", (kvr,)), (p + "attn_kv_b.weight", (heads * (nope + v), kvr)),
                (p + "attn_output.weight", (h, heads * v))]
    if family == "phi3":  # q, k and v fused
        found = [(p + "attn_qkv.weight", ((heads + 2 * kv) * d, h))]
    else:
        found = [(p + "attn_q.weight", (heads * d, h)), (p + "attn_k.weight", (kv * d, h)),
                 (p + "attn_v.weight", (kv * d, h))]
    found.append((p + "attn_output.weight", (h, heads * d)))
    if family in ("qwen2", "qwen2_moe", "gpt_oss"):
        found += [(p + f"attn_{x}.bias", (n,)) for x, n in (("q", heads * d), ("k", kv * d), ("v", kv * d))]
    if family == "gpt_oss":
        found += [(p + "attn_output.bias", (h,)), (p + "attn_sinks.weight", (heads,))]
    if family == "gemma2":
        found += [(p + "post_attention_norm.weight", (h,)), (p + "post_ffw_norm.weight", (h,))]
    return found


def _feed_forward(c: dict[str, Any], b: int, family: str) -> list[tuple[str, tuple[int, ...]]]:
    h, p = c["hidden_size"], f"blk.{b}."
    experts = c.get("num_local_experts") or c.get("num_experts") or c.get("n_routed_experts") or 0
    if not experts or b < c.get("first_k_dense_replace", 0):
        ff = c["intermediate_size"]
        if family == "phi3":  # gate and up fused
            return [(p + "ffn_up.weight", (2 * ff, h)), (p + "ffn_down.weight", (h, ff))]
        return [(p + "ffn_gate.weight", (ff, h)), (p + "ffn_up.weight", (ff, h)), (p + "ffn_down.weight", (h, ff))]
    ff = c.get("moe_intermediate_size") or c["intermediate_size"]
    found = [(p + "ffn_gate_inp.weight", (experts, h)), (p + "ffn_gate_exps.weight", (experts, ff, h)),
             (p + "ffn_up_exps.weight", (experts, ff, h)), (p + "ffn_down_exps.weight", (experts, h, ff))]
    if family == "gpt_oss":
        found += [(p + "ffn_gate_inp.bias", (experts,)), (p + "ffn_gate_exps.bias", (experts, ff)),
                  (p + "ffn_up_exps.bias", (experts, ff)), (p + "ffn_down_exps.bias", (experts, h))]
    shared = c.get("shared_expert_intermediate_size") or ff * c.get("n_shared_experts", 0)
    if shared:
        found += [(p + "ffn_gate_shexp.weight", (shared, h)), (p + "ffn_up_shexp.weight", (shared, h)),
                  (p + "ffn_down_shexp.weight", (h, shared))]
    if family == "qwen2_moe":
        found.append((p + "ffn_gate_inp_shexp.weight", (h,)))
    return found


def family_tensors(c: dict[str, Any], family: str) -> list[Tensor]:
    h = c["hidden_size"]
    found = [("token_embd.weight", (c["vocab_size"], h)), ("output_norm.weight", (h,))]
    if not c.get("tie_word_embeddings", family.startswith("gemma")):
        found.append(("output.weight", (c["vocab_size"], h)))
    for b in range(c["num_hidden_layers"]):
        norms = [f"blk.{b}.attn_norm.weight", f"blk.{b}.post_attention_norm.weight" if family == "gpt_oss" else
                 f"blk.{b}.ffn_norm.weight"]
        found += [(n, (h,)) for n in norms] + _attention(c, b, family) + _feed_forward(c, b, family)
    return [(name, shape, _kind(shape)) for name, shape in found]


GGUF_ARCH = {"mixtral": "llama", "qwen2": "qwen2", "qwen2_moe": "qwen2moe", "gemma2": "gemma2", "phi3": "phi3",
             "gpt_oss": "gpt-oss", "deepseek_v3": "deepseek2"}


def converter_metadata(c: dict[str, Any], family: str) -> dict[str, Any]:
    """What convert_hf_to_gguf.py (llama.cpp@a458664f) writes for this config.json: TextModel's keys, then each
    family's own (head_dim as key/value length where the config has one; experts; MLA ranks; sliding windows)."""
    a = GGUF_ARCH[family]
    values: dict[str, Any] = {f"{a}.block_count": c["num_hidden_layers"],
                              f"{a}.context_length": c["max_position_embeddings"],
                              f"{a}.embedding_length": c["hidden_size"], f"{a}.feed_forward_length":
                              c["intermediate_size"], f"{a}.attention.head_count": c["num_attention_heads"],
                              f"{a}.attention.head_count_kv": c["num_key_value_heads"],
                              f"{a}.attention.layer_norm_rms_epsilon": float(c["rms_norm_eps"]),
                              "tokenizer.ggml.tokens": [f"t{i}" for i in range(c["vocab_size"])]}
    extra = {"attention.key_length": c.get("head_dim"), "attention.value_length": c.get("head_dim"),
             "expert_count": c.get("num_local_experts") or c.get("num_experts") or c.get("n_routed_experts"),
             "expert_used_count": c.get("num_experts_per_tok"),
             "expert_feed_forward_length": c.get("moe_intermediate_size") or (
                 c["intermediate_size"] if family == "gpt_oss" else None),
             "expert_shared_feed_forward_length": c.get("shared_expert_intermediate_size"),
             "attention.sliding_window": c.get("sliding_window") if family in ("gemma2", "phi3", "gpt_oss") else None}
    if family == "deepseek_v3":
        extra.update({"attention.key_length": c["qk_nope_head_dim"] + c["qk_rope_head_dim"],
                      "attention.value_length": c["v_head_dim"], "attention.kv_lora_rank": c["kv_lora_rank"],
                      "attention.q_lora_rank": c["q_lora_rank"], "rope.dimension_count": c["qk_rope_head_dim"],
                      "expert_shared_count": c["n_shared_experts"],
                      "leading_dense_block_count": c["first_k_dense_replace"]})
    return {**values, **{f"{a}.{k}": v for k, v in extra.items() if v is not None}}


@pytest.mark.parametrize("preset", ["mixtral-8x7b", "qwen2.5-7b", "qwen1.5-moe-a2.7b", "gemma-2-9b", "phi-3-mini",
                                    "gpt-oss-20b", "deepseek-v3"])
def test_each_family_reads_back_as_its_preset(folder: Path, preset: str) -> None:
    arch_of_preset = api.model(preset)
    c, family = dict(arch_of_preset.config), arch_of_preset.family
    tensors = family_tensors(c, family)
    path = folder / f"{preset}.gguf"
    write_gguf(path, GGUF_ARCH[family], converter_metadata(c, family), tensors)
    arch = resolve_model(str(path))
    fields = ("family", "layers", "hidden", "heads", "kv_heads", "head_dim", "intermediate", "vocab", "max_positions",
              "experts", "experts_per_token", "shared_expert_intermediate", "sliding_window", "window_layers",
              "gated_mlp", "rms_norm")
    assert {f: getattr(arch, f) for f in fields} == {f: getattr(arch_of_preset, f) for f in fields}
    counted = sum(int(np.prod(shape)) for _, shape, _ in tensors)
    assert arch.total_params == counted
    assert abs(counted - arch_of_preset.total_params) <= 1e-4 * arch_of_preset.total_params


def test_a_server_treats_hub_ggufs_as_hub_ids_and_urls_as_urls() -> None:
    """api/access.py: a hub GGUF is read from the hub as a hub id's config.json is, never as a path; a URL given as
    a model is refused unless the server allows URLs."""
    from gpuwise.api.access import AccessDenied, AccessPolicy, check_access

    policy = AccessPolicy()
    assert check_access("hf.co/unsloth/Qwen3-8B-GGUF:Q4_K_M", field="model", kind="model", policy=policy) == (
        "hf.co/unsloth/Qwen3-8B-GGUF:Q4_K_M")
    for value in ("https://example.com/x.gguf", "hf.co/../../etc/passwd", "./model.gguf"):
        with pytest.raises(AccessDenied):
            check_access(value, field="model", kind="model", policy=policy)



def test_deepseek_files_of_the_absorbed_mla_layout(folder: Path) -> None:
    """Since llama.cpp converts DeepSeek's MLA for absorption, key_length/value_length are kv_lora_rank + rope and
    kv_lora_rank (576, 512) with one KV head, and the heads' own dims move to key_length_mla/value_length_mla (192,
    128): the same model either way."""
    preset = api.model("deepseek-v3")
    c = dict(preset.config)
    values = converter_metadata(c, "deepseek_v3")
    values.update({"deepseek2.attention.head_count_kv": 1, "deepseek2.attention.key_length": 512 + 64,
                   "deepseek2.attention.value_length": 512, "deepseek2.attention.key_length_mla": 128 + 64,
                   "deepseek2.attention.value_length_mla": 128})
    write_gguf(folder / "deepseek-absorbed.gguf", "deepseek2", values, family_tensors(c, "deepseek_v3"))
    arch = resolve_model(str(folder / "deepseek-absorbed.gguf"))
    fields = ("heads", "kv_heads", "head_dim", "experts", "experts_per_token", "shared_expert_intermediate")
    assert {f: getattr(arch, f) for f in fields} == {f: getattr(preset, f) for f in fields}
    assert [b.attention for b in arch.blocks] == [b.attention for b in preset.blocks]
