"""Every case of the real-world failure corpus (``tests/data/real/failures``) through
``medic diagnose``'s path (the one pipeline, detectors and rules), against its truth."""

from __future__ import annotations

from pathlib import Path

import pytest

from medic.diagnose.run import diagnose
from tests.corpus.failures import Case, load_corpus, score

CORPUS = Path(__file__).parents[1] / "data" / "real" / "failures"
CASES = load_corpus(CORPUS)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.family}/{c.id}")
def test_corpus_case_is_diagnosed_as_its_truth(case: Case) -> None:
    verdict = score(case, diagnose(case.texts, year=case.year))
    assert verdict.right, "; ".join(verdict.problems)


def test_the_corpus_covers_every_family_with_enough_cases() -> None:
    failures = [c for c in CASES if not c.negative]
    assert len(failures) >= 300
    assert len([c for c in CASES if c.negative]) >= 100
    families = {c.family for c in failures}
    assert {"nccl_watchdog", "ib_fabric", "xid", "gpu_hardware", "cuda", "torchrun"} <= families
    assert {"horovod", "slurm", "config", "driver_init"} <= families
    xids = {c.id.split("-")[1] for c in CASES if c.family == "xid" and c.id.startswith("xid-")}
    assert {"119", "120", "121", "122", "123", "136", "140", "143", "154"} <= xids
    assert {str(code) for code in range(144, 151)} <= xids
