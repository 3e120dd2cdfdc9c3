"""Every case of the real-world progress corpus (tests/data/real/progress) against its truth."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.corpus.progress import Case, CorpusError, load_corpus, load_file, read_job, score

CORPUS = Path(__file__).resolve().parents[1] / "data" / "real" / "progress"
FILES = load_corpus(CORPUS)


def _cases() -> list[tuple[str, int]]:
    return [(name, case.index) for name, cases in FILES.items() for case in cases]


READ = {name: read_job(cases) for name, cases in FILES.items()}


@pytest.mark.parametrize(("name", "index"), _cases(), ids=lambda v: str(v))
def test_every_corpus_case_is_read_as_its_truth_says(name: str, index: int) -> None:
    case: Case = FILES[name][index]
    verdict = score(case, READ[name][index])
    assert verdict.right, f"{name} case {index + 1}: {verdict.problem}: {case.lines[0]!r}"


def test_the_corpus_is_as_large_as_the_issue_asks() -> None:
    cases = [case for cases in FILES.values() for case in cases]
    progress = [case for case in cases if not case.not_a_step]
    assert len(progress) >= 300
    assert sum(case.not_a_step for case in cases) >= 100
    assert len({case.framework for case in progress}) >= 30


@pytest.mark.parametrize("name", ["pytorch_examples_word_lm", "olmo_core"])
def test_each_file_reads_alike_on_its_own_and_line_by_line_batches_learn_as_one(
    name: str,
) -> None:
    # The learning reader keeps what it learned per job between batches: the word-LM lines
    # (OLMo-core's records) fed one case a batch give the same steps. Both are steps at first
    # sight, from the first line on: OLMo-core's record names its step ("[step=N/M,epoch=E]")
    # and its time; a word-LM line counts its batch out of the epoch's ("200/ 2983 batches")
    # and reports a loss.
    cases = FILES[name]
    from medic.parse.progress import ProgressParser

    parser = ProgressParser()
    one_by_one = [read_job([case], parser)[0] for case in cases]
    steps = [[row["step"] for row in rows] for rows in one_by_one]
    truth = [[] if step is None else [step] for step in (case.step for case in cases)]
    assert steps == truth


def test_a_malformed_corpus_file_is_a_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[source]\nframework = "x"\nobserved = ["y"]\n[[case]]\nstep = 3\n')
    with pytest.raises(CorpusError, match="case 1: needs line or lines"):
        load_file(bad)
