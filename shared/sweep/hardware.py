"""The GPUs a sweep can see: the ids it hands to points (CUDA_VISIBLE_DEVICES) and their names for the
manifest. Its own module so the runner and the report both import it (neither imports the other back)."""
from __future__ import annotations

import os
import subprocess


def visible_gpus() -> list[str]:
    """Ids to put in CUDA_VISIBLE_DEVICES, one per GPU: from that variable if set, else `nvidia-smi -L`."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        ids = []
        for entry in env.split(","):
            entry = entry.strip()
            if not entry or entry.startswith("-"):  # CUDA stops at the first invalid id ("-1" hides all)
                break
            ids.append(entry)
        return ids
    return [str(i) for i in range(len(gpu_names()))]


def gpu_names() -> list[str]:
    """GPU names from `nvidia-smi -L` ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: ...)"), only those CUDA_VISIBLE_DEVICES
    names where it lists indices; [] without nvidia-smi."""
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return []
    if out.returncode != 0:
        return []
    names = {}
    for line in out.stdout.splitlines():
        if line.startswith("GPU "):
            names[line[4:].split(":", 1)[0].strip()] = line.split(":", 1)[1].split("(UUID")[0].strip()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and all(i.strip().isdigit() for i in visible.split(",") if i.strip()):
        # the GPUs this process was given (a campaign's block), not every GPU of the host
        return [names[i.strip()] for i in visible.split(",") if i.strip() in names]
    return list(names.values())
