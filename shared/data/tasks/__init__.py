"""The built-in example sets (DATASETS "rl/<name>", each with its checker in TASK_CHECKERS; see
shared/data/examples.py for the example contract). Importing this package registers them all:

  procedural.py   rl/arithmetic, rl/arithmetic_cot, rl/countdown, rl/sorting: generated, with train/test/ood splits
  public.py       rl/gsm8k, rl/math, rl/svamp, rl/asdiv, rl/mawps (files under data.task_options.path) and
                  rl/reasoning_gym (the optional reasoning-gym package)
  tinygsm_sym.py  rl/tinygsm_sym: synthetic word problems with several solution paths, a leak shortcut and a
                  process checker (CLIPO, D.1)
  assistant.py    rl/assistant: TinyGSM-Sym problems with hazard prompts to refuse and five reward channels
                  (medical_multiobjective, D.1)
  answers.py      answer parsing the checkers share (last_number, numbers_equal, check_last_number, ...)
"""
from shared.data.tasks import assistant, procedural, public, tinygsm_sym  # noqa: F401  (DATASETS "rl/*", TASK_CHECKERS)
