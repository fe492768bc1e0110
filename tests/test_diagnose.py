"""`gpuwise diagnose`: every real error text in the knowledge base maps to its entry; doctor facts weigh in."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuwise import api
from gpuwise.cli.main import app
from gpuwise.troubleshoot.kb import entries
from gpuwise.troubleshoot.matcher import diagnose_text

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
