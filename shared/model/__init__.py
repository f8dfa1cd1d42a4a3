"""The shared transformer: layers, BLOCKS, HEADS and the Decoder."""
from shared.model import blocks, heads, layers  # noqa: F401  (registrations)
from shared.model.transformer import (CACHE_AXES, Decoder, attention_implementation, build_model,  # noqa: F401
                                      count_params, create_sharded, init_cache)
