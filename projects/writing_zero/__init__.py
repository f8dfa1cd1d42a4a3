"""Writing-Zero (arXiv 2506.00103): pairwise writing judges and BRPO. Spec: ../shared/papers/writing_zero_brpo.md;
the judges are shared/judges, BRPO and the other pairwise estimators shared/rl/pairwise.py. This package holds the
paper's glue: the ConstraintWriting task with its oracle, biased preference data and principle annotations
(constraint_writing.py). See README.md."""
from projects.writing_zero import constraint_writing  # noqa: F401
