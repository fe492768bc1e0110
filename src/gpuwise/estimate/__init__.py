"""Pure estimators: (workload, hardware) -> results with their breakdown and assumptions."""
