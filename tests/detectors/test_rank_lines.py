"""Ranks that print their own step lines behind a launcher's prefix: the progress state keeps
each rank's last step, so a hang can name the rank that fell behind (issue 17, item 5)."""

from __future__ import annotations

from medic.detectors.progress_state import ProgressTracker
from medic.parse.progress import ProgressParser
from medic.testing.builders import batch, log

LINE = (
    "{rank}: [2026-11-30 04:00:{second:02d}] iteration {step:8d}/  100000 | consumed samples: "
    "{samples:12d} | elapsed time per iteration (ms): 2001.3 | learning rate: 1.500000E-04 | "
    "global batch size:   512 | lm loss: 2.345678E+00 |"
)
"""Megatron-LM's training_log() line behind srun --label's task number."""


def test_srun_labelled_rank_lines_give_each_rank_its_last_step() -> None:
    rows = []
    for step in range(40, 43):
        for rank in range(4):
            if rank == 2 and step > 40:
                continue  # rank 2 stops printing after step 40
            text = LINE.format(rank=rank, second=step, step=step, samples=step * 512)
            rows.append(log(step + rank / 100, text, node=f"n{1 + rank // 2}"))
    progress = ProgressParser().parse(batch("logs", rows))
    assert progress is not None
    tracker = ProgressTracker()
    tracker.observe(progress.frame)
    last = {rank: step for rank, (step, _) in tracker.jobs["100"].rank_steps.items()}
    assert last == {0: 42, 1: 42, 2: 40, 3: 42}
    assert tracker.jobs["100"].rank_steps[2][1] == "n2"
