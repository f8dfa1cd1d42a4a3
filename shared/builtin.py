"""Importing this module registers every built-in (blocks, heads, losses, optimizers, tasks, datasets, ...).

Not needed for lookups: the registries load the built-ins themselves on first use (shared.registry.load_builtins);
scripts import it to have every name present before they list or inspect registries.
"""
from shared.registry import load_builtins

load_builtins()
