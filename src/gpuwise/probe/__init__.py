"""Real hardware: NVML readings (or recorded snapshots), rule-based health checks, benchmarks."""
