"""The transformers / PEFT / bitsandbytes settings that match an estimated training job (`fit --emit hf`)."""

from __future__ import annotations

from gpuwise.api import FitReport, TrainJob
from gpuwise.api.launching import TRANSFORMERS_OPTIMIZERS

_ATTN_TARGETS = '["q_proj", "k_proj", "v_proj", "o_proj"]'


def hf_settings(report: FitReport) -> str:
    """Python source a user can paste as a starting point; it states the model and card it was sized for."""
    job = report.estimate.job
    if not isinstance(job, TrainJob):
        return "# --emit hf covers training jobs; for serving see your engine's memory settings\n"
    micro = min(report.largest_batch, job.batch) or 1
    lines = [
        f"# gpuwise: {report.estimate.model.name} on {job.count} x {report.estimate.gpu.id}, "
        f"seq {job.seq}, {job.method}",
        "import torch",
        "from transformers import TrainingArguments",
    ]
    if job.trains_adapters:
        lines.append("from peft import LoraConfig")
    if job.method == "qlora":
        lines += [
            "from transformers import BitsAndBytesConfig",
            "",
            "bnb_config = BitsAndBytesConfig(",
            "    load_in_4bit=True,",
            '    bnb_4bit_quant_type="nf4",',
            "    bnb_4bit_use_double_quant=True,",
            f"    bnb_4bit_compute_dtype=torch.{'float16' if job.precision == 'fp16' else 'bfloat16'},",
            ")",
        ]
    if job.trains_adapters:
        targets = _ATTN_TARGETS if job.lora_targets == "attn" else '"all-linear"'
        lines += ["", "lora_config = LoraConfig(", f"    r={job.lora_rank},", f"    lora_alpha={2 * job.lora_rank},",
                  f"    target_modules={targets},", "    lora_dropout=0.05,", '    task_type="CAUSAL_LM",', ")"]
    lines += [
        "",
        "training_args = TrainingArguments(",
        '    output_dir="out",',
        f"    per_device_train_batch_size={micro},",
        f"    gradient_accumulation_steps={report.gradient_accumulation or 1},",
        f"    gradient_checkpointing={job.ckpt == 'full'},",
        f"    bf16={job.precision in ('bf16', 'pure-bf16')},",
        f"    fp16={job.precision == 'fp16'},",
        f'    optim="{TRANSFORMERS_OPTIMIZERS[job.optimizer]}",',
        ")",
    ]
    if job.flash_attn:
        lines.append('# load the model with attn_implementation="flash_attention_2" (or "sdpa")')
    if job.zero:
        lines.append(f"# launch with DeepSpeed ZeRO stage {job.zero} or FSDP full_shard over {job.count} GPUs")
    return "\n".join(lines) + "\n"
