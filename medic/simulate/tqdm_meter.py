"""tqdm's progress-meter text, as HF Trainer and PyTorch Lightning print it into job logs.

Follows ``tqdm.std.tqdm.format_meter`` (10-character bar with Unicode eighths, ``s/it`` below
one iteration per second, ``mm:ss`` or ``h:mm:ss`` intervals) so simulated bars read exactly
like real ones; tqdm itself is not a dependency of medic.
"""

from __future__ import annotations

BAR_WIDTH = 10
BLOCKS = " " + "".join(chr(c) for c in range(0x258F, 0x2587, -1))


def interval(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours:d}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


def bar(fraction: float) -> str:
    steps = len(BLOCKS) - 1
    full, part = divmod(int(fraction * BAR_WIDTH * steps), steps)
    text = BLOCKS[-1] * full
    if full < BAR_WIDTH:
        text += BLOCKS[part] + BLOCKS[0] * (BAR_WIDTH - full - 1)
    return text


def meter(
    n: int,
    total: int,
    elapsed: float,
    rate: float | None,
    prefix: str = "",
    postfix: str = "",
    inverse: bool = True,
) -> str:
    """One meter line; ``inverse`` switches to ``s/it`` below 1 it/s (tqdm's default; Lightning
    always prints ``it/s``)."""
    percentage = 100.0 * n / total if total else 0.0
    left = f"{prefix}: " if prefix else ""
    if not rate:
        rate_text, remaining = "?it/s", "?"
    elif inverse and rate < 1:
        rate_text, remaining = f"{1 / rate:5.2f}s/it", interval((total - n) / rate)
    else:
        rate_text, remaining = f"{rate:5.2f}it/s", interval((total - n) / rate)
    tail = f", {postfix}" if postfix else ""
    return (
        f"{left}{percentage:3.0f}%|{bar(n / total if total else 0.0)}| {n}/{total} "
        f"[{interval(elapsed)}<{remaining}, {rate_text}{tail}]"
    )
