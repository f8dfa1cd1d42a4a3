"""Bringing Stability to Diffusion (MDM training variance): P-POTS, MIRROR and the other variance-reduction
methods on the shared masked-diffusion capability (shared/diffusion). See README.md."""
from projects.mdm_variance import data, methods, ppots, tasks, variance  # noqa: F401
