"""Writing-Zero (arXiv 2506.00103): pairwise writing judges and BRPO. Spec: ../shared/papers/writing_zero_brpo.md;
the judges are shared/judges, BRPO and the other pairwise estimators shared/rl/pairwise.py. This package holds the
paper's glue: the ConstraintWriting task with its oracle, biased preference data and principle annotations
(constraint_writing.py), its word vocabulary (vocab.py), the judges' training data and the "-Zero" warm-start set
(judge_data.py), and the tasks that train and evaluate the judges, the scalar RM and the RL arms (tasks.py). See
README.md."""
from projects.writing_zero import constraint_writing, judge_data, vocab  # noqa: F401
from projects.writing_zero import tasks  # noqa: F401
