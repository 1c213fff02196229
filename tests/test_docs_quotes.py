"""Issue 42 item 6: numbers and messages the docs quote are what the code gives now."""

import re
import sys
from pathlib import Path

import numpy as np
import pytest

import loopdyn as ld

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _flat(text):
    return " ".join(text.replace("#", " ").split())


def test_tutorial_quotes_the_partitioning_error_as_raised():
    model = ld.examples.five_bar(np.radians(80), np.radians(70))
    with pytest.raises(ld.SimulationError) as err:
        ld.simulate(model, t_end=3.0, stabilization="partitioning",
                    independent=model.actuated, repartition=False)  # fmt: skip
    assert _flat(str(err.value)) in _flat((DOCS / "tutorial.md").read_text())


def test_io_md_counts_the_example_robot_data_urdfs_that_load():
    sys.path.insert(0, str(Path(__file__).parent))
    from test_io import URDFS

    if not URDFS:
        pytest.skip("example-robot-data is not installed")

    def loaded(**options):
        n = 0
        for path in URDFS:
            try:
                ld.load(path, **options)
                n += 1
            except ld.ModelError:
                pass
        return n

    counts = (len(URDFS), loaded(), loaded(couplings="ignore"),
              loaded(couplings="ignore", massless=1e-6))  # fmt: skip
    text = _flat((DOCS / "io.md").read_text())
    m = re.search(r"All (\d+) URDFs of example-robot-data [\d.]+: (\d+) load as they are and "
                  r"(\d+) with .*?, (\d+) in all", text)  # fmt: skip
    assert m, "io.md no longer states the counts"
    assert tuple(int(g) for g in m.groups()) == counts
