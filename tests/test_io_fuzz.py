"""Fuzzing every reader (hypothesis): truncated and mutated real files.

Whatever the input, a reader returns a Model or raises ``ld.ModelError`` /
``ValueError`` whose message names the file and a line — never another exception.
"""

import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import loopdyn as ld
from loopdyn.io import native

DATA = Path(__file__).parent / "data" / "io"


def _erd(rel):
    import pinocchio

    for p in Path(pinocchio.__file__).resolve().parents:
        cand = p / "share" / "example-robot-data" / "robots" / rel
        if cand.is_file():
            return cand
    return None


def _seeds():
    seeds = {
        "urdf": [DATA / "four_bar_loop.urdf", DATA / "drake_ball.urdf", DATA / "planar.urdf"],
        "sdf": [DATA / "gearbox.sdf", DATA / "features.sdf"],
        "mjcf": [DATA / "four_bar.xml"],
    }
    for fmt, rel in (("urdf", "double_pendulum_description/urdf/double_pendulum.urdf"),
                     ("urdf", "so_arm_description/urdf/so101.urdf"),
                     ("sdf", "cassie_description/robots/cassie_v2.sdf")):  # fmt: skip
        p = _erd(rel)
        if p is not None:
            seeds[fmt].append(p)
    out = {k: [(p.name, p.read_text()) for p in v] for k, v in seeds.items()}
    out["native"] = [
        ("four_bar.toml", native.dumps(ld.examples.four_bar())),
        ("three_rrr.toml", native.dumps(ld.examples.three_rrr())),
    ]
    return out


SEEDS = _seeds()
TOKENS = ["", "nan", "inf", "-inf", "-1e309", "1e308", "0", "-0", "-5", "1e-320", "abc", "1 2",
          "0 0 0", '"', "'", "<", ">", "&amp;", "&x;", "]]", "[[", "=", "{", "\x00", "\u00e9",
          "<link name='x'/>", "<joint/>", "world", "ground", "::", "revolute", "ball",
          "fixed", "1e999", "0x10", "true"]  # fmt: skip
_NUM = re.compile(r"-?\d+(\.\d*)?([eE][-+]?\d+)?")


@st.composite
def mutated(draw, fmt):
    name, text = draw(st.sampled_from(SEEDS[fmt]))
    n = len(text)
    kind = draw(st.sampled_from(["truncate", "splice", "delete", "number", "duplicate"]))
    if kind == "truncate":
        text = text[: draw(st.integers(0, n))]
    elif kind in ("splice", "delete", "duplicate"):
        i = draw(st.integers(0, n))
        j = draw(st.integers(i, min(n, i + 200)))
        if kind == "splice":
            new = draw(st.sampled_from(TOKENS) | st.text(max_size=20))
            text = text[:i] + new + text[j:]
        elif kind == "delete":
            text = text[:i] + text[j:]
        else:
            text = text[:j] + text[i:j] + text[j:]
    else:
        nums = list(_NUM.finditer(text))
        for _ in range(draw(st.integers(1, 4))):
            if not nums:
                break
            m = nums[draw(st.integers(0, len(nums) - 1))]
            text = text[: m.start()] + draw(st.sampled_from(TOKENS)) + text[m.end() :]
            nums = list(_NUM.finditer(text))
    return name, text


def _check(fmt, name, text, **kw):
    try:
        model = ld.io.loads(text, fmt, name=name, **kw)
    except (ld.ModelError, ValueError) as e:
        msg = str(e)
        assert re.search(rf"{re.escape(name)} line \d+", msg), msg
        return
    assert isinstance(model, ld.Model)


# LOOPDYN_FUZZ_EXAMPLES=<n> runs a longer, randomised campaign (the default is fixed)
_N = int(os.environ.get("LOOPDYN_FUZZ_EXAMPLES", "0"))
FUZZ = settings(
    max_examples=_N or 60,
    deadline=None,
    derandomize=not _N,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@FUZZ
@given(mutated("urdf"))
def test_fuzz_urdf(case):
    name, text = case
    _check("urdf", name, text, couplings="ignore", massless=1e-6)


@FUZZ
@given(mutated("sdf"))
def test_fuzz_sdf(case):
    name, text = case
    _check("sdf", name, text, couplings="ignore", package_dirs=[DATA / "models"])


@FUZZ
@given(mutated("mjcf"))
def test_fuzz_mjcf(case):
    name, text = case
    _check("mjcf", name, text, couplings="ignore")


@FUZZ
@given(mutated("native"))
def test_fuzz_native(case):
    name, text = case
    _check("native", name, text)


@pytest.mark.parametrize("fmt", ["urdf", "sdf", "mjcf", "native"])
def test_seed_files_load(fmt):
    """The unmutated seeds load (so the fuzzers start from valid files)."""
    for name, text in SEEDS[fmt]:
        kw = {} if fmt == "native" else {"couplings": "ignore"}
        if fmt == "sdf":
            kw["package_dirs"] = [DATA / "models"]
        assert isinstance(ld.io.loads(text, fmt, name=name, **kw), ld.Model)
