"""Training core: optimizers, losses, the jitted step, the Trainer loop and the built-in tasks."""
from shared.train import losses, optim, tasks  # noqa: F401  (registrations)
from shared.train.step import lm_loss_fn, make_eval_step, make_train_step  # noqa: F401
from shared.train.trainer import Hook, Trainer, TrainingStopped, setup_mesh, write_summary  # noqa: F401
