"""Checkpoints: orbax CheckpointManager for state + data-iterator state + config; async saves,
keep-last-K, restore onto a different mesh, fall back past damaged checkpoints, params-only export, and a
SIGTERM / SIGINT preemption flag."""
from shared.checkpoint.manager import (
    CheckpointDamagedError,
    Checkpointer,
    CheckpointMismatchError,
    export_params,
    import_params,
)
from shared.checkpoint.preemption import PreemptionFlag, install_preemption_handler

__all__ = [
    "CheckpointDamagedError",
    "Checkpointer",
    "CheckpointMismatchError",
    "PreemptionFlag",
    "export_params",
    "import_params",
    "install_preemption_handler",
]
