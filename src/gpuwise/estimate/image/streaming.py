"""How a runtime that loads by free memory (ComfyUI) holds an image pipeline, and what it copies per call.

ComfyUI (comfy/model_management.py load_models_gpu) loads a model when a node needs it: it unloads models not in
use only when memory is short, and loads as much of the model as fits in free memory less what it keeps for the
forward (``minimum_memory_required``: the larger of its working floor and the forward's activations, plus the
reserve it never fills); the rest stays in pinned host memory and is copied in layer by layer on each forward, on
a stream of its own (comfy/ops.py cast_bias_weight), so the copies overlap the compute. A VAE decode that runs out
of memory is retried in tiles (comfy/sd.py VAE.decode). Each number's source is the runtime's profile
(gpuwise/runtimes/engines.py COMFYUI).

Phases of one call: the text encoders, ``steps`` denoiser forwards, the VAE decode. When every component fits at
once, all stay loaded between calls; when not, each phase loads its component again (the one before it was
unloaded to make room), a new prompt being assumed for every call.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gpuwise.estimate import constants as C
from gpuwise.runtimes.schema import ImageRuntime, TiledDecode

MIN_RESIDENT_BYTES = 128 * 2**20
"""ComfyUI loads at least this much of a model (model_management.load_models_gpu: max(128 MiB, ...))."""
LATENT_SCALE = 8  # pixels per latent pixel in the SD/FLUX VAEs


@dataclass(frozen=True)
class Residency:
    """Where each component's weights are while it runs."""

    resident_bytes: Mapping[str, float]  # on the GPU in its own phase
    streamed_bytes: Mapping[str, float]  # copied in from host memory on every forward
    all_loaded: bool  # every component stays on the GPU between calls
    tiled_decode: bool  # the VAE decode does not fit whole and runs in tiles
    one_phase_bytes: float  # the largest component with what is kept beside it: all the runtime needs loaded


def weight_budget(capacity_bytes: float) -> float:
    """What weights, activations and the runtime's reserve may take: the card less the CUDA context and workspaces,
    with the caching allocator's slack (the same terms the other image estimates charge)."""
    return capacity_bytes / (1 + C.ALLOCATOR_RESERVE.value) - C.CUDA_CONTEXT.value - C.CUBLAS_WORKSPACE.value


def with_overheads(bytes_: float) -> float:
    """``bytes_`` on the card with the CUDA context, workspaces and the allocator's slack: weight_budget's inverse."""
    return (bytes_ + C.CUDA_CONTEXT.value + C.CUBLAS_WORKSPACE.value) * (1 + C.ALLOCATOR_RESERVE.value)


def kept_beside(image: ImageRuntime, activation_bytes: float) -> float:
    """What ComfyUI keeps free beside a model's weights for its forward: minimum_memory_required."""
    reserve = image.kept_free_bytes.value
    return max(image.working_floor_bytes.value + reserve, activation_bytes + reserve)


def tiled_area_ratio(resolution: int, tiling: TiledDecode) -> tuple[float, float]:
    """(latent pixels decoded over all tiles and passes, largest tile) as shares of the whole latent: ComfyUI's
    three tilings (tile//2 x 2*tile, 2*tile x tile//2, tile x tile), each tile stepping by tile - overlap and clipped
    at the edge (comfy/utils.py tiled_scale)."""
    side = resolution // LATENT_SCALE
    t, o = tiling.tile_latent, tiling.overlap_latent

    def covered(tile: int) -> int:
        stride = max(1, tile - o)
        return sum(min(tile, side - min(side - o, start)) for start in range(0, side, stride))

    shapes = ((t // 2, 2 * t), (2 * t, t // 2), (t, t))[:tiling.passes]
    decoded = sum(covered(h) * covered(w) for h, w in shapes)
    largest = max(min(h, side) * min(w, side) for h, w in shapes)
    return decoded / side**2, min(1.0, largest / side**2)


def residency(weights: Mapping[str, float], activations: Mapping[str, float], mode: str, capacity_bytes: float,
              image: ImageRuntime, vae_tile_share: float | None) -> Residency:
    """What stays on the GPU and what streams, under ``mode`` (auto: by free memory; none: every component loaded;
    sequential: nothing loaded, every weight streamed)."""
    budget = weight_budget(capacity_bytes)
    acts = dict(activations)
    tiled = False
    if vae_tile_share is not None and weights["vae"] + kept_beside(image, acts["vae"]) > budget:
        acts["vae"], tiled = acts["vae"] * vae_tile_share, True
    beside = {name: kept_beside(image, acts[name]) for name in weights}
    all_loaded = sum(weights.values()) + max(beside.values()) <= budget
    one_phase = max(weights[name] + beside[name] for name in weights)
    if mode == "none" or (mode == "auto" and all_loaded):  # --highvram keeps every component, fitting or not
        return Residency(dict(weights), dict.fromkeys(weights, 0.0), True, tiled, one_phase)
    if mode == "sequential":  # --novram: lowvram_model_memory = 0.1 byte
        resident = dict.fromkeys(weights, 0.0)
    else:  # at least MIN_RESIDENT_BYTES, so a card too small shows as not fitting
        resident = {name: min(w, max(budget - beside[name], MIN_RESIDENT_BYTES)) for name, w in weights.items()}
    streamed = {name: w - resident[name] for name, w in weights.items()}
    return Residency(resident, streamed, False, tiled, one_phase)


def peak_parts(held: Residency, weights: Mapping[str, float], activations: Mapping[str, float],
               image: ImageRuntime, denoiser: str) -> dict[str, float]:
    """The GPU's peak by part: every component and the largest forward when all stay loaded, else the phase whose
    loaded share and activations are largest."""
    reserve = {"kept free by the runtime (--reserve-vram)": image.kept_free_bytes.value}
    if held.all_loaded:
        parts = {f"weights: {name}": b for name, b in weights.items()}
        return {**parts, "activations": max(activations.values()), **reserve}
    name = max(weights, key=lambda n: held.resident_bytes[n] + activations[n])
    streamed = held.streamed_bytes[name]
    label = f"weights: {name}" + (f", loaded share ({streamed / 2**30:,.1f} GiB streamed per forward)"
                                  if streamed else "")
    unit = " (tiled decode)" if name == "vae" and held.tiled_decode else ""
    rest = "; the others unloaded to host memory" if name != denoiser or len(weights) > 1 else ""
    return {label + rest: held.resident_bytes[name], "activations" + unit: activations[name], **reserve}


def copy_overhead_s(held: Residency, steps: int, denoiser: str, compute_s: Mapping[str, float],
                    bytes_per_s: float) -> float:
    """Seconds one call spends copying weights beyond its compute: each component's load as its phase starts (when
    not all stay loaded), and the part of each forward's streamed weights its compute does not hide (they copy on a
    stream of their own)."""
    loads = 0.0 if held.all_loaded else sum(held.resident_bytes.values()) / bytes_per_s
    unhidden = 0.0
    for name, seconds in compute_s.items():
        forwards = steps if name == denoiser else 1
        per_forward = held.streamed_bytes.get(name, 0.0) / bytes_per_s
        unhidden += forwards * max(0.0, per_forward - seconds / forwards)
    return loads + unhidden


def loads_note(held: Residency, weights: Mapping[str, float]) -> str:
    """What the estimate assumed of ComfyUI's loads, in words."""
    if held.all_loaded:
        return "ComfyUI keeps every component loaded between calls (they fit at once)"
    streamed = sum(held.streamed_bytes.values())
    text = ("ComfyUI loads each component as its phase starts (not all fit at once; a new prompt every call "
            "assumed: a repeated prompt reuses its cached conditioning)")
    if streamed:
        text += (f"; {streamed / 2**30:,.1f} of {sum(weights.values()) / 2**30:,.1f} GiB of weights stay in "
                 "pinned host memory and stream in per forward, overlapping compute")
    return text


def decode_factor(held: Residency, decoded_share: float) -> float:
    """How much longer the decode runs: 1, or the tiled passes' latent area over the whole."""
    return decoded_share if held.tiled_decode else 1.0

