"""`python -m shared.launch --config=experiments/<p>/<x>.py[:variant] --workdir=DIR [--mesh=PRESET]`."""
import os
import sys

from shared.launch import main

if __name__ == "__main__":
    code = main()
    if code in (130, 143):
        # Interrupted (the line is printed and every checkpoint is complete): leave at once. A normal interpreter
        # shutdown here tears down jax / orbax / tensorstore threads still mid-setup, which once ended a SIGTERM
        # during the RL warm start's setup in a segfault (exit -11) after the right line.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
