"""Images into a job: a vision transformer's sequence is its image's patches, not a text length; and a text
encoder's request is one forward pass over at most its positions.

ViT cuts a side-s image into (s / patch)^2 patches and adds a class token (Dosovitskiy et al. 2020, eq. 1): 197
tokens at 224 px with 16-pixel patches. SAM's encoder has no class token: 4,096 at 1024 px. A convolutional network
takes the side itself (estimate/speed/convolutions.py). ``--image-size`` names the side; a language model takes none.
"""

from __future__ import annotations

from gpuwise.errors import ConfigError
from gpuwise.workload.jobs.job import InferJob, TrainJob
from gpuwise.workload.model.architecture import Architecture
from gpuwise.workload.model.sam import SAM_FAMILY

_DEFAULT_SEQ = {TrainJob: 2048, InferJob: 1024}  # the fields' defaults: a vision job that names no text length


def image_tokens(arch: Architecture, image_size: int | None) -> int:
    """Tokens one image makes in a vision transformer at ``image_size`` pixels (the model's own side by default)."""
    side = image_size or int(arch.config.get("image_size", 224))
    patch = int(arch.config.get("patch_size", 16))
    if side % patch:
        raise ConfigError(f"--image-size {side} is not a multiple of {arch.name}'s {patch}-pixel patches")
    return (side // patch) ** 2 + (1 if arch.family == "vit" else 0)


def for_images(arch: Architecture, job: TrainJob | InferJob) -> TrainJob | InferJob:
    """The job as the model sees it: a vision transformer's sequence set to its image's tokens; ``--image-size``
    refused for a model that takes no images, and a text length for one that takes images."""
    if arch.kind not in ("vision", "cnn"):
        if job.image_size is not None:
            raise ConfigError(f"--image-size applies to vision models (ResNet, ViT, SAM, YOLO, U-Net); {arch.name} "
                              "takes text: give --seq or --input-len")
        return job
    if arch.kind == "cnn":
        return job
    tokens = image_tokens(arch, job.image_size)
    length = job.seq if isinstance(job, TrainJob) else job.input_len
    if length not in (tokens, _DEFAULT_SEQ[type(job)]):
        flag = "--seq" if isinstance(job, TrainJob) else "--input-len"
        raise ConfigError(f"{flag} {length}: {arch.name}'s sequence is its image's patches ({tokens} tokens); give "
                          "--image-size instead")
    changes: dict[str, object] = {"seq": tokens} if isinstance(job, TrainJob) else {"input_len": tokens,
                                                                                    "output_len": 0}
    if arch.family == SAM_FAMILY and arch.config.get("use_rel_pos", True):
        # segment-anything and transformers add the decomposed relative-position bias to explicit q.k scores
        # (image_encoder.py Attention.forward, modeling_sam.py SamVisionAttention): no fused attention kernel
        changes["flash_attn"] = False
    return job.model_copy(update=changes)


def for_encoder(arch: Architecture, job: TrainJob | InferJob) -> TrainJob | InferJob:
    """A text encoder (BERT) served: one forward pass over the prompt, generating nothing; the default prompt capped
    at the model's positions (BERT's 512). A given --output-len is refused: an encoder has nothing to generate."""
    if not isinstance(job, InferJob) or arch.kind != "encoder":
        return job
    defaults = InferJob.model_fields
    if job.output_len not in (0, defaults["output_len"].default):
        raise ConfigError(f"--output-len {job.output_len}: {arch.name} is an encoder and generates nothing; give "
                          "--input-len, the tokens of each request")
    prompt = job.input_len
    if prompt == defaults["input_len"].default and arch.max_positions:
        prompt = min(prompt, arch.max_positions)
    return job.model_copy(update={"input_len": prompt, "output_len": 0})
