"""GAP (arXiv 2605.12374) small-scale reproduction: GridOps. Spec ../shared/papers/gap.md section 4.

  layout.py    the fixed token layout (static image and latent slots)
  gridops.py   glyph pools, moves, questions, renders, encoding
  model.py     GapModel (ViT + projector + decoder, latent modes none / slots / feedback), losses, PCA of e_vis
  generate.py  greedy answers on the KV cache (direct, slots, feedback, auto)
  task.py      TASKS "gap/train": stage A or stage B (config.gap), evaluation, norm report, probes
  claims.py    the ledger's claims (N, E, G, I of spec 4.8)

Registers TASKS "gap/train" as a factory that imports task.py on first use, and the config check of config.gap:
no jax at import.
"""
from shared.config import ConfigError, register_validator
from shared.registry import TASKS


@TASKS.register("gap/train")
def train(config, workdir):
    from projects.gap.task import run

    return run(config, workdir)


@register_validator
def check_gap_config(config, mesh_shape) -> None:
    if config.get("project") != "gap" or "gap" not in config:
        return
    from projects.gap.task import check_options

    try:
        check_options(config.gap)
    except ValueError as e:
        raise ConfigError(str(e)) from None
