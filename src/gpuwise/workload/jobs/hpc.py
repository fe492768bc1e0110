"""What `estimate` and `recommend` answer for a scientific-computing job (`--task hpc --app NAME`): an application
profile (workload/hpc/apps.yaml), the size of the system it runs on, how much of it one job is, and how many
independent runs share the GPUs.

Each field is the one definition of its flag; which flags an application takes is the profile's (its ``size``
flag and its work unit), so a flag that would change nothing for the chosen application is refused with the ones
it takes, never ignored. ``count`` shares its spelling with the language-model jobs.
"""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gpuwise.flags import Flag, build

HPC = "Job: scientific computing (--task hpc)"
_COMMANDS = frozenset({"estimate", "recommend"})
App = Literal["hpl", "hpcg", "gromacs", "amber", "openmm", "lammps", "namd", "openfoam", "vasp", "custom"]
APPS: tuple[str, ...] = get_args(App)
CUSTOM_FLAGS = ("fp64_fraction", "bytes_per_flop", "memory_gb")
HPC_SHARED = ("count",)
"""Fields whose flags the language-model jobs define (the same spelling on the command line)."""


class HpcJob(BaseModel):
    """One scientific-computing job: ``runs`` independent runs of ``app`` on a system of the given size."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    task: Literal["hpc"] = "hpc"
    app: Annotated[App | None, Flag(_COMMANDS, HPC)] = Field(
        default=None, description="the application: hpl (dense FP64 LU), hpcg (sparse FP64 CG), gromacs, amber, "
                                  "openmm, lammps, namd (molecular dynamics, mixed precision), openfoam (FP64 CFD), "
                                  "vasp (FP64 DFT) or custom")
    count: int = Field(default=1, ge=1, le=65536, description="GPUs in the job")
    atoms: Annotated[int | None, Field(ge=100, le=10_000_000_000), Flag(_COMMANDS, HPC)] = Field(
        default=None, description="atoms in the simulated system (molecular dynamics, VASP; default: the "
                                  "profile's reference system)")
    cells: Annotated[int | None, Field(ge=1000, le=10_000_000_000_000), Flag(_COMMANDS, HPC)] = Field(
        default=None, description="mesh cells (openfoam) or grid points (hpcg) of the whole problem")
    matrix_n: Annotated[int | None, Field(ge=1000, le=100_000_000), Flag(_COMMANDS, HPC)] = Field(
        default=None, description="hpl: the order N of the matrix (N^2 x 8 bytes over the GPUs)")
    ns: Annotated[float | None, Field(gt=0, le=1e7), Flag(_COMMANDS, HPC)] = Field(
        default=None, description="molecular dynamics: nanoseconds one run simulates (the job's length; default 100)")
    timestep_fs: Annotated[float | None, Field(ge=0.5, le=10), Flag(_COMMANDS, HPC)] = Field(
        default=None, description="molecular dynamics: integration time step in fs (default: the profile's; 4 with "
                                  "hydrogen mass repartitioning)")
    iterations: Annotated[int | None, Field(ge=1, le=1_000_000_000), Flag(_COMMANDS, HPC)] = Field(
        default=None, description="iterations one run makes: solver iterations (openfoam), CG iterations (hpcg), "
                                  "electronic steps (vasp), iterations of --work-tflop (custom)")
    solves: Annotated[int | None, Field(ge=1, le=1_000_000), Flag(_COMMANDS, HPC)] = Field(
        default=None, description="hpl: factorisations of the N x N matrix one run makes (default 1)")
    runs: Annotated[int, Field(ge=1, le=100_000), Flag(_COMMANDS, HPC)] = Field(
        default=1, description="independent runs of the job (replicas, a parameter sweep): with more GPUs than one "
                               "run uses, the others run side by side")
    fp64_fraction: Annotated[float | None, Field(ge=0, le=1), Flag(_COMMANDS, HPC)] = Field(
        default=None, description="custom: the share of the floating-point work done in FP64 (the rest in FP32)")
    bytes_per_flop: Annotated[float | None, Field(gt=0, le=1000), Flag(_COMMANDS, HPC)] = Field(
        default=None, description="custom: bytes moved to and from GPU memory per floating-point operation (the "
                                  "inverse of the arithmetic intensity: HPCG ~4, dense GEMM ~0.01)")
    memory_gb: Annotated[float | None, Field(gt=0, le=1_000_000), Flag(_COMMANDS, HPC)] = Field(
        default=None, description="custom: GB of GPU memory the whole problem needs (split over the GPUs)")
    work_tflop: Annotated[float | None, Field(gt=0, le=1e12), Flag(_COMMANDS, HPC)] = Field(
        default=None, description="custom: TFLOP of work in one iteration (default 1)")

    @model_validator(mode="after")
    def _custom_is_described(self) -> HpcJob:
        if self.app is None:
            raise ValueError(f"--task hpc needs --app: one of {', '.join(APPS)}")
        custom = [f for f in CUSTOM_FLAGS if getattr(self, f) is not None]
        if self.app == "custom" and len(custom) < len(CUSTOM_FLAGS):
            missing = [f"--{f.replace('_', '-')}" for f in CUSTOM_FLAGS if getattr(self, f) is None]
            raise ValueError(f"--app custom is described by --fp64-fraction, --bytes-per-flop and --memory-gb; "
                             f"give {', '.join(missing)} too")
        if self.app != "custom" and (self.work_tflop is not None or any(f != "memory_gb" for f in custom)):
            given = "--work-tflop" if self.work_tflop is not None else "--fp64-fraction/--bytes-per-flop"
            raise ValueError(f"{given} describes --app custom; {self.app}'s profile carries its own precision mix "
                             "and arithmetic intensity")
        return self


def make_hpc_job(**values: object) -> HpcJob:
    """Validate flag values into an HpcJob; one-line ConfigError naming the flag and what it accepts."""
    return build(HpcJob, dict(values))
