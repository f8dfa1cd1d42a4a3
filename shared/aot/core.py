"""The pieces of shared.aot (see its docstring): TPU chips and topologies, the programs a run compiles, their
compilation into per-chip reports, and the registry of each task's program builders."""
from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from typing import Any, Callable

# Per chip: HBM bytes, dense bf16 peak FLOP/s and HBM bandwidth in bytes/s (public TPU specifications).
TPU_CHIPS = {
    "v4": {"hbm": 32 * 2**30, "peak": 275e12, "bandwidth": 1228e9},
    "v5e": {"hbm": 16 * 2**30, "peak": 197e12, "bandwidth": 819e9},
    "v5p": {"hbm": 95 * 2**30, "peak": 459e12, "bandwidth": 2765e9},
    "v6e": {"hbm": 32 * 2**30, "peak": 918e12, "bandwidth": 1640e9},
}
# The physical shape of each TPU preset's slice (tpu_configs/TOPOLOGY.md); multislice presets add "slices".
TOPOLOGIES = {
    "v4_8": ("v4", "2x2x1", 1), "v5p_8": ("v5p", "2x2x1", 1), "v5p_64": ("v5p", "4x4x2", 1),
    "v5p_256": ("v5p", "4x4x8", 1), "v5p_256x2": ("v5p", "4x4x8", 2), "v5e_16": ("v5e", "4x4", 1),
    "v5e_256": ("v5e", "16x16", 1), "v6e_8": ("v6e", "2x4", 1), "v6e_256": ("v6e", "16x16", 1),
}
GIB = 2**30

_FIT_HINT = "try model.remat, more train.micro_batches, or a larger slice"
RL_UPDATE_HINT = "try a smaller rl.micro_batch_tokens, model.remat, or a larger slice"
LOGPROB_HINT = "try a smaller rl.micro_batch_tokens, or a larger slice"
SAMPLER_HINT = "try a smaller rl.rollout_max_rows, rl.rollout_mesh='' (fsdp-sharded weights), or a larger slice"


class DoesNotFit(RuntimeError):
    """A compiled step needs more HBM per chip than the chip has."""


@dataclasses.dataclass
class Report:
    preset: str
    chip: str
    chips: int
    argument_bytes: int
    temp_bytes: int
    output_bytes: int
    alias_bytes: int
    model_flops: float        # per chip, one call: the model's FLOPs (shared.metrics.flops, MaxText convention);
                              # XLA's cost analysis counts a loop body once (layers, micro-batches, decode steps)
    xla_flops: float          # per chip: XLA's cost analysis of the compiled program, as it reports it
    bytes_accessed: float     # per chip: XLA's cost analysis (loop bodies counted once too)
    tokens: int               # per call, whole slice
    step: str = "train"       # the program's name (module doc)
    calls: int = 1            # calls per step of the run (RL: per RL step)
    stream_bytes: float = 0.0  # per chip, one call: bytes that must be read from HBM (the decode loop's weights
                               # and KV cache, once per decode step); 0 = compute bound only
    detail: str = ""          # shapes: rows, micro-batches, ...
    hint: str = _FIT_HINT
    failed: str = ""          # the TPU compiler refused the program (out of HBM): its message
    stage: str = ""           # "": a program of the run's step; else a separate stage (SFT warm start, theta0)
    resident_bytes: int = 0   # per chip: what the run holds in HBM while the program runs that is not one of its
                              # arguments (RL: the optimizer state during a rollout or a log-prob pass, the reference)

    @property
    def hbm(self) -> int:
        return TPU_CHIPS[self.chip]["hbm"]

    @property
    def peak(self) -> float:
        return TPU_CHIPS[self.chip]["peak"]

    @property
    def bandwidth(self) -> float:
        return TPU_CHIPS[self.chip]["bandwidth"]

    @property
    def needed_bytes(self) -> int:
        """Live bytes per chip: arguments and temporaries, plus outputs not aliased to (donated) arguments, plus
        what the run holds besides (resident_bytes). For a program the compiler refused: the temporaries it said
        it needs (a lower bound)."""
        return (self.argument_bytes + self.temp_bytes + max(0, self.output_bytes - self.alias_bytes)
                + self.resident_bytes)

    @property
    def fits(self) -> bool:
        return not self.failed and self.needed_bytes <= self.hbm

    @property
    def step_time_s(self) -> float:
        """One call at the chip's peak: model FLOPs / peak FLOP/s, or the HBM reads / bandwidth where those take
        longer (decode); a lower bound on the real time."""
        return max(self.model_flops / self.peak, self.stream_bytes / self.bandwidth)

    def header(self) -> str:
        return slice_header(self.preset, self.chip, self.chips)

    def as_dict(self) -> dict:
        return {**dataclasses.asdict(self), "hbm": self.hbm, "needed_bytes": self.needed_bytes, "fits": self.fits,
                "step_time_s": self.step_time_s}

    def lines(self) -> list[str]:
        calls = f"x{self.calls} per step; " if self.calls != 1 else ""
        name = f"  {self.step} ({calls}{self.detail})" if (calls or self.detail) else f"  {self.step}"
        if self.failed:
            held = f" + {self.resident_bytes / GIB:.3f} GiB held by the run besides" if self.resident_bytes else ""
            return [f"{name}: the TPU compiler needs {self.temp_bytes / GIB:.2f} GiB of temporaries per chip, more "
                    f"than it can use ({self.failed}){held}; needed at least {self.needed_bytes / GIB:.3f} of "
                    f"{self.hbm / GIB:.0f} GiB: does not fit"]
        bound = " (HBM bound)" if self.stream_bytes / self.bandwidth > self.model_flops / self.peak else ""
        rate = self.tokens / max(self.step_time_s, 1e-12)
        return [
            f"{name}",
            f"    per chip: arguments {self.argument_bytes / GIB:.3f} GiB, temporaries {self.temp_bytes / GIB:.3f} "
            f"GiB, outputs {self.output_bytes / GIB:.3f} GiB (aliased {self.alias_bytes / GIB:.3f})"
            + (f", held by the run besides {self.resident_bytes / GIB:.3f} GiB" if self.resident_bytes else "")
            + f"; needed {self.needed_bytes / GIB:.3f} of {self.hbm / GIB:.0f} GiB "
            f"({self.needed_bytes / self.hbm:.1%})",
            f"    per chip per call: {self.model_flops / 1e12:.3f} TFLOP of model math (XLA's cost analysis: "
            f"{self.xla_flops / 1e12:.3f} TFLOP, {self.bytes_accessed / GIB:.3f} GiB accessed, loop bodies once)",
            f"    at peak: {duration(self.step_time_s)} per call{bound}, {rate:,.0f} tokens/s over the slice; at "
            f"40% MFU: {duration(self.step_time_s / 0.4)} per call",
        ]


def slice_header(preset: str, chip: str, chips: int) -> str:
    spec = TPU_CHIPS[chip]
    return (f"{preset}: {chips} x TPU {chip} ({spec['hbm'] / GIB:.0f} GiB HBM, {spec['peak'] / 1e12:.0f} TFLOP/s bf16, "
            f"{spec['bandwidth'] / 1e9:.0f} GB/s each)")


def duration(seconds: float) -> str:
    """3 significant digits in ms below 10 s, else s."""
    return f"{seconds * 1e3:.3g} ms" if seconds < 10 else f"{seconds:.3g} s"


def run_step_time_s(reports: list[Report], stage: str = "") -> float:
    """One step of the run (or of a separate stage) at peak: every program's time x its calls per step (RL:
    rollout, log-prob passes, updates)."""
    chosen = [r for r in reports if r.stage == stage] or (reports if not stage else [])
    return sum(r.step_time_s * r.calls for r in chosen)


def summary_line(reports: list[Report]) -> str:
    worst = max(reports, key=lambda r: r.needed_bytes)
    verdict = "fits" if all(r.fits for r in reports) else "does not fit"
    step = run_step_time_s(reports)
    stages = "".join(f"; {stage} step {duration(run_step_time_s(reports, stage))}"
                     for stage in dict.fromkeys(r.stage for r in reports if r.stage)
                     if any(not r.stage for r in reports))
    return (f"run: needs {worst.needed_bytes / GIB:.3f} GiB per chip at most ({worst.step}) of "
            f"{worst.hbm / GIB:.0f} GiB: {verdict}; one step at peak {duration(step)} (at 40% MFU "
            f"{duration(step / 0.4)}){stages}")


def does_not_fit_message(reports: list[Report]) -> str | None:
    """One line naming the first program that does not fit (and the others that do not), or None."""
    bad = [r for r in reports if not r.fits]
    if not bad:
        return None
    r = bad[0]
    what = "at least " if r.failed else ""  # the compiler refused it: its temporaries (+ what the run holds)
    more = "".join(f"; also {o.step} ({o.needed_bytes / GIB:.2f} GiB)" for o in bad[1:])
    return (f"{r.preset}: {r.step} needs {what}{r.needed_bytes / GIB:.2f} GiB per TPU {r.chip} chip but it has "
            f"{r.hbm / GIB:.0f} GiB HBM ({r.hint}){more}")


# What libtpu prints when it loads on a machine without a TPU. It cannot find the host's accelerator type (there is
# none: we only describe a slice, whose type get_topology_desc names) and says TPU_ACCELERATOR_TYPE should be set.
# Harmless here, so these lines are dropped; everything else libtpu prints is passed on.
LIBTPU_NOISE = ("could not determine TPU accelerator type", "Failed to find host bounds for accelerator type")


@contextlib.contextmanager
def _filtered_native_output(noise=LIBTPU_NOISE):
    """Captures what native code writes to fd 1 and 2 inside the block and passes on the lines without `noise`."""
    import sys
    import tempfile

    sys.stdout.flush(), sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        os.dup2(out.fileno(), 1), os.dup2(err.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush(), sys.stderr.flush()
            for fd, saved_fd in saved.items():
                os.dup2(saved_fd, fd)
                os.close(saved_fd)
            for captured, stream in ((out, sys.stdout), (err, sys.stderr)):
                captured.seek(0)
                text = captured.read().decode("utf-8", errors="replace")
                kept = [line for line in text.splitlines(keepends=True) if not any(n in line for n in noise)]
                if kept:
                    stream.write("".join(kept))
                    stream.flush()


def topology_devices(preset: str):
    """The TPU devices of a preset's slice(s), from jax.experimental.topologies (needs libtpu, no TPU)."""
    import os

    # libtpu takes an exclusive lock on /tmp/libtpu_lockfile, meant to keep two processes off one TPU; here there is
    # no TPU, and parallel test workers or a second check on the same host would fail with "ABORTED ... lockfile".
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    from jax.experimental import topologies

    if preset not in TOPOLOGIES:
        raise ValueError(f"--mesh={preset}: not a TPU preset with a known topology ({', '.join(sorted(TOPOLOGIES))})")
    chip, shape, slices = TOPOLOGIES[preset]
    try:
        with _filtered_native_output():  # libtpu's warning about TPU_ACCELERATOR_TYPE (LIBTPU_NOISE)
            desc = topologies.get_topology_desc(topology_name=f"{chip}:{shape}", platform="tpu", num_slices=slices)
    except Exception as e:  # libtpu missing or too old
        raise RuntimeError(f"cannot describe TPU {chip}:{shape} x{slices}: {' '.join(str(e).split())[:300]} "
                           f"(install the TPU extra: pip install -e '.[tpu]')") from None
    return chip, list(desc.devices)


@dataclasses.dataclass
class Slice:
    """The TPU slice a run is compiled for."""
    preset: str
    chip: str
    devices: list

    @classmethod
    def of(cls, preset: str) -> "Slice":
        chip, devices = topology_devices(preset)
        return cls(preset, chip, devices)

    @property
    def hbm(self) -> int:
        return TPU_CHIPS[self.chip]["hbm"]

    def header(self) -> str:
        return slice_header(self.preset, self.chip, len(self.devices))


@dataclasses.dataclass
class Program:
    """One jitted program of a run: the jitted function the run calls and abstract arguments for it."""
    step: str
    fn: Any                   # the jax.jit object (lowered with .lower(*args, **kwargs))
    args: tuple
    mesh: Any                 # lowered inside sh.use_mesh(mesh, rules), as the run calls it
    rules: Any
    kwargs: dict = dataclasses.field(default_factory=dict)
    model_flops: float = 0.0  # whole slice, one call
    tokens: int = 0           # whole slice, one call
    calls: int = 1            # calls per run step
    stream_bytes: float = 0.0  # per chip, one call (Report.stream_bytes)
    detail: str = ""
    hint: str = _FIT_HINT
    stage: str = ""           # Report.stage
    resident_bytes: int = 0   # Report.resident_bytes


_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def compile_program(program: Program, sl: Slice) -> Report:
    """Lowers and compiles `program` for the slice; a program the TPU compiler refuses for lack of HBM gives a
    Report with `failed` set and the temporaries it asked for."""
    from shared import sharding as sh

    with sh.use_mesh(program.mesh, program.rules):
        lowered = program.fn.lower(*program.args, **program.kwargs)
    chips = len(sl.devices)
    common = dict(model_flops=program.model_flops / chips, tokens=int(program.tokens), step=program.step,
                  calls=int(program.calls), stream_bytes=float(program.stream_bytes), detail=program.detail,
                  hint=program.hint, stage=program.stage, resident_bytes=int(program.resident_bytes))
    try:
        compiled = lowered.compile()
    except Exception as e:  # the TPU compiler refuses a program whose temporaries exceed HBM
        message = " ".join(str(e).split())
        if "RESOURCE_EXHAUSTED" not in message and "Ran out of memory" not in message:
            raise
        needed = re.search(r"required for [^(]*\(([\d.]+)([KMGT]?)\)", message)
        available = re.search(r"available HBM \(([\d.]+[KMGT]?)\)", message)
        temp = int(float(needed.group(1)) * _UNITS[needed.group(2)]) if needed else sl.hbm + 1
        failed = f"{available.group(1)} available" if available else "out of HBM"
        return Report(sl.preset, sl.chip, chips, 0, temp, 0, 0, xla_flops=0.0, bytes_accessed=0.0, failed=failed,
                      **common)
    memory = compiled.memory_analysis()
    cost = compiled.cost_analysis() or {}
    if isinstance(cost, list):
        cost = cost[0] if cost else {}
    return Report(sl.preset, sl.chip, chips, int(memory.argument_size_in_bytes), int(memory.temp_size_in_bytes),
                  int(memory.output_size_in_bytes), int(memory.alias_size_in_bytes),
                  xla_flops=float(cost.get("flops", 0.0)), bytes_accessed=float(cost.get("bytes accessed", 0.0)),
                  **common)


# ------------------------------------------------------------------------------------------ step builders

# task -> fn(config, slice, options) -> [Program]; the built-in ones are in shared/aot/steps.py, a project's in
# projects/<p>/aot.py (imported by name when its task is compiled).
STEP_BUILDERS: dict[str, Callable] = {}


def register_steps(*tasks: str) -> Callable:
    """Decorator: `fn(config, slice, options) -> [Program]` builds the programs of these tasks' runs."""

    def add(fn):
        for task in tasks:
            STEP_BUILDERS[task] = fn
        return fn

    return add


@dataclasses.dataclass
class Options:
    """What a builder needs beyond the config: which programs to build, the RL prompt length."""
    steps: tuple[str, ...] = ()   # names or prefixes ("rl", "sampler"); empty = all
    prompt_len: int = 256

    def wants(self, name: str) -> bool:
        return not self.steps or any(name == s or name.startswith(s.rstrip("/") + "/") for s in self.steps)
