"""The second layer (failure lines no signature describes): the shipped lexicon against a
scikit-learn text classifier, each measured leave-one-family-out over the real corpus.

For each failure family of ``tests/data/real/failures`` (look-alikes included), the family's
cases are read by a reader that never saw that family:

* lexicon: ``medic.parse.failure_lines`` over every line of a case (the worst case for the
  layer: as if no catalogue entry matched any line). A case reads as its first failure line
  does (the root of what follows), or ``none`` when no line reads as a failure. The lexicon
  holds no corpus text, so it has nothing to leave out;
* classifier: TF-IDF (word 1-2 grams, numbers folded) and a class-balanced logistic regression,
  trained on the cases of every other family, each labelled with its truth kind (``none`` for
  look-alikes), predicting a held-out case's kind from all its text.

Per family and macro-averaged over families: recognised (a failure found, a look-alike left
alone) and kind right, and the look-alikes that fired. Then, for the layer's calibration, the
share of the cases it fired on that were real failures, and of those the share whose kind
it read right.

    .venv/bin/python bench/unmatched_layer.py [--corpus tests/data/real/failures]
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import polars as pl  # noqa: E402
import tomli_w  # noqa: E402
from sklearn.feature_extraction.text import TfidfVectorizer  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.metrics import brier_score_loss  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402

from medic.calibration import EvidenceModel  # noqa: E402
from medic.evidence_features import evidence_features  # noqa: E402
from medic.parse.failure_lines import FailureLines  # noqa: E402
from medic.parse.prefixes import RAW, PrefixStripper  # noqa: E402
from medic.tuning import (  # noqa: E402
    expected_calibration_error,
    fit_calibration,
    outcome_features,
    roc_auc,
)
from tests.corpus.failures import Case, load_corpus  # noqa: E402

Reader = Callable[[list[Case], list[Case]], list[str]]
"""Trained on the first cases, the kind of each of the second."""


def case_text(case: Case) -> str:
    return "\n".join(text.text for text in case.texts)


def lexicon_reader(train: list[Case], test: list[Case]) -> list[str]:
    """The lexicon's reading of each case (``train`` unused: nothing is learned)."""
    del train
    return [kind for kind, _ in lexicon_readings(test)]


def lexicon_readings(test: list[Case]) -> list[tuple[str, int]]:
    """Each case's reading by the lexicon and how many of its lines read as failures."""
    layer, stripper = FailureLines(), PrefixStripper()
    lines = [
        (i, line)
        for i, case in enumerate(test)
        for line in case_text(case).splitlines()
        if line.strip()
    ]
    frame = stripper.strip(
        pl.DataFrame({"case": [i for i, _ in lines], "message": [m for _, m in lines]})
    )
    marked = frame.filter(layer.failure_like(pl.col(RAW)))
    read = layer.read(marked, RAW, "message")
    first = read.group_by("case").agg(pl.col("_reading").first(), pl.len())
    kinds = {case: (kind, count) for case, kind, count in first.iter_rows()}
    return [kinds.get(i, ("none", 0)) for i in range(len(test))]


def _folded(text: str) -> str:
    return re.sub(r"\d+", "0", text.lower())


def classifier_reader(train: list[Case], test: list[Case]) -> list[str]:
    """A TF-IDF and logistic-regression classifier's kind for each case of ``test``."""
    model = make_pipeline(
        TfidfVectorizer(
            preprocessor=_folded, ngram_range=(1, 2), sublinear_tf=True, token_pattern=r"[a-z_]+"
        ),
        LogisticRegression(max_iter=2000, class_weight="balanced"),
    )
    model.fit([case_text(c) for c in train], [c.kind for c in train])
    return [str(k) for k in model.predict([case_text(c) for c in test])]


def leave_one_family_out(cases: list[Case], reader: Reader) -> dict[str, list[tuple[Case, str]]]:
    """Each family's cases with the kind ``reader`` gave them, trained without the family."""
    families = sorted({c.family for c in cases})
    out = {}
    for family in families:
        held = [c for c in cases if c.family == family]
        rest = [c for c in cases if c.family != family]
        out[family] = list(zip(held, reader(rest, held), strict=True))
    return out


def scores(read: dict[str, list[tuple[Case, str]]]) -> list[list[str]]:
    """Rows: family, cases, look-alikes, recognised, kind right, look-alikes fired."""
    rows, recognised, kind = [], [], []
    fired_all = negatives_all = 0
    for family, items in read.items():
        found = sum((k != "none") == (not c.negative) for c, k in items) / len(items)
        right = sum(k == c.kind for c, k in items) / len(items)
        negatives = [k for c, k in items if c.negative]
        fired = sum(k != "none" for k in negatives)
        fired_all += fired
        negatives_all += len(negatives)
        recognised.append(found)
        kind.append(right)
        rows.append(
            [
                family,
                str(len(items) - len(negatives)),
                str(len(negatives)),
                f"{found:.2f}",
                f"{right:.2f}",
                f"{fired}/{len(negatives)}",
            ]
        )
    mean = [sum(recognised) / len(recognised), sum(kind) / len(kind)]
    rows.append(
        ["macro", "", "", f"{mean[0]:.2f}", f"{mean[1]:.2f}", f"{fired_all}/{negatives_all}"]
    )
    return rows


def calibration(read: dict[str, list[tuple[Case, str]]]) -> str:
    """What the lexicon's firing is worth: of the cases it fired on, the real failures; of
    those, the ones whose kind it read right, and the ones that are crashes (a confirmed
    unmatched sign is reported as the job's crash: the share is what such a detection is
    worth, the knots of ``crash:unmatched`` in medic/default_calibration.toml)."""
    fired = [(c, k) for items in read.values() for c, k in items if k != "none"]
    real = [(c, k) for c, k in fired if not c.negative]
    right = sum(k == c.kind for c, k in real)
    crash = sum(c.kind == "crash" for c, _ in real)
    return (
        f"lexicon fired on {len(fired)} cases: {len(real)} real failures "
        f"({len(real) / max(1, len(fired)):.3f}), kind right on {right} of them "
        f"({right / max(1, len(real)):.3f}), crashes {crash} ({crash / max(1, len(real)):.3f})"
    )


def layer_outcomes(cases: list[Case]) -> pl.DataFrame:
    """One row per case the lexicon fired on, as ``medic.tuning.calibration_outcomes`` has
    them: the case's family as its ``recording`` (for leave-one-family-out), ``real`` when it
    is a failure and not a look-alike (a detection is real when an incident is, whatever its
    kind, as the scoring rules count), and the evidence feature the layer's detections carry:
    ``agree``, from the lines that read as failures (``medic.evidence_features``)."""
    rows = [
        (case.family, "crash", not case.negative, count)
        for case, (kind, count) in zip(cases, lexicon_readings(cases), strict=True)
        if kind != "none"
    ]
    frame = pl.DataFrame(
        rows, schema=["recording", "kind", "real", "lines"], orient="row"
    ).with_columns(raw=pl.lit(0.0))
    agree = [evidence_features(0.0, {"evidence": n})["agree"] for n in frame["lines"]]
    return frame.drop("lines").with_columns(agree=pl.Series(agree, dtype=pl.Float64))


def layer_calibration(cases: list[Case]) -> str:
    """The ``crash:unmatched`` model, flat and on ``agree``: each one's leave-one-family-out
    check (each family's cases scored by a model fitted on the others': Brier, ECE, ROC AUC),
    then the model fitted on every case, as ``medic/default_calibration.toml`` would hold it.
    A feature whose check does not separate real cases from look-alikes better than chance
    (AUC <= 0.5) does not generalise to a family not seen: ship the flat model then."""
    outcomes = layer_outcomes(cases)
    lines = []
    for name, frame in (("flat", outcomes.drop("agree")), ("agree", outcomes)):
        scored = []
        for family in sorted(set(frame["recording"])):
            fitted = fit_calibration(frame.filter(pl.col("recording") != family))
            held = frame.filter(pl.col("recording") == family)
            probability = fitted.probabilities(
                held["kind"].to_numpy(), held["raw"].to_numpy(), outcome_features(held)
            )
            scored.append(held.with_columns(probability=probability))
        every = pl.concat(scored)
        real = every["real"].to_numpy()
        probability = every["probability"].to_numpy()
        auc = roc_auc(probability, real)
        model = fit_calibration(frame).maps["crash"]
        assert isinstance(model, EvidenceModel)
        lines.append(
            f"crash:unmatched {name}, leave-one-family-out over {len(real)} fired cases "
            f"({int(real.sum())} real): brier {brier_score_loss(real, probability):.4f}, "
            f"ece {expected_calibration_error(probability, real):.4f}, "
            f"auc {'-' if auc is None else f'{auc:.3f}'}"
        )
        lines.append(tomli_w.dumps({"kinds": {"crash:unmatched": model.table()}}))
    return "\n".join(lines)


def print_table(title: str, rows: list[list[str]]) -> None:
    header = ["family", "cases", "look-alikes", "recognised", "kind", "look-alikes fired"]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    print(f"\n{title}")
    for row in [header, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--corpus", type=Path, default=ROOT / "tests" / "data" / "real" / "failures"
    )
    args = parser.parse_args()
    cases = load_corpus(args.corpus)
    lexicon = leave_one_family_out(cases, lexicon_reader)
    print_table("lexicon (medic/parse/failure_lexicon.toml), leave-one-family-out", scores(lexicon))
    print_table(
        "TF-IDF + logistic regression, leave-one-family-out",
        scores(leave_one_family_out(cases, classifier_reader)),
    )
    print()
    print(calibration(lexicon))
    print(layer_calibration(cases))


if __name__ == "__main__":
    main()
