"""Memory and seconds per image of a diffusers text-to-image pipeline on one GPU.

Memory (what is on the GPU at its peak, by diffusers' offload mode, diffusers 0.42.1 pipeline_utils.py):
  none        every component resident, plus the larger of the denoiser's and the VAE decode's activations
  model-cpu   enable_model_cpu_offload moves one whole component to the GPU when it runs and back when the next
              one starts: the peak is the largest component with its own activations
  sequential  enable_sequential_cpu_offload streams each submodule's weights for every forward: the peak is the
              largest block plus the activations
Denoiser weights: bf16/fp16 2 bytes; fp8 layerwise casting 1 byte except the layers it skips (norm*, the
modulation linears: diffusers hooks/layerwise_casting.py, FluxTransformer2DModel._skip_layerwise_casting_patterns);
nf4 (bitsandbytes) 4.5 bits per nn.Linear weight, the rest 2 bytes. Both upcast to the compute dtype per layer, so
the matmuls run at the 16-bit rate.

Time per pipeline call: the text encoders once per prompt, ``steps`` denoiser forwards of batch x guidance passes
images, one VAE decode of the batch (SDXL's in fp32, which cuDNN runs on TF32 tensor cores: torch.backends.cudnn
.allow_tf32 defaults to True), plus the host copies the offload mode makes. Each forward is a roofline over its
linear layers, each convolution with the layout transposes cuDNN runs around it, attention, the weight reads and the
memory-bound passes its diffusers forward code makes (estimate/image/operators.py, layers.py); never shorter than
eager PyTorch's host dispatch of its operators (the modules' traced counts, workload/diffusion/denoisers.py
DISPATCHES, at the diffusers profile's cost each).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gpuwise.catalog import GPU, Catalog
from gpuwise.estimate import constants as C
from gpuwise.estimate.dtypes import BITS, activation_bytes
from gpuwise.estimate.image.operators import (
    decoder_forward,
    denoiser_forward,
    forward_ops,
    runs_nchw_transposes,
    sdpa_kernel,
)
from gpuwise.estimate.image.streaming import (
    Residency,
    copy_overhead_s,
    loads_note,
    peak_parts,
    residency,
    tiled_area_ratio,
    with_overheads,
)
from gpuwise.estimate.memory.breakdown import MemoryEstimate, for_card
from gpuwise.estimate.plan import ImagePlan, resolve
from gpuwise.estimate.roofline import Op, machine, phase_time
from gpuwise.estimate.speed.convolutions import conv_dtype
from gpuwise.estimate.speed.eager import encoder_layer_ops
from gpuwise.estimate.speed.stacks import unmeasured_stack_factor, unmeasured_stack_note
from gpuwise.runtimes.engines import HF as TRANSFORMERS
from gpuwise.workload.diffusion.denoisers import Tally
from gpuwise.workload.diffusion.pipeline import Pipeline
from gpuwise.workload.jobs.image import ImageJob


@dataclass(frozen=True)
class ImageEstimate:
    pipeline: Pipeline
    gpu: GPU
    job: ImageJob  # with the pipeline's defaults filled in (the plan's)
    memory: MemoryEstimate
    weights_bytes: Mapping[str, float]  # each component as stored for this job
    seconds_per_call: float | None  # one pipeline call of job.batch images
    phases_s: Mapping[str, float]  # text, denoise, decode, host copies
    warnings: tuple[str, ...]
    assumptions: tuple[str, ...]
    plan: ImagePlan  # the job as resolved on the card: what every figure was computed from
    working_set_bytes: float | None = None  # a runtime that loads by free memory: the most one phase needs loaded

    @property
    def seconds_per_image(self) -> float | None:
        return None if self.seconds_per_call is None else self.seconds_per_call / self.job.batch

    @property
    def images_per_s(self) -> float | None:
        per = self.seconds_per_image
        return 1 / per if per else None


def denoiser_bytes(tally: Tally, quant: str, fp8_every_linear: bool = False) -> float:
    """fp8: one byte but for the layers diffusers' casting skips (with ``fp8_every_linear``, as ComfyUI stores it:
    every linear weight one byte, the rest 2); nf4 and GGUF: their bits per nn.Linear weight (GGUF files of
    image models quantize the 2-D weights and keep norms and biases in 16 or 32 bits, city96/ComfyUI-GGUF
    tools/convert.py), the rest 2 bytes."""
    if quant == "fp8" and not fp8_every_linear:
        return (tally.params - tally.kept_by_casting) * 1 + tally.kept_by_casting * 2
    if quant == "fp8":
        return tally.linear_weights * 1 + (tally.params - tally.linear_weights) * 2
    if quant == "nf4" or quant.startswith("gguf-"):
        bits = C.NF4_BNB_BITS.value if quant == "nf4" else BITS[quant]
        return tally.linear_weights * bits / 8 + (tally.params - tally.linear_weights) * 2
    return tally.params * activation_bytes(quant)


def component_bytes(plan: ImagePlan) -> dict[str, float]:
    pipeline = plan.pipeline
    encoder, decoder = pipeline.vae_parts(plan.resolution)
    parts = {pipeline.denoiser_name: denoiser_bytes(pipeline.denoiser(plan.resolution), plan.quant,
                                                    plan.image.fp8_every_linear.value)}
    parts.update({t.name: t.params * plan.act_bytes for t in pipeline.text_encoders})
    parts["vae"] = (encoder.params + decoder.params) * plan.vae_act_bytes
    return parts


def activations_by_component(plan: ImagePlan) -> dict[str, float]:
    """Peak activation bytes of each component: the most tensors alive in one layer plus what is held across
    layers, for every image the forward carries."""
    pipeline, batch = plan.pipeline, plan.job.batch
    den, (_, dec) = pipeline.denoiser(plan.resolution), pipeline.vae_parts(plan.resolution)
    images = batch * plan.guidance_passes
    found = {pipeline.denoiser_name: (den.live_elements + den.held_elements) * images * plan.act_bytes,
             "vae": dec.live_elements * batch * plan.vae_act_bytes}
    found.update({t.name: 0.0 for t in pipeline.text_encoders})  # 77-512 tokens: megabytes
    return found


def _peak_parts(plan: ImagePlan, weights: Mapping[str, float]) -> dict[str, float]:
    acts = activations_by_component(plan)
    if plan.offload == "none" or plan.shares_host_memory:
        parts = {f"weights: {name}": b for name, b in weights.items()}
        parts["activations"] = max(acts.values())
        return parts
    if plan.offload == "model-cpu":
        biggest = max(weights, key=lambda n: weights[n] + acts[n])
        return {f"weights: {biggest} (the others on the CPU)": weights[biggest], "activations": acts[biggest]}
    den = plan.pipeline.denoiser(plan.resolution)
    block = max(den.blocks) * denoiser_bytes(den, plan.quant) / den.params
    return {"weights: the largest block (streamed)": block, "activations": max(acts.values())}


def holding(plan: ImagePlan, weights: Mapping[str, float]) -> Residency | None:
    """How a runtime that loads by free memory (ComfyUI) holds the pipeline on the plan's card; None for diffusers,
    and on a machine whose GPU shares the host's memory (nothing to stream from)."""
    image = plan.image
    if not image.streams_by_free_memory.value or plan.shares_host_memory:
        return None
    tiling = image.tiled_decode
    tile_share = tiled_area_ratio(plan.resolution, tiling.value)[1] if tiling is not None else None
    return residency(weights, activations_by_component(plan), plan.offload, plan.gpu.usable_memory_bytes, image,
                     tile_share)


def _attention_kernels(plan: ImagePlan) -> str:
    """The kernels SDPA runs for the denoiser's heads and the VAE's one head as wide as its last level's channels. A
    UNet config's attention_head_dim is its head count per level (diffusers' naming): the width is channels / heads."""
    config = plan.pipeline.denoiser_config
    heads, channels = config.get("attention_head_dim", 64), config.get("block_out_channels", (64,))
    if plan.pipeline.is_dit:
        head = int(heads)
    else:
        counts = heads if isinstance(heads, list) else [heads] * len(channels)
        head = max(int(c) // int(n) for c, n in zip(channels, counts, strict=False))
    vae_head = int(plan.pipeline.vae_config.get("block_out_channels", (512,))[-1])
    den = sdpa_kernel(plan.gpu, plan.matmul_dtype, head)
    return f"{den} in the denoiser, {sdpa_kernel(plan.gpu, plan.vae_dtype, vae_head)} in the VAE"


def _offload_words(plan: ImagePlan) -> str:
    own = plan.image.offload_modes.value[plan.offload]
    return f"offload {plan.offload} ({plan.runtime.name}: {own}): " + {
        "none": "every component stays on the GPU", "auto": "what fits in free memory stays, the rest streams",
        "model-cpu": "one component on the GPU at a time", "sequential": "weights streamed per submodule"
    }[plan.offload]


def image_memory(plan: ImagePlan) -> tuple[MemoryEstimate, dict[str, float]]:
    pipeline, gpu = plan.pipeline, plan.gpu
    weights = component_bytes(plan)
    held = holding(plan, weights)
    acts = activations_by_component(plan)
    parts = (peak_parts(held, weights, acts, plan.image, pipeline.denoiser_name) if held else
             _peak_parts(plan, weights))
    parts["CUDA context, workspaces"] = C.CUDA_CONTEXT.value + C.CUBLAS_WORKSPACE.value
    parts["allocator reserve"] = sum(parts.values()) * C.ALLOCATOR_RESERVE.value
    assumptions = (
        f"{pipeline.name}: {pipeline.total_params:,} parameters ("
        + ", ".join(f"{n} {p:,}" for n, p in pipeline.params().items()) + "), counted from each config.json",
        f"denoiser weights {plan.quant}; text encoders {plan.compute_dtype}; VAE decodes in {plan.vae_dtype} "
        f"(fp32 only where diffusers upcasts an fp16 VAE; {pipeline.defaults.source.split(':')[0]})",
        _offload_words(plan) + (f"; {loads_note(held, weights)}" if held else ""),
        f"attention through PyTorch SDPA: {_attention_kernels(plan)}; no score matrix is kept",
    ) + (("the VAE decode runs in tiles (it does not fit whole): ComfyUI's retry after an out-of-memory error",)
         if held and held.tiled_decode else ())
    memory = MemoryEstimate(breakdown_bytes=parts, capacity_bytes=gpu.usable_memory_bytes,
                            cuda_context_bytes=C.CUDA_CONTEXT.value, assumptions=assumptions)
    return for_card(memory, gpu), weights


def _dequant_op(tally: Tally, quant: str) -> list[Op]:
    """fp8, nf4 and GGUF weights are upcast to 16-bit each forward: read the stored bytes, write and read 16-bit
    ones."""
    if quant in ("bf16", "fp16"):
        return []
    stored = denoiser_bytes(tally, quant) - (tally.params - tally.linear_weights) * 2
    return [Op("weight upcast", "memory", 0.0, stored + 2 * tally.linear_weights * 2, tally.kernels // 3)]


def _transfer_s(plan: ImagePlan, weights: Mapping[str, float], rate: float) -> float:
    """diffusers' copies per call at the pageable rate ``rate``: model-cpu moves each component to the GPU and back,
    sequential streams the denoiser's weights every step and the others once."""
    if plan.offload == "model-cpu":
        return 2 * sum(weights.values()) / rate
    if plan.offload != "sequential":
        return 0.0
    denoiser = plan.pipeline.denoiser_name
    others = sum(b for n, b in weights.items() if n != denoiser)
    return (plan.steps * weights[denoiser] + others) / rate


def _copies_s(plan: ImagePlan, catalog: Catalog, weights: Mapping[str, float],
              compute_s: Mapping[str, float]) -> float:
    """Seconds per call spent copying weights from host memory, beyond the compute they overlap."""
    link = catalog.interconnects.get(plan.gpu.native_link)
    if link is None or plan.shares_host_memory:  # a unified-memory machine maps host memory, it does not copy
        return 0.0
    held = holding(plan, weights)
    if held is None:
        return _transfer_s(plan, weights, link.achieved_bytes_per_s * C.HOST_COPY_PAGEABLE.value)
    return copy_overhead_s(held, plan.steps, plan.pipeline.denoiser_name, compute_s, link.achieved_bytes_per_s)


def _decode_factor(plan: ImagePlan, weights: Mapping[str, float]) -> float:
    """1, or how much more latent a tiled decode covers (its passes and overlaps) than one whole decode."""
    held, tiling = holding(plan, weights), plan.image.tiled_decode
    if held is None or not held.tiled_decode or not tiling:
        return 1.0
    return tiled_area_ratio(plan.resolution, tiling.value)[0]


def image_phases(plan: ImagePlan, catalog: Catalog, weights: Mapping[str, float]) -> dict[str, float]:
    pipeline, gpu, batch = plan.pipeline, plan.gpu, plan.job.batch
    m = machine(gpu, plan.matmul_dtype)
    den, (_, dec) = pipeline.denoiser(plan.resolution), pipeline.vae_parts(plan.resolution)
    den_ops = forward_ops("denoiser", den, denoiser_forward(pipeline, plan.resolution, plan.act_bytes),
                          images=batch * plan.guidance_passes, weight_bytes=weights[pipeline.denoiser_name],
                          act_bytes=plan.act_bytes, transposes=runs_nchw_transposes(gpu, plan.matmul_dtype))
    step = max(phase_time(den_ops + _dequant_op(den, plan.quant), m).seconds, _host_s(plan, den.dispatches))
    vae_dtype = conv_dtype(plan.vae_dtype, gpu)
    vae_ops = forward_ops("vae", dec, decoder_forward(pipeline, plan.resolution, plan.vae_act_bytes), images=batch,
                          weight_bytes=weights["vae"], act_bytes=plan.vae_act_bytes,
                          transposes=runs_nchw_transposes(gpu, vae_dtype), fp32_attention=vae_dtype == "tf32")
    decode = max(phase_time(vae_ops, machine(gpu, plan.vae_matmul_dtype)).seconds, _host_s(plan, dec.dispatches))
    decode *= _decode_factor(plan, weights)
    slower = 1 / unmeasured_stack_factor(gpu)  # a stack no published diffusers timing checks (estimate/speed/stacks.py)
    compute = {t.name: max(phase_time([Op(t.name, "gemm", t.flops(pipeline.defaults.text_tokens) * batch,
                                          weights[t.name], 1)], m).seconds, _text_encoder_host_s(t.layers)) * slower
               for t in pipeline.text_encoders}
    compute.update({pipeline.denoiser_name: plan.steps * step * slower, "vae": decode * slower})
    text = sum(compute[t.name] for t in pipeline.text_encoders)
    return {"text encoders": text, "denoising": compute[pipeline.denoiser_name], "VAE decode": compute["vae"],
            "host copies (offload)": _copies_s(plan, catalog, weights, compute)}


def _host_s(plan: ImagePlan, dispatches: int) -> float:
    """The host's time to dispatch a forward operator by operator (eager PyTorch): a step's floor."""
    cost = plan.runtime.launch_cost_s
    return dispatches * cost.value if cost is not None else 0.0


def _text_encoder_host_s(layers: int) -> float:
    """A transformers text encoder (CLIP, T5) dispatches its layers' operators at transformers' own cost per
    operator (runtimes/engines.py HF)."""
    ops, cost = TRANSFORMERS.host_ops, TRANSFORMERS.launch_cost_s
    if ops is None or cost is None:
        return 0.0
    return (ops.per_forward + layers * encoder_layer_ops(ops)) * cost.value


def image_estimate(pipeline: Pipeline, job: ImageJob, gpu: GPU, catalog: Catalog | None = None) -> ImageEstimate:
    """Memory of ``job`` on ``gpu``; with ``catalog`` (its host links) also the seconds per image."""
    plan = resolve(pipeline, job, gpu)
    job = plan.job
    memory, weights = image_memory(plan)
    phases = image_phases(plan, catalog, weights) if catalog is not None else {}
    warnings = []
    if job.quant == "fp16" and pipeline.defaults.dtype == "bf16":
        warnings.append(f"{pipeline.name} is trained in bf16: fp16 activations can overflow (black images)")
    if plan.shares_host_memory and plan.offload not in ("none", "auto"):
        warnings.append(f"{gpu.id} shares one memory between CPU and GPU: offloading to the CPU frees nothing, "
                        "every component counts")
    if gpu.software.stack != "cuda":
        backend = {"rocm": "ROCm", "oneapi": "XPU", "metal": "MPS", "synapseai": "HPU"}[gpu.software.stack]
        cut = unmeasured_stack_note(gpu, None, plan.runtime.name)
        warnings.append(f"{plan.runtime.name} runs here through PyTorch's {backend} backend and no published "
                        "image-pipeline timing checks it" + (f"; {cut[0]}" if cut else ""))
    held = holding(plan, weights)
    working_set = with_overheads(held.one_phase_bytes) if held and held.all_loaded else None
    return ImageEstimate(pipeline, gpu, job, memory, weights, sum(phases.values()) if phases else None, phases,
                         tuple(warnings), memory.assumptions, plan, working_set)


@dataclass(frozen=True)
class ImageOption:
    flags: str  # what to add to the command line
    estimate: ImageEstimate


@dataclass(frozen=True)
class ImageFit:
    estimate: ImageEstimate
    options: tuple[ImageOption, ...]  # the settings that fit, fastest first


def image_fit(pipeline: Pipeline, job: ImageJob, gpu: GPU, catalog: Catalog) -> ImageFit:
    """The estimate, and every offload mode x denoiser format the runtime takes (at batch 1 when a batch does not
    fit) that fits, fastest first: the changes a user can make on this card."""
    asked = image_estimate(pipeline, job, gpu, catalog)
    plan = asked.plan
    formats = plan.runtime.weight_formats.value
    modes = tuple(plan.image.offload_modes.value)
    offloads = modes[:1] if plan.shares_host_memory else modes
    quants = [q for q in dict.fromkeys((pipeline.defaults.dtype, "fp8", "gguf-q8_0", "nf4", "gguf-q4_k_m"))
              if formats is None or q in formats]
    found: list[ImageOption] = []
    for batch in dict.fromkeys((job.batch, 1)):
        for offload in offloads:
            for quant in quants:
                tried = job.model_copy(update={"batch": batch, "offload": offload, "quant": quant})
                result = image_estimate(pipeline, tried, gpu, catalog)
                if result.memory.fits:
                    flags = f"--offload {offload} --quant {quant}" + (f" --batch {batch}" if batch != job.batch else "")
                    found.append(ImageOption(flags, result))
        if found:
            break
    found.sort(key=lambda o: o.estimate.seconds_per_image or float("inf"))
    return ImageFit(asked, tuple(found))
