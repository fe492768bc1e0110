"""Moved to :mod:`gpuwise.workload.model.module_tree`: the architecture read from transformers' meta-device build is
the model's (workload/model imports neither vision nor trace); the build itself is workload/exact.py's. api/reporting
reads ``DERIVED`` here until it imports it from there; then this module goes."""

from __future__ import annotations

from gpuwise.workload.model.module_tree import DERIVED

__all__ = ["DERIVED"]
