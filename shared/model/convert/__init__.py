"""Checkpoint converters between other libraries' formats and our parameters."""
from shared.model.convert.hf import config_from_hf, hf_config_from, load_hf, save_hf  # noqa: F401
