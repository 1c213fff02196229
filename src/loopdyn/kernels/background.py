"""``python -m loopdyn.kernels.background build NAME ...`` / ``wait [SECONDS]``: the
background build of ``loopdyn.kernels.tiers`` (a module of its own so that ``-m`` does
not run a second copy of ``tiers``, which the package imports first)."""

import sys

from loopdyn.kernels import tiers

if __name__ == "__main__":
    sys.exit(tiers._main(sys.argv[1:]))
