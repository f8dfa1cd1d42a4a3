"""Checkpoints: orbax CheckpointManager for state + data-iterator state + config; async saves,
keep-last-K, restore onto a different mesh, params-only export, and a SIGTERM preemption flag."""
from shared.checkpoint.manager import (
    Checkpointer,
    CheckpointMismatchError,
    export_params,
    import_params,
)
from shared.checkpoint.preemption import PreemptionFlag, install_preemption_handler

__all__ = [
    "Checkpointer",
    "CheckpointMismatchError",
    "PreemptionFlag",
    "export_params",
    "import_params",
    "install_preemption_handler",
]
