"""How a traced step is set up to run as the job says (workload/trace/steps.py runs it): the model class, PEFT adapters,
an NF4 base for QLoRA, the loss and the optimizer, each as the library that implements it does.

- LoRA: peft.get_peft_model with LoraConfig(r, target_modules, lora_dropout=0); under mixed precision PEFT keeps the
  adapters in fp32 (autocast_adapter_dtype=True), in a pure-bf16 run in bf16.
- QLoRA: bitsandbytes has no fake-tensor CPU path, so each base linear becomes ``NF4Linear``: the packed 4-bit codes
  (uint8, two per byte), the double-quantized absmax (uint8 per 64 weights, fp32 per 256 of those) and, in forward and
  again in backward, a dequantized 16-bit copy that lives for one matmul (bitsandbytes autograd/_functions.py
  MatMul4Bit: F.linear(A, dequantize_4bit(B).to(A.dtype).t()), saving nothing of B's size). PEFT's
  prepare_model_for_kbit_training upcasts the other parameters (embeddings, norms, head) to fp32 under mixed precision.
- --loss chunked: torchtune's CEWithChunkedOutputLoss over the model's output projection applied to 8 chunks of the
  hidden states (torchtune modules/transformer.py num_output_chunks), the 16-bit chunks deleted before backward.
- --optim-in-bwd: one optimizer per parameter stepped from register_post_accumulate_grad_hook (torchtune
  training/memory.py register_optim_in_bwd_hooks).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

from gpuwise.errors import ConfigError

CHUNKS = 8  # torchtune CEWithChunkedOutputLoss(num_output_chunks=8)
_HEADS = {"ForSequenceClassification": "AutoModelForSequenceClassification", "ForMaskedLM": "AutoModelForMaskedLM",
          "ForImageClassification": "AutoModelForImageClassification"}
_LABELS = {"ForSequenceClassification": "classes", "ForImageClassification": "images"}


def model_class(transformers: Any, config: Mapping[str, Any]) -> tuple[Any, str]:
    """The Auto class that builds the config's own head, and what its inputs and labels are ("tokens", "classes" for
    a sequence classifier, "images" for an image classifier)."""
    named = str((config.get("architectures") or [""])[0])
    for suffix, auto in _HEADS.items():
        if named.endswith(suffix):
            return getattr(transformers, auto), _LABELS.get(suffix, "tokens")
    if "vision_config" in config:  # a VLM: its text model runs the tokens, its vision tower is only held
        return transformers.AutoModelForImageTextToText, "tokens"
    return transformers.AutoModelForCausalLM, "tokens"


def add_adapters(torch: Any, model: Any, job: Any) -> Any:
    """PEFT LoRA adapters on the job's targets (a QLoRA base in NF4 first), the base frozen."""
    try:
        import peft
    except ImportError:
        raise ConfigError("--trace of --method lora/qlora needs PEFT: pip install 'peft>=0.13'") from None
    targets = ["q_proj", "k_proj", "v_proj", "o_proj"] if job.lora_targets == "attn" else "all-linear"
    lora = peft.LoraConfig(r=job.lora_rank, lora_alpha=2 * job.lora_rank, lora_dropout=0.0, target_modules=targets)
    mixed = job.precision in ("bf16", "fp16")
    try:
        with warnings.catch_warnings():  # PEFT notes the expert rank patterns it sets for fused MoE weights
            warnings.simplefilter("ignore", RuntimeWarning)
            model = peft.get_peft_model(model, lora, autocast_adapter_dtype=mixed)
    except ValueError as exc:
        raise ConfigError(f"PEFT cannot place LoRA adapters on this model: {str(exc)[:120]}") from None
    if job.method == "qlora":
        _quantize_base(torch, model, wide=torch.float32 if mixed else torch.bfloat16)
    return model


def _quantize_base(torch: Any, model: Any, wide: Any) -> None:
    from peft.tuners.lora import LoraLayer

    for module in list(model.modules()):
        if isinstance(module, LoraLayer) and isinstance(module.base_layer, torch.nn.Linear):
            module.base_layer = _nf4_linear_class(torch)(module.base_layer)
    for name, param in model.named_parameters():  # prepare_model_for_kbit_training
        if not param.requires_grad and param.dtype != wide and "lora_" not in name:
            param.data = param.data.to(wide)


def _nf4_linear_class(torch: Any) -> Any:
    class Dequantized(torch.autograd.Function):  # type: ignore[misc]
        """y = x W^T with W rebuilt from its codes for this matmul only, in forward and in backward."""

        @staticmethod
        def forward(ctx: Any, x: Any, codes: Any, shape: Any) -> Any:
            ctx.shape = shape
            ctx.save_for_backward(codes)
            return x @ torch.empty(shape, dtype=x.dtype).t()

        @staticmethod
        def backward(ctx: Any, grad: Any) -> Any:
            return grad @ torch.empty(ctx.shape, dtype=grad.dtype), None, None

    class NF4Linear(torch.nn.Module):  # type: ignore[misc]
        def __init__(self, linear: Any) -> None:
            super().__init__()
            out, inp = linear.weight.shape
            n = out * inp
            self.shape = (out, inp)
            self.register_buffer("codes", torch.empty(n // 2, dtype=torch.uint8))
            self.register_buffer("absmax", torch.empty(-(-n // 64), dtype=torch.uint8))
            self.register_buffer("absmax_scale", torch.empty(-(-n // (64 * 256)), dtype=torch.float32))
            self.bias = linear.bias
            self.in_features, self.out_features = inp, out
            # what PEFT reads for the dtype and device: a buffer, so that to_empty makes it fake too
            self.register_buffer("weight", torch.empty(0, dtype=linear.weight.dtype), persistent=False)

        def forward(self, x: Any) -> Any:  # bitsandbytes Linear4bit: compute in bf16, return the input's dtype
            y = Dequantized.apply(x.to(torch.bfloat16), self.codes, self.shape)
            return (y if self.bias is None else y + self.bias).to(x.dtype)

    return NF4Linear


def make_optimizer(torch: Any, model: Any, job: Any) -> Any:
    """The job's optimizer over the trainable parameters (fused AdamW, as the HF Trainer's adamw_torch_fused), or
    None when each parameter steps in backward."""
    trainable = [p for p in model.parameters() if p.requires_grad]

    def one(params: list[Any]) -> Any:
        if job.optimizer == "sgd":
            return torch.optim.SGD(params, lr=1e-5, momentum=0.9)
        return torch.optim.AdamW(params, lr=1e-5, fused=True)

    if not job.optimizer_in_backward:
        return one(trainable)
    steps = {p: one([p]) for p in trainable}

    def step(param: Any) -> None:
        steps[param].step()
        steps[param].zero_grad(set_to_none=True)

    for param in trainable:
        param.register_post_accumulate_grad_hook(step)
    return _Steps(list(steps.values()))


class _Steps:
    """The per-parameter optimizers, seen as one (their states are what MemTracker counts)."""

    def __init__(self, optimizers: list[Any]) -> None:
        self.optimizers = optimizers
        self.state = {k: v for o in optimizers for k, v in o.state.items()}

    def step(self) -> None:
        """Every parameter has already stepped in backward."""

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Gradients were freed as they were used."""


def loss_function(torch: Any, model: Any, job: Any, labels: str) -> Callable[[Any], Any]:
    """tokens -> loss, through the model's own forward and the job's loss."""
    if labels == "classes":
        return lambda tokens: model(input_ids=tokens, labels=torch.zeros(tokens.shape[0], dtype=torch.long)).loss
    if job.loss == "standard":
        return lambda tokens: model(input_ids=tokens, labels=tokens).loss
    if job.loss != "chunked":
        raise ConfigError("--trace runs --loss standard or chunked (the fused loss is a Triton kernel with no CPU "
                          "path)")
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    body, head = base.get_decoder(), base.get_output_embeddings()

    def chunked(tokens: Any) -> Any:
        hidden = body(input_ids=tokens).last_hidden_state
        # the head's weight applied per chunk (a module called 8 times would break MemTracker's per-module stats)
        logits = [torch.nn.functional.linear(chunk, head.weight) for chunk in hidden.chunk(CHUNKS, dim=1)]
        targets = tokens.chunk(CHUNKS, dim=1)
        total = sum(torch.nn.functional.cross_entropy(chunk.float().flatten(0, 1), target.flatten(), reduction="sum")
                    for chunk, target in zip(logits, targets, strict=True))
        del logits
        return total / tokens.numel()

    return chunked
