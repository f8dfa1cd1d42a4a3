"""SiameseNorm (arXiv 2602.08064) and its normalisation baselines as BLOCKS entries "siamesenorm/<name>".

Importing the package registers the blocks; see blocks.py for the equations and README.md for the ledger.
"""
from projects.siamesenorm import blocks  # noqa: F401  registers the blocks and the block_options validator
from projects.siamesenorm import stability  # noqa: F401  registers HOOKS "siamesenorm/stability"
from projects.siamesenorm.blocks import NAMES, block_options, deepnorm_constants, depth_divisor

__all__ = ["NAMES", "block_options", "deepnorm_constants", "depth_divisor"]
