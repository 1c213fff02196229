"""Shared helpers of the paper reproductions (``examples/papers/*.py``).

Each script regenerates its figures into ``docs/img/papers/`` (``--out`` elsewhere) and
prints its key numbers as ``KEY name = value`` lines, which ``tests/test_papers.py``
reads (run with ``--quick``) and checks against the papers' values.
"""

import argparse
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
IMG = ROOT / "docs" / "img" / "papers"


def parse(doc, argv=None, extra=None):
    """Command line of a reproduction script: ``--quick`` and ``--out``."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="short runs for the tests (< 60 s)")
    ap.add_argument("--out", default=str(IMG), help=f"figure folder (default {IMG})")
    if extra:
        extra(ap)
    args = ap.parse_args(argv)
    args.out = Path(args.out)
    args.out.mkdir(parents=True, exist_ok=True)
    return args


def key(name, value):
    """Print one key number (read back by tests/test_papers.py)."""
    if isinstance(value, float):
        print(f"KEY {name} = {value:.6g}", flush=True)
    else:
        print(f"KEY {name} = {value}", flush=True)


def plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig, out, name):
    fig.tight_layout()
    fig.savefig(out / name, dpi=100)
    print(f"figure {out / name}", flush=True)
    import matplotlib.pyplot as plt

    plt.close(fig)


class Stage:
    """``with Stage("name"):`` prints the wall time of a step."""

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        print(f"--- {self.name}", flush=True)
        self.t0 = time.perf_counter()

    def __exit__(self, *exc):
        print(f"    ({time.perf_counter() - self.t0:.1f} s)", flush=True)
