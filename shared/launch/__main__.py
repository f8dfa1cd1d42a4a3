"""`python -m shared.launch --config=experiments/<p>/<x>.py[:variant] --workdir=DIR [--mesh=PRESET]`."""
import sys

from shared.launch import main

if __name__ == "__main__":
    sys.exit(main())
