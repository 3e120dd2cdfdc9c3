"""Bars inside an evaluation a job announced before it trained: evaluation steps, not training.

A progress bar without a description reads the same whatever loop it counts: the Hugging Face
Trainer's evaluation bar and its training bar are both a bare tqdm bar. Once a job trains,
the training loop's total tells the two apart (``ProgressParser._without_other_loops``); an
evaluation run before any training step (``trainer.evaluate()`` before ``trainer.train()``)
comes before that total is known. Trainers announce such an evaluation: the Trainer logs
``***** Running Evaluation *****`` on entering ``evaluation_loop`` and ``***** Running
training *****`` on entering its training loop (``src/transformers/trainer.py``), at the info
level its example scripts set. Between an announcement (an ``eval_start`` event) and the next
sign of training (a ``startup``, ``eval_end`` or ``train_end`` event, or a step line of a
format that is no bar) a bar of a job that has not trained yet counts evaluation batches: its
steps are ``eval_step`` rows.
"""

from __future__ import annotations

import polars as pl

TRAINING_SIGNS = ("startup", "eval_end", "train_end", "job_end")
"""Events after which a job's bars are training again."""


class AnnouncedEvaluations:
    """Per job: whether its last phase announcement opened an evaluation, and whether it has
    trained (printed a training step) yet."""

    def __init__(self) -> None:
        self.evaluating: dict[str, bool] = {}
        self.trained: set[str] = set()

    def __len__(self) -> int:
        return len(self.evaluating) + len(self.trained)

    def forget(self, job_id: str) -> None:
        self.evaluating.pop(job_id, None)
        self.trained.discard(job_id)

    def events(self, rows: pl.DataFrame, event: pl.Expr, bar: pl.Expr) -> pl.Series:
        """The event of each of ``rows`` (a job's rows in line order, ``event`` their formats'
        events, ``bar`` whether a bar format read them): ``eval_step`` for the step rows of bars
        in an evaluation announced before the job's first training step."""
        marks = rows.select(
            "job_id",
            event.alias("_event"),
            bar.alias("_bar"),
            pl.when(event == "eval_start")
            .then(pl.lit(True))
            .when(event.is_in(TRAINING_SIGNS) | ((event == "step") & ~bar))
            .then(pl.lit(False))
            .alias("_mark"),
        )
        if not (any(self.evaluating.values()) or marks.get_column("_mark").any()):
            # no job is in an announced evaluation, nor announces one here: every row keeps its
            # event (the window queries below cost more than this look)
            self._remember(marks)
            return marks.get_column("_event")
        carried = pl.DataFrame(
            {"job_id": list(self.evaluating), "_carried": list(self.evaluating.values())},
            schema={"job_id": pl.String, "_carried": pl.Boolean},
        )
        trained = pl.Series(sorted(self.trained), dtype=pl.String).implode()
        step = pl.col("_event") == "step"
        marks = (
            marks.join(carried, on="job_id", how="left", maintain_order="left")
            .with_columns(
                pl.coalesce(pl.col("_mark").forward_fill().over("job_id"), "_carried")
                .fill_null(False)
                .alias("_evaluating")
            )
            .with_columns(
                (
                    step & pl.col("_bar") & pl.col("_evaluating") & ~pl.col("job_id").is_in(trained)
                ).alias("_eval_bar")
            )
            .with_columns(
                pl.when(pl.col("_eval_bar") & ~self._trained_before(step))
                .then(pl.lit("eval_step"))
                .otherwise(pl.col("_event"))
                .alias("_event")
            )
        )
        self._remember(marks)
        return marks.get_column("_event")

    @staticmethod
    def _trained_before(step: pl.Expr) -> pl.Expr:
        """Whether a training step of the job came earlier in the batch."""
        training = (step & ~pl.col("_eval_bar")).cast(pl.Int32)
        return (training.cum_sum().over("job_id") - training) > 0

    def _remember(self, marks: pl.DataFrame) -> None:
        last = (
            marks.filter(pl.col("_mark").is_not_null())
            .group_by("job_id")
            .agg(pl.col("_mark").last())
        )
        self.evaluating.update(last.iter_rows())
        stepped = marks.filter(pl.col("_event") == "step").get_column("job_id").unique()
        self.trained.update(stepped.to_list())
