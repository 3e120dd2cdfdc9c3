"""bench/generalization.py: leave-one-family-out over the real-world corpus, on small parts."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest

from bench.generalization import Score, failure_families, macro, progress_frameworks, table
from medic.parse.catalogue import builtin_catalogue
from medic.parse.progress import FORMATS
from tests.corpus.failures import load_families
from tests.corpus.progress import load_formats

REAL = Path(__file__).resolve().parents[1] / "data" / "real"


def test_every_family_names_entries_of_the_catalogue_and_formats_built_in() -> None:
    catalogue = builtin_catalogue()
    for ids in load_families(REAL / "failures").values():
        catalogue.without(ids)  # raises on an id the catalogue lacks
    frameworks = {f.framework for f in FORMATS}
    named = {n for names in load_formats(REAL / "progress").values() for n in names}
    assert named <= frameworks


def test_a_family_is_scored_without_its_entries(tmp_path: Path) -> None:
    (tmp_path / "failures").mkdir()
    for name in ("ucx", "lookalikes"):
        shutil.copy(REAL / "failures" / f"{name}.toml", tmp_path / "failures")
    (score,) = failure_families(tmp_path)
    assert (score.name, score.left_out, score.cases) == ("ucx", ("ucx_retry_exceeded",), 6)
    lookalikes = tomllib.loads((REAL / "failures" / "lookalikes.toml").read_text())["case"]
    assert score.lookalikes == len(lookalikes) and score.fired == 0
    assert score.kind <= score.recognised <= score.cases
    assert len(score.problems) >= score.cases - score.kind


def test_a_framework_is_read_without_its_formats() -> None:
    (score,) = progress_frameworks(REAL, only=["nanogpt"])
    assert (score.left_out, score.cases) == (("nanogpt",), 14)
    assert score.fired == 0
    assert score.recognised == 14, score.problems  # the learning reader reads nanoGPT's lines


def test_a_framework_s_cases_read_alone_have_no_run_to_learn_from() -> None:
    # nanoGPT's lines name their step and time: each is a step at first sight; fastai's table
    # rows name neither, and are read only under their header, in a run
    (nanogpt,) = progress_frameworks(REAL, only=["nanogpt"], alone=True)
    assert nanogpt.recognised == nanogpt.cases == 14, nanogpt.problems
    (fastai,) = progress_frameworks(REAL, only=["fastai"])
    (fastai_alone,) = progress_frameworks(REAL, only=["fastai"], alone=True)
    assert fastai_alone.recognised < fastai.recognised


def test_the_macro_average_counts_each_family_once_and_skips_what_it_lacks() -> None:
    big = Score("big", ("a",), 100, 100, 100, 0, 0, 0, 0)
    small = Score("small", ("b",), 2, 0, 0, 2, 1, 0, 0)
    assert macro([big, small]) == (0.5, 0.5, pytest.approx(0.5))
    lines = table([big, small], ("family", "kind", "culprit", "left out"))
    assert lines[-2].split()[:4] == ["macro", "50%", "50%", "50%"]
