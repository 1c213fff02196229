"""``python -m loopdyn``: the command line (see ``loopdyn.cli``)."""

import sys

from loopdyn.cli import run

sys.exit(run())
