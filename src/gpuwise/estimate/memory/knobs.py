"""The memory knobs of a training job: what each changes, what it costs, and whether the card's stack can run it --
one table for `fit` (which lists them to the user) and `recommend` (which turns on those the user left free).

A knob runs on a card when the changed job needs nothing of the card that the job did not already need
(estimate/compat.py, the one compatibility table: bitsandbytes for 8-bit optimizers and QLoRA, FlashAttention-2).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gpuwise.catalog import GPU
from gpuwise.estimate.compat import unmet
from gpuwise.workload.jobs.job import Job, TrainJob
from gpuwise.workload.model.architecture import Architecture


@dataclass(frozen=True)
class Knob:
    """One change to a job: its flags, what it is, and what it costs."""

    flag: str
    what: str
    cost: str
    changes: Mapping[str, object] = field(default_factory=dict)
    free: str = ""  # the job field the user must have left free for recommend to turn this knob on

    def runs_on(self, job: Job, gpu: GPU) -> bool:
        """The changed job needs nothing of ``gpu``'s chip or stack that ``job`` did not already need."""
        return set(unmet(job.updated(**self.changes), gpu)) <= set(unmet(job, gpu))


CHECKPOINTING = Knob("--ckpt full", "activation checkpointing",
                     "the backward recomputes each layer's forward: about a third more compute", {"ckpt": "full"},
                     free="ckpt")
FUSED_LOSS = Knob("--loss fused", "a fused linear cross-entropy (Liger's use_liger_kernel, Unsloth)",
                  "the logits never exist whole, at about the same speed; needs Liger or Unsloth", {"loss": "fused"},
                  free="loss")
CHUNKED_LOSS = Knob("--loss chunked", "a chunked cross-entropy (torchtune CEWithChunkedOutputLoss)",
                    "none; torchtune or a custom loss", {"loss": "chunked"})
EIGHT_BIT_ADAM = Knob("--optimizer adamw-8bit", "8-bit AdamW states (bitsandbytes)",
                      "a quarter of the state memory, about the same speed and quality", {"optimizer": "adamw-8bit"},
                      free="optimizer")


def smaller_micro_batches(job: TrainJob) -> list[Knob]:
    """Halve the micro-batch, then 1, keeping the sequences per optimizer step by gradient accumulation."""
    if job.batch <= 1 or job.optimizer_in_backward:
        return []
    keep = job.global_batch or job.batch * job.data_parallel
    return [Knob(f"--batch {batch} --global-batch {keep}", f"micro-batch {batch} with gradient accumulation",
                 f"the same {keep} sequences per step in smaller, less efficient steps",
                 {"batch": batch, "global_batch": keep}, free="batch")
            for batch in sorted({job.batch // 2, 1}, reverse=True)]


def free_knobs(arch: Architecture, template: TrainJob, job: TrainJob, gpu: GPU) -> list[Knob]:
    """The knobs ``recommend`` may turn on when the user left their field free, cheapest first, on this card;
    ``job`` as its plan resolved it (a field --framework's recipe filled is the recipe's, not free)."""
    candidates = [CHECKPOINTING] if job.ckpt != "full" else []
    if job.loss == "standard" and arch.lm_head:
        candidates.append(FUSED_LOSS)
    if job.optimizer == "adamw":
        candidates.append(EIGHT_BIT_ADAM)
    candidates += smaller_micro_batches(job)
    given = template.model_fields_set | set(job.framework_filled)
    return [k for k in candidates if k.free not in given and k.runs_on(job, gpu)]
