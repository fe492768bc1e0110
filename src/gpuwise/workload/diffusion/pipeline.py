"""Image-generation pipelines (diffusers): a denoiser (UNet or DiT) run once per step, a VAE that decodes the latent
once per image, and text encoders run once per prompt -- each counted from its shipped config.

A pipeline preset, ``pipelines/<id>.json``, holds the components' config.json files as the repo ships them, the
diffusers defaults that set the cost (steps, guidance passes, resolution, dtypes), its hub ids and sources. The
denoiser and VAE are walked module by module (:mod:`gpuwise.workload.diffusion.denoisers`); the text encoders keep
the count transformers' meta-device build gives for their config (tests rebuild them).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from gpuwise.workload.diffusion.denoisers import Tally, flux, unet, vae

LATENT_SCALE = 8  # AutoencoderKL with 4 levels: 2**3 pixels per latent cell (vae_scale_factor)
FLUX_PATCH = 2  # FLUX packs 2 x 2 latent cells into one token (pipeline_flux.py _pack_latents)
_WALKS: dict[tuple[str, str, int], Tally | tuple[Tally, Tally]] = {}  # bounded: pipelines x resolutions (<= 60)


@dataclass(frozen=True)
class Defaults:
    steps: int
    guidance_passes: int  # denoiser forwards per step: 2 with classifier-free guidance, 1 with guidance distillation
    resolution: int
    dtype: str  # the pipeline's torch_dtype
    text_tokens: int
    vae_dtype: str  # what the VAE decodes in (SDXL upcasts to fp32)
    source: str


@dataclass(frozen=True)
class TextEncoder:
    name: str
    cls: str
    params: int
    config: Mapping[str, Any]

    def flops(self, tokens: int) -> float:
        return 2.0 * self.params * tokens  # every weight once per token

    @property
    def layers(self) -> int:
        """Its transformer layers (CLIP and T5 configs: num_hidden_layers; T5: num_layers)."""
        value = self.config.get("num_hidden_layers", self.config.get("num_layers", 0))
        return int(value) if isinstance(value, int) else 0


@dataclass(frozen=True)
class Pipeline:
    id: str
    name: str
    hub_ids: tuple[str, ...]
    aliases: tuple[str, ...]
    source: str
    denoiser_name: str
    denoiser_class: str
    denoiser_config: Mapping[str, Any]
    vae_config: Mapping[str, Any]
    text_encoders: tuple[TextEncoder, ...]
    defaults: Defaults
    offload_sequence: tuple[str, ...]
    meta: Mapping[str, Any]

    @property
    def is_dit(self) -> bool:
        return self.denoiser_class == "FluxTransformer2DModel"

    def denoiser(self, resolution: int) -> Tally:
        """The denoiser's counts and the FLOPs of one forward of one image at ``resolution`` pixels square (a walk
        is cached per pipeline and resolution; do not modify the result)."""
        key = (self.id, "denoiser", resolution)
        if key not in _WALKS:
            latent = resolution // LATENT_SCALE
            _WALKS[key] = (flux(self.denoiser_config, image_tokens=(latent // FLUX_PATCH) ** 2,
                                text_tokens=self.defaults.text_tokens) if self.is_dit else
                           unet(self.denoiser_config, latent_hw=latent, text_tokens=self.defaults.text_tokens))
        found = _WALKS[key]
        assert isinstance(found, Tally)
        return found

    def vae_parts(self, resolution: int) -> tuple[Tally, Tally]:
        key = (self.id, "vae", resolution)
        if key not in _WALKS:
            _WALKS[key] = vae(self.vae_config, image_hw=resolution)
        found = _WALKS[key]
        assert isinstance(found, tuple)
        return found

    def params(self) -> dict[str, int]:
        encoder, decoder = self.vae_parts(self.defaults.resolution)
        counts = {self.denoiser_name: self.denoiser(self.defaults.resolution).params,
                  "vae": encoder.params + decoder.params}
        counts.update({t.name: t.params for t in self.text_encoders})
        return counts

    @property
    def total_params(self) -> int:
        return sum(self.params().values())


def _load(document: Mapping[str, Any]) -> Pipeline:
    meta = document["_pipeline"]
    d = meta["defaults"]
    return Pipeline(
        id=meta["id"], name=meta["name"], hub_ids=tuple(meta["hub_ids"]), aliases=tuple(meta.get("aliases", ())),
        source=meta["source"], denoiser_name=document["denoiser"]["name"],
        denoiser_class=document["denoiser"]["class"], denoiser_config=document["denoiser"]["config"],
        vae_config=document["vae"]["config"],
        text_encoders=tuple(TextEncoder(t["name"], t["class"], int(t["params"]), t["config"])
                            for t in document["text_encoders"]),
        defaults=Defaults(int(d["steps"]), int(d["guidance_passes"]), int(d["resolution"]), str(d["dtype"]),
                          int(d["text_tokens"]), str(d["vae_dtype"]), str(d["source"])),
        offload_sequence=tuple(meta["offload_sequence"]), meta=meta)


@functools.cache
def pipelines() -> dict[str, Pipeline]:
    """The shipped pipelines by id."""
    found = {}
    for entry in resources.files("gpuwise.workload.diffusion").joinpath("pipelines").iterdir():
        if entry.name.endswith(".json"):
            pipeline = _load(json.loads(entry.read_text(encoding="utf-8")))
            found[pipeline.id] = pipeline
    return found


@functools.cache
def _names() -> dict[str, str]:
    return {name.lower(): p.id for p in pipelines().values() for name in (p.id, *p.hub_ids, *p.aliases)}


def find_pipeline(name: object) -> Pipeline | None:
    """The pipeline a preset id, alias or hub id names (case-insensitive), else None."""
    if not isinstance(name, str):
        return None
    found = _names().get(name.strip().lower())
    return pipelines()[found] if found else None
