"""`gpuwise diagnose`: every real error text in the knowledge base maps to its entry; doctor facts weigh in."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuwise import api
from gpuwise.catalog import Catalog
from gpuwise.cli.main import app
from gpuwise.troubleshoot.context import read_gpu, read_method
from gpuwise.troubleshoot.kb import entries
from gpuwise.troubleshoot.matcher import diagnose_text
from gpuwise.troubleshoot.oom import read_oom

runner = CliRunner()
SAMPLES = [(e.id, s) for e in entries() for s in e.samples]
REQUIRED_XIDS = (13, 31, 43, 45, 48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119)


def test_the_knowledge_base_is_big_enough_and_sourced() -> None:
    kb = entries()
    assert len(kb) >= 40
    assert all(e.sources and e.samples and e.fix and e.confirm for e in kb)


@pytest.mark.parametrize(("entry_id", "sample"), SAMPLES, ids=[f"{i}-{n}" for n, (i, _) in enumerate(SAMPLES)])
def test_every_sample_maps_to_its_entry(entry_id: str, sample: str) -> None:
    found = {m.entry.id for m in diagnose_text(sample)}
    assert entry_id in found, f"{entry_id} not among {sorted(found)}"


@pytest.mark.parametrize("xid", REQUIRED_XIDS)
def test_every_listed_xid_is_recognised(xid: int) -> None:
    line = f"[12345.678] NVRM: Xid (PCI:0000:3b:00): {xid}, pid=4242, name=python, Ch 00000010"
    matches = diagnose_text(line)
    assert matches, f"Xid {xid} not recognised"
    assert any(re.search(rf"\b{xid}\b", m.entry.id + " " + m.entry.title) for m in matches)


def test_fragmentation_outranks_the_generic_oom() -> None:
    text = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
            "23.64 GiB of which 1.19 GiB is free. Of the allocated memory 17.51 GiB is allocated by PyTorch, and "
            "4.47 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.")
    matches = diagnose_text(text)
    assert "expandable_segments" in " ".join(matches[0].entry.fix)


def test_nccl_clock_drift_folklore_is_corrected() -> None:
    text = ("[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1234, OpType=ALLREDUCE, "
            "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600044 milliseconds before timing out.")
    best = diagnose_text(text)[0]
    assert best.entry.folklore and "clock" in best.entry.folklore.lower()
    assert "synchronize" in best.entry.folklore


def test_no_known_signature_gives_the_checklist() -> None:
    result = api.diagnose("everything is fine\nepoch 3 loss 1.23\n")
    assert not result.matches and result.checklist
    cli = runner.invoke(app, ["diagnose", "--text", "all good here"])
    assert cli.exit_code == 0 and "no known signature" in cli.stdout


def test_a_long_log_with_one_error_buried_in_it(tmp_path: Path) -> None:
    noise = "\n".join(f"step {i} | loss {1 / (i + 1):.4f} | lr 2e-4 | tokens/s 1830" for i in range(100_000))
    log = noise + "\nRuntimeError: CUDA error: an illegal memory access was encountered\n" + noise
    path = tmp_path / "train.log"
    path.write_text(log)
    result = runner.invoke(app, ["diagnose", str(path), "--json"])
    doc = json.loads(result.stdout)
    assert result.exit_code == 0 and doc["matches"]
    assert "illegal memory access" in doc["matches"][0]["evidence"][0]


def test_json_shape_and_stdin() -> None:
    text = "RuntimeError: CUDA error: no kernel image is available for execution on the device"
    result = runner.invoke(app, ["diagnose", "-", "--json"], input=text)
    doc = json.loads(result.stdout)
    first = doc["matches"][0]
    assert {"id", "title", "cause", "confirm", "fix", "sources", "score", "evidence"} <= set(first)
    assert first["evidence"] == [text]


def test_oom_with_model_and_batch_adds_the_memory_breakdown() -> None:
    log = ("loading meta-llama/Llama-3.1-8B ... per_device_train_batch_size=8, max_seq_length=4096\n"
           "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.91 GiB. GPU 0 has a total capacity of "
           "23.64 GiB of which 1.02 GiB is free.")
    result = api.diagnose(log)
    assert result.context.model == "llama-3.1-8b" and result.context.batch == 8 and result.context.seq == 4096
    assert result.memory_advice is not None and "the card has 23.6 GiB" in result.memory_advice
    assert "smallest change that fits" in result.memory_advice


def test_doctor_facts_confirm_a_cause() -> None:
    confirmed = [e for e in entries() if e.confirmed_by]
    assert confirmed, "some entries must name the doctor check that confirms them"
    entry = confirmed[0]
    fact = entry.confirmed_by[0]
    plain = api.diagnose(entry.samples[0])
    with_fact = api.diagnose(entry.samples[0], doctor_report={"checks": [{"id": fact.check, "status": fact.status}]})
    score = {m.entry.id: m.score for m in plain.matches}[entry.id]
    boosted = next(m for m in with_fact.matches if m.entry.id == entry.id)
    assert boosted.score > score and boosted.notes


def test_bad_input() -> None:
    result = runner.invoke(app, ["diagnose"])
    assert result.exit_code == 2
    result = runner.invoke(app, ["diagnose", "/nonexistent.log"])
    assert result.exit_code == 2 and "cannot read" in result.stderr


# Real out-of-memory messages, verbatim from the GitHub issues named beside them. The verdict in each comment is the
# arithmetic of PyTorch's own message: free + reserved-but-unallocated against the request.
FRAMEPACK = ("https://github.com/lllyasviel/FramePack/issues/369",  # 3.69 GiB + 396.58 MiB = 4.08 < 30.29 GiB
             "...CUDA out of memory. Tried to allocate 30.29 GiB. GPU 0 has a total capacity of 10.74 GiB of which "
             "3.69 GiB is free. Including non-PyTorch memory, this process has 6.68 GiB memory in use. Of the "
             "allocated memory 6.10 GiB is allocated by PyTorch, and 396.58 MiB is reserved by PyTorch but "
             "unallocated. If reserved but unallocated memory is large try setting "
             "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory "
             "Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")
WAN = ("https://github.com/Wan-Video/Wan2.1/issues/465",  # 15.88 MiB + 19.41 MiB = 35.29 MiB < 100 MiB
       "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 100.00 MiB. GPU 0 has a total capacity of "
       "31.37 GiB of which 15.88 MiB is free. Including non-PyTorch memory, this process has 31.34 GiB memory in use. "
       "Of the allocated memory 30.74 GiB is allocated by PyTorch, and 19.41 MiB is reserved by PyTorch but "
       "unallocated. If reserved but unallocated memory is large try setting "
       "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.")
COGVIDEO = ("https://github.com/zai-org/CogVideo/issues/36",  # before 2.1: 2.84 + (18.97 - 18.96) = 2.85 < 4.56 GiB
            "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.56 GiB (GPU 0; 23.68 GiB total "
            "capacity; 18.96 GiB already allocated; 2.84 GiB free; 18.97 GiB reserved in total by PyTorch) If "
            "reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.")
VGEN = ("https://github.com/ali-vilab/VGen/issues/104",  # 319.38 MiB + 999.90 MiB = 1,319.28 MiB >= 550 MiB
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 550.00 MiB. GPU 0 has a total capacity of "
        "23.64 GiB of which 319.38 MiB is free. Including non-PyTorch memory, this process has 22.88 GiB memory in "
        "use. Of the allocated memory 19.75 GiB is allocated by PyTorch, and 999.90 MiB is reserved by PyTorch but "
        "unallocated. If reserved but unallocated memory is large try setting "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.")
MGFN = ("https://github.com/carolchenyx/MGFN./issues/35",  # 0 bytes + 2.30 GiB >= 1.70 GiB ("capacty": PyTorch 2.1)
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.70 GiB. GPU 0 has a total capacty of "
        "6.00 GiB of which 0 bytes is free. Of the allocated memory 2.93 GiB is allocated by PyTorch, and 2.30 GiB is "
        "reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
        "max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and "
        "PYTORCH_CUDA_ALLOC_CONF")
TORCHCHAT = ("https://github.com/pytorch/torchchat/issues/1341",  # 38.31 MiB + 222.14 MiB = 260.45 MiB >= 64 MiB
             "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 64.00 MiB. GPU 0 has a total capacity of "
             "23.52 GiB of which 38.31 MiB is free. Including non-PyTorch memory, this process has 22.80 GiB memory in "
             "use. Of the allocated memory 22.10 GiB is allocated by PyTorch, and 222.14 MiB is reserved by PyTorch "
             "but unallocated. If reserved but unallocated memory is large try setting "
             "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory "
             "Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)\n```\n\n"
             "### Versions\n\nCollecting environment information...\nPyTorch version: 2.6.0.dev20241002+cu121\n"
             "Is CUDA available: True\nCUDA runtime version: 12.6.77\nGPU models and configuration: \n"
             "GPU 0: NVIDIA GeForce RTX 4090\nGPU 1: NVIDIA GeForce RTX 3090\n\nNvidia driver version: 560.35.03")
GIB, MIB = 2**30, 2**20


@pytest.mark.parametrize(("log", "fragmented"), [(FRAMEPACK, False), (WAN, False), (COGVIDEO, False), (VGEN, True),
                                                 (MGFN, True), (TORCHCHAT, True)],
                         ids=["framepack", "wan", "cogvideo-pre-2.1", "vgen", "mgfn-0-bytes", "torchchat"])
def test_fragmentation_leads_only_when_free_plus_reserved_covers_the_request(log: tuple[str, str],
                                                                           fragmented: bool) -> None:
    """Every PyTorch >= 2.1 message suggests expandable_segments; the fragmentation entry leads only where a
    contiguous reserve would have served the request, and the plain OOM leads (the job needs less memory) where
    not -- the arithmetic is shown."""
    matches = diagnose_text(log[1])
    first = matches[0].entry.id
    assert first == ("cuda-oom-fragmentation" if fragmented else "cuda-oom"), log[0]
    sign = ">=" if fragmented else "<"
    assert any(f" {sign} requested" in note for note in matches[0].notes)
    if not fragmented and any(m.entry.id == "cuda-oom-fragmentation" for m in matches):
        assert any("less likely" in n for m in matches if m.entry.id == "cuda-oom-fragmentation" for n in m.notes)


def test_the_messages_figures_are_read_in_bytes() -> None:
    new = read_oom(FRAMEPACK[1])
    assert new is not None and new.requested_bytes == pytest.approx(30.29 * GIB)
    assert new.free_bytes == pytest.approx(3.69 * GIB) and new.capacity_bytes == pytest.approx(10.74 * GIB)
    assert new.reserved_unallocated_bytes == pytest.approx(396.58 * MIB)
    assert new.servable_bytes == pytest.approx(3.69 * GIB + 396.58 * MIB) and new.fragmented is False
    old = read_oom(COGVIDEO[1])  # before PyTorch 2.1: reserved in total less already allocated
    assert old is not None and old.reserved_unallocated_bytes == pytest.approx(0.01 * GIB)
    assert old.free_bytes == pytest.approx(2.84 * GIB) and old.capacity_bytes == pytest.approx(23.68 * GIB)
    zero = read_oom(MGFN[1])
    assert zero is not None and zero.free_bytes == 0 and zero.capacity_bytes == pytest.approx(6 * GIB)
    assert read_oom("RuntimeError: CUDA error: an illegal memory access was encountered") is None


@pytest.mark.parametrize(("text", "method"), [
    ("model=meta-llama/Llama-3.1-8B method=lora batch=4", "lora"),  # the form issue 36 saw read as full
    # https://github.com/hiyouga/LlamaFactory/issues/6040 (its YAML config, as posted)
    ("### model\nmodel_name_or_path: /bjzhyai03/workhome/songzijun/huggingface/llama3_instruct\n"
     "#adapter_name_or_path: saves/llama3-8b/lora/sft\n\n### method\nstage: sft\ndo_predict: true\n"
     "finetuning_type: lora\n", "lora"),
    # https://github.com/hiyouga/LlamaFactory/issues/4559: a LoRA on a 4-bit base is QLoRA
    ("model_name_or_path: TechxGenus/Meta-Llama-3-70B-Instruct-GPTQ\nquantization_bit: 4\n\n### method\nstage: sft\n"
     "do_train: true\nfinetuning_type: lora\nlora_target: all\n", "qlora"),
    # https://github.com/bghira/SimpleTuner/issues/786
    ("2024-08-16 17:22:20,340 [INFO] (__main__) Using LoRA training mode (rank=4)", "lora"),
    # https://github.com/tloen/alpaca-lora/issues/389 (its parameter dump)
    ("Training Alpaca-LoRA model with params:\nbase_model: ../LLaMA-7B\nmicro_batch_size: 1\nlora_r: 8\n"
     "lora_alpha: 16\n", "lora"),
    # https://github.com/hiyouga/LlamaFactory/issues/7798: an environment dump lists PEFT whatever the method
    ("- Accelerate version: 1.2.1\n- PEFT version: 0.15.0\n- TRL version: 0.9.6\n- GPU type: NVIDIA GeForce RTX 5090",
     "full"),
    ("load_in_4bit=False\nper_device_train_batch_size=8", "full"),
])
def test_the_method_is_read_from_the_log(text: str, method: str) -> None:
    assert read_method(text) == method


@pytest.mark.parametrize(("text", "gpu"), [
    (TORCHCHAT[1], "rtx-4090"),  # GPU 0 of the environment dump, 23.52 GiB: an a10 is also 24 GB
    # https://github.com/RLinf/RLinf/issues/255: nvidia-smi's table pads the name
    ("|   0  NVIDIA GeForce RTX 4090        Off |   00000000:4E:00.0 Off |                  Off |\n"
     "| 30%   29C    P8             22W /  450W |     507MiB /  24564MiB |      0%      Default |", "rtx-4090"),
    # https://github.com/hiyouga/LlamaFactory/issues/7798: 31.36 GiB, as near a V100 32GB as an RTX 5090
    ("- GPU type: NVIDIA GeForce RTX 5090\n- GPU number: 1\n- GPU memory: 31.36GB\n"
     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.11 GiB. GPU 0 has a total capacity of 31.36 GiB "
     "of which 5.76 GiB is free.", "rtx-5090"),
    ("- PEFT version: 0.12.0\n- TRL version: 0.9.6\n- GPU type: NVIDIA A100-SXM4-40GB\n", "a100-sxm-40gb"),  # #6040
    # https://github.com/zai-org/GLM-4/issues/729: a card the catalog lacks is not taken for another
    ("|   0  NVIDIA RTX A5000               Off | 00000000:01:00.0 Off |                  Off |", None),
    # https://github.com/meta-llama/llama/issues/466: a plain 4070 is not the catalog's 4070 Ti SUPER
    ("|   0  NVIDIA GeForce RTX 4070         Off| 00000000:04:00.0 Off |", None),
    ("| NVIDIA-SMI 535.183.01             Driver Version: 535.183.01   CUDA Version: 12.2     |", None),
])
def test_the_card_is_read_from_the_log(text: str, gpu: str | None, shipped: Catalog) -> None:
    found = read_gpu(text, shipped, None)
    assert (found[0] if found else None) == gpu


def test_the_memory_advice_is_for_the_card_the_log_names() -> None:
    """issue 36: an RTX 4090's 23.52 GiB was sized like the first 24 GB record, an a10."""
    log = "loading meta-llama/Llama-3.1-8B method=lora per_device_train_batch_size=4\n" + TORCHCHAT[1]
    result = api.diagnose(log)
    assert result.context.gpu == "rtx-4090" and result.context.method == "lora"
    assert result.memory_advice is not None and "rtx-4090" in result.memory_advice
    assert "a10" not in result.memory_advice and "(lora," in result.memory_advice
    doc = json.loads(runner.invoke(app, ["diagnose", "-", "--json"], input=log).stdout)
    assert doc["context"]["gpu"] == "rtx-4090" and doc["context"]["gpu_name"] == "NVIDIA GeForce RTX 4090"
    assert doc["context"]["oom"]["requested_bytes"] == pytest.approx(64 * MIB)
    text = runner.invoke(app, ["diagnose", "-"], input=log, env={"COLUMNS": "200"}).stdout
    assert "38.31 MiB + reserved but unallocated 222.14 MiB = 260.45 MiB >= requested 64.00 MiB" in text


# ---- text from the log is text (issue 37) -------------------------------------------------------------------------
HOSTILE_OOM = ("torch.OutOfMemoryError: CUDA out of memory. \x1b[2J\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\"
               " \u202egnp.exe\r[/] [link=https://evil.example/]x[/link] [bold]")
CONTROLS = ("\x1b", "\u202e", "\r", "\x9b")


def test_the_logs_lines_reach_the_terminal_and_json_as_plain_text(tmp_path: Path) -> None:
    path = tmp_path / "hostile.log"
    path.write_text(HOSTILE_OOM)
    shown = runner.invoke(app, ["diagnose", str(path)], env={"COLUMNS": "400"})  # one evidence line
    assert shown.exit_code == 0, shown.output  # was exit 1: rich read the log's "[/]" as a closing tag
    assert not any(c in shown.stdout for c in CONTROLS), repr(shown.stdout)
    assert " gnp.exe[/] [link=https://evil.example/]x[/link] [bold]" in shown.stdout  # shown, not obeyed
    evidence = json.loads(runner.invoke(app, ["diagnose", str(path), "--json"]).stdout)["matches"][0]["evidence"]
    assert evidence == ["torch.OutOfMemoryError: CUDA out of memory. [2J]8;;https://evil.example/\\click]8;;\\ gnp.exe"
                        "[/] [link=https://evil.example/]x[/link] [bold]"]


def test_the_knowledge_bases_brackets_are_shown_not_read_as_markup() -> None:
    # the Docker entry quotes `capabilities: [[gpu]]`; rich read [gpu] as a style and printed "capabilities: []"
    log = 'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].'
    shown = runner.invoke(app, ["diagnose", "--text", log], env={"COLUMNS": "400"})
    assert shown.exit_code == 0 and shown.stdout.count("capabilities: [[gpu]]") >= 2, shown.stdout
