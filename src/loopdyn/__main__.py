"""``python -m loopdyn``: the command line (see ``loopdyn.cli``)."""

import sys

from loopdyn.cli import main

sys.exit(main())
