"""Can the CPU decode images as fast as the GPU consumes them? A warning when it cannot.

A vision job that reads JPEGs decodes every image on the CPU before the GPU sees it (torchvision, PIL). At the
measured per-core rate (constants.JPEG_DECODE_IMAGES_PER_CORE, scaled by pixels for inputs above 224), the cores a
GPU needs are its images per second over that rate; above the cores a node gives each GPU the loader, not the GPU,
sets the pace -- unless the images are decoded on the GPU (NVIDIA DALI) or stored pre-decoded (FFCV, raw tensors).
"""

from __future__ import annotations

from gpuwise.estimate import constants as C


def images_per_core(image_side: int) -> float:
    """Images one core decodes per second for inputs of ``image_side`` pixels."""
    scale = max(1.0, (image_side / C.JPEG_REFERENCE_SIDE.value) ** 2)
    return C.JPEG_DECODE_IMAGES_PER_CORE.value / scale


def dataloader_warning(images_per_s_per_gpu: float, image_side: int) -> str | None:
    """What the decode costs at this speed, when it needs more cores than a GPU usually gets."""
    rate = images_per_core(image_side)
    cores = images_per_s_per_gpu / rate
    if cores <= C.DATALOADER_CORES_PER_GPU.value:
        return None
    return (f"dataloader-bound: {images_per_s_per_gpu:,.0f} images/s per GPU need about {cores:,.0f} CPU cores of "
            f"JPEG decoding ({rate:,.0f} images/s per core at {image_side} px, decode only: imread_benchmark); with "
            f"the usual {C.DATALOADER_CORES_PER_GPU.value:.0f} per GPU the CPU sets the pace. Decode on the GPU "
            "(NVIDIA DALI) or store decoded data (FFCV, uint8 tensors)")
