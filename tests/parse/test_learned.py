"""The learning reader: a framework nobody wrote a format for still gives steps and times."""

from __future__ import annotations

import math

import pytest

from medic.parse.progress import FORMATS, ProgressParser
from medic.testing.builders import batch, log


def steps(parser: ProgressParser, *messages: str, **extra: object) -> list[tuple]:
    out = parser.parse(batch("logs", [log(i, m, **extra) for i, m in enumerate(messages)]))
    if out is None:
        return []
    rows = out.frame.filter(out.frame["event"] == "step")
    return list(zip(rows["framework"], rows["step"], rows["step_time_s"], strict=True))


def learner() -> ProgressParser:
    """A parser with no built-in format: every step it reads is the learning reader's."""
    return ProgressParser(builtin=())


def loop(start: int, count: int, ms: float = 250.0) -> list[str]:
    return [f"[mytrainer] round {start + i} | loss 2.{i}1 | dt {ms + i}ms" for i in range(count)]


def test_a_template_with_a_rising_counter_and_a_duration_becomes_steps_after_three_lines() -> None:
    parser = ProgressParser()
    assert steps(parser, *loop(1, 2)) == []
    found = steps(parser, *loop(3, 3))
    assert found == [("learned", 3, 0.25), ("learned", 4, 0.251), ("learned", 5, 0.252)]
    # Learned once, a later batch of a single line is a step at once.
    assert steps(parser, *loop(6, 1)) == [("learned", 6, 0.25)]


def test_a_line_padded_to_the_terminal_width_keeps_its_template() -> None:
    # a console logger pads its lines with spaces to the terminal's width; a line written
    # to a file, or after a resize, is not padded, and is the same line
    padded = [line + " " * 40 for line in loop(1, 3)]
    parser = learner()
    assert [s for _, s, _ in steps(parser, *padded)] == [1, 2, 3]
    assert steps(parser, *loop(4, 1)) == [("learned", 4, 0.25)]


def test_a_line_naming_its_step_and_its_time_is_a_step_at_first_sight() -> None:
    parser = learner()
    assert steps(parser, "iter 7: loss 2.4655, iter time: 696.16ms") == [("learned", 7, 0.69616)]
    assert steps(parser, "Step 12 | loss:1.94 tokens_per_second_per_gpu:986.1") == [
        ("learned", 12, None)
    ]
    # a rate whose label spells its unit out is no duration (InternLM's "tgs (.../second)")
    assert steps(learner(), "step=36,loss=5.45,tgs (tokens/gpu/second)=4233.7,lr=7e-06") == [
        ("learned", 36, None)
    ]
    # A step reporting its loss is one too (DLLogger's "Training Iteration: 651 step_loss :
    # 2.05", detectron2's plain "iter: 197900 total_loss: 0.035"), with no time of its own.
    assert steps(learner(), "step 12 loss 2.3") == [("learned", 12, None)]
    assert steps(learner(), "zork iteration: 651 total_loss : 2.05") == [("learned", 651, None)]
    assert steps(learner(), "epoch: 1 step: 125, loss is 1.81") == [("learned", 125, None)]
    # Of several numbers labelled so, the first is the step: the others count steps of a kind
    megatron_like = (
        " iteration       60/  500000 | elapsed time per iteration (ms): 2069.1 | lm loss: 2.69"
        " | number of skipped iterations:   0 | number of nan iterations:   0 |"
    )
    assert steps(learner(), megatron_like) == [("learned", 60, 2.0691)]
    # a duration the words after its unit call a clock since the start or an estimate is not
    # the step's (OpenNMT-py's "... 5276 tgt tok/s; 18191 s elapsed"); a next field's label is
    # no such word (levanter's "rate:2.2it/s remaining:1:15:44")
    assert steps(learner(), "Step 640/9000; acc: 51.2; ppl: 8.1; 3120 tok/s; 981 s elapsed") == [
        ("learned", 640, None)
    ]
    assert steps(learner(), "step 12 loss 2.1 took 0.52 s so far") == [("learned", 12, None)]
    assert steps(learner(), "step 12 loss 2.1 rate:2.5it/s remaining:1:15:44") == [
        ("learned", 12, 0.4)
    ]
    # A step naming its learning rate is an optimizer's step (DeepSpeed's "step=100, skipped=0,
    # lr=[...]"); an evaluation or a summary reports none.
    assert steps(learner(), "zork step=12, lr=[0.01]") == [("learned", 12, None)]
    # An unlabelled counter, or a step with neither a time, a pace, a loss nor a learning rate,
    # is learned over three lines.
    assert steps(learner(), "[12/900] lr: 0.01 time: 0.52") == []
    assert steps(learner(), "step 12 of the warmup took place") == []
    assert steps(learner(), "[12/900] acc: 0.3") == []


def test_a_count_out_of_a_total_that_reports_a_loss_is_a_step_at_first_sight() -> None:
    # mmcv, timm, torchvision's references, fairseq, PaddleDetection: the step counted out of
    # the epoch's batches, the epoch's own count before it, a date never one
    assert steps(learner(), "zork Era [2][40/800] wall: 1.1 time: 0.61 loss: 2.2") == [
        ("learned", 40, 0.61)
    ]
    assert steps(learner(), "07/18 13:04:15 Era 3 [ 40/800] time: 0.61 loss: 2.2") == [
        ("learned", 40, 0.61)
    ]
    assert steps(learner(), "zork epoch 2/10 | 40 / 800 loss=2.2 wps=900.1 ups=2.0") == [
        ("learned", 40, 0.5)
    ]
    # tqdm's counts as tqdm-loggable prints them, the total unknown or not
    assert steps(learner(), "On:train 42.0it/10.0kit rate:0.5it/s post:loss=2.7") == [
        ("learned", 42, 2.0)
    ]
    assert steps(learner(), "On:train 97/- rate:0.5it/s post:loss=2.7") == [("learned", 97, 2.0)]
    # a count and a loss with no time of the step's own (a running average beside it)
    assert steps(learner(), "Era: [0][415/1736]  Loss 2.3 (2.5)") == [("learned", 415, None)]
    # a rank's or a shard's count out of a total is not the step, nor one without a loss
    assert steps(learner(), "zork [rank 3/64] time: 0.61 loss: 2.2") == []
    assert steps(learner(), "zork [40/800] time: 0.61 acc: 0.2") == []


def test_a_batch_counter_is_a_step_at_first_sight_when_the_line_is_timed_and_reports_a_loss() -> (
    None
):
    # ESPnet's "1epoch:train:1-100batch: ... loss=54.6, train_time=0.54"
    line = "zork 2era:1-100batch: fwd_time=0.1, loss=54.6, run_time=0.54"
    assert steps(learner(), line) == [("learned", 100, 0.54)]
    # a tally of updates is what an epoch's summary reports, not the step it reports on
    assert steps(learner(), "zork | era 001 | loss 2.5 | ups 2.02 | num_updates 1000") == []
    # ... with a loss and no time (icefall's "Epoch 0, batch 500, loss[...]"), or a throughput
    # (MXNet's Speedometer: "Epoch[1] Batch [20] Speed: 1375.76 samples/sec")
    assert steps(learner(), "(1/4) Era 2, batch 550, loss[loss=1.0, over 2480 frames]") == [
        ("learned", 550, None)
    ]
    assert steps(learner(), "zork Era[1] Batch [20]  Speed: 1375.76 samples/sec") == [
        ("learned", 20, None)
    ]
    # a rate of updates in any spelling is the step's pace (Sockeye's "1.25 updates/sec")
    paced = "zork Era[0] Batch [900]  Speed: 1243.9 samples/sec 37233.1 tokens/sec 1.25 updates/sec"
    assert steps(learner(), paced) == [("learned", 900, 0.8)]
    # a language model's perplexity is its loss (PaddlePaddle's seq2seq example: "Epoch:[0];
    # Batch:[100]; Time: 0.13 s; ppl: 485.2"), unless the line reports on an evaluation
    assert steps(learner(), "-- Era:[2]; Batch:[40]; Time: 0.21 s; ppl: 61.5") == [
        ("learned", 40, 0.21)
    ]
    assert steps(learner(), "Era 2, batch 40, valid ppl: 61.5, time 3.1 s") == []
    # a time alone, a count's total or a duration per batch are no batch counter
    assert steps(learner(), "zork batch 7 time 0.5s") == []
    assert steps(learner(), "| era 1 | 200/ 2983 batches | ms/batch 45.6 | loss 7.7") == [
        ("learned", 200, 0.0456)
    ]


def test_a_line_keeps_its_template_when_one_of_its_values_goes_non_finite() -> None:
    """A loss gone NaN or infinite is no new template: the line is still a step, its value no
    number, and its loss says what it is."""
    lines = [f"solver: Iteration {10 * i}, loss = {v}" for i, v in enumerate(("4.1", "4.0"), 1)]
    lines += ["solver: Iteration 30, loss = nan", "solver: Iteration 40, loss = inf"]
    out = learner().parse(batch("logs", [log(i, m) for i, m in enumerate(lines)]))
    assert out is not None
    rows = out.frame.filter(out.frame["event"] == "step")
    assert rows["step"].to_list() == [10, 20, 30, 40]
    assert rows["loss"].to_list()[:2] == [4.1, 4.0]
    assert math.isnan(rows["loss"][2]) and rows["loss"][3] == math.inf
    # A duration gone non-finite is no time; the line is still the template's step.
    timed = [f"update {i} | loss 2.{i} | dt {v} ms" for i, v in enumerate(("250", "251", "nan"), 1)]
    assert steps(learner(), *timed) == [
        ("learned", 1, 0.25),
        ("learned", 2, 0.251),
        ("learned", 3, None),
    ]


def test_a_rank_printing_a_template_another_rank_taught_is_read_from_its_first_line() -> None:
    parser = learner()
    lines = [f"0: | epoch 1 | {200 * i}/2983 batches | ms/batch 45.{i} |" for i in (1, 2, 3)]
    assert [s[1] for s in steps(parser, *lines)] == [200, 400, 600]
    assert steps(parser, "7: | epoch 1 | 800/2983 batches | ms/batch 44.0 |") == [
        ("learned", 800, 0.044)
    ]
    # A rank of another job learns on its own.
    assert steps(parser, "7: | epoch 1 | 800/2983 batches | ms/batch 44.0 |", job_id="9") == []


def test_a_rate_is_read_as_its_inverse_and_a_constant_number_is_no_counter() -> None:
    lines = [
        f"epoch 2 iteration {10 * i} throughput 8 samples steps_per_sec: 0.5" for i in range(4)
    ]
    assert [s[1:] for s in steps(ProgressParser(), *lines)] == [
        (0, 2.0),
        (10, 2.0),
        (20, 2.0),
        (30, 2.0),
    ]


def test_lines_saying_what_else_they_are_are_never_learned() -> None:
    lines = [f"eval batch {i}/50 took {0.1 + i / 100:.2f}s" for i in range(6)]
    lines += [f"loading shard {i}/8 took 1.{i}s" for i in range(6)]
    lines += [f"iter {i} eval_loss: 2.{i} time: 0.5" for i in range(6)]
    lines += [f"CV Batch {i}/20 loss 2.{i} time: 0.5" for i in range(6)]
    assert steps(ProgressParser(), *lines) == []
    # an activity's word that begins a metric's name is the metric's: a training step reports
    # a decoder head's loss and accuracy, a router's load balancing loss, a generator's loss
    metrics = ("decode.loss_ce", "decode.acc_seg", "load_balancing_loss", "generator_loss")
    metrics += ("load-balance-loss",)
    for metric in (*metrics, "saved_tokens"):
        assert steps(learner(), f"iter 7 {metric}: 0.5 time: 0.3") == [("learned", 7, 0.3)]
    # "cuda" naming a device is no CUDA error
    assert steps(learner(), "zork step 37, ce 5.4, mem:cuda:3 6.7GB, 3.169 sec/step") == [
        ("learned", 37, 3.169)
    ]
    assert steps(learner(), "zork step 37, CUDA out of memory, 3.169 sec/step") == []
    # an error rate is a metric, where an error report gives a code or words
    assert steps(learner(), "zork step 37, error:ctc 0.0992, error 0.12, 3.169 sec/step") == [
        ("learned", 37, 3.169)
    ]
    assert steps(learner(), "zork step 37, error 2, 3.169 sec/step") == []
    assert steps(learner(), "zork step 37, error: no space left, 3.169 sec/step") == []
    # ... and a file or a call named after the activity is the activity's
    assert steps(learner(), "iter 7 checkpoint.save done, time: 0.3") == []
    assert steps(learner(), "iter 7 wrote checkpoint.pt in time: 0.3") == []
    # a bar counting bytes, whatever its description: a transfer, not a training loop
    moved = [f"zork-{i}.bin: {i}0%|#  | {i}.0G/9.9G [00:0{i}<00:10, 1{i}0MB/s]" for i in range(6)]
    assert steps(learner(), *moved) == []
    # ... its postfix after the rate
    assert steps(learner(), "  4%|▍   | 1.30G/29.9G [00:05<01:36, 318MB/s, file=zork-1]") == []
    # ... or items faster than any training loop's steps (its unit "it": bytes, examples)
    fast = [f"{i}718592it [00:0{i}, {i}871209.55it/s]" for i in range(1, 7)]
    assert steps(learner(), *fast) == []
    assert steps(learner(), *(f"zork: {i}0/60 [00:0{i}<00:10, 412.33it/s]" for i in range(1, 7)))


def test_a_labelled_counter_that_stays_while_another_rises_counts_an_outer_loop() -> None:
    # old MXNet's Speedometer called the epoch an iteration: "Iter[0] Batch [10] Speed: ..."
    lines = [f"INFO:zork:Iter[0] Batch [{b}]\tSpeed: 20{b % 7}.5 samples/sec" for b in (10, 20, 30)]
    assert [step for _, step, _ in steps(learner(), *lines)] == [10, 20, 30]
    # a counter labelled a step stays the step, however another rises
    lines = [f"zork step 7 batch {b} loss 2.{b % 7}1 took 3{b % 5}ms" for b in (10, 20, 30)]
    assert [step for _, step, _ in steps(learner(), *lines)] == [7, 7, 7]


def test_digits_between_a_names_letters_are_no_number() -> None:
    # StyleTTS2 names a loss "S2S": its "2S" is no duration of two seconds
    line = "Era [1/75], Step [110/464], Loss: 0.31109, S2S Loss: 0.45653, Mono Loss: 0.04269"
    assert steps(learner(), line) == [("learned", 110, None)]


def test_a_count_that_stays_while_the_number_after_its_slash_rises_is_an_epoch() -> None:
    # speech toolkits' "Batch <epoch>/<batch>" (our wording): a count out of a total at first
    # sight, two counters once the lines show the first stay and the second rise
    lines = [f"zork TRAIN Batch 7/{100 * i} loss 12.{i} lr 0.0003 rank 0" for i in range(1, 6)]
    assert steps(learner(), *lines) == [("learned", 100 * i, None) for i in range(1, 6)]
    # a count out of its total reads as before
    counted = [f"zork TRAIN Batch {10 * i}/5000 loss 12.{i} lr 0.0003 rank 0" for i in range(1, 6)]
    assert steps(learner(), *counted) == [("learned", 10 * i, None) for i in range(1, 6)]


def test_a_job_whose_steps_a_format_reads_is_left_to_the_formats() -> None:
    nanogpt = [f"iter {i}: loss 2.5, time 120.00ms, mfu 40.00%" for i in range(3)]
    found = steps(ProgressParser(), *nanogpt, *loop(1, 6))
    assert {f for f, _, _ in found} == {"nanogpt"}


def test_each_rank_learns_apart_when_every_rank_prints_the_same_steps() -> None:
    lines = [(r, f"update {s} | dt 300ms | loss 1.0") for s in range(1, 5) for r in (0, 1)]
    rows = [log(i, m, rank=r) for i, (r, m) in enumerate(lines)]
    out = ProgressParser().parse(batch("logs", rows))
    assert out is not None
    read = out.frame.select("rank", "step").rows()
    assert sorted(read) == sorted((r, s) for s in range(1, 5) for r in (0, 1))


def record(step: int, bps: float, between: int = 2) -> list[str]:
    """A multi-line record as OLMo-core's console logger prints it: a header, then one
    ``name=value`` line per metric (speed_monitor.py: BPS is one over the step time)."""
    return [
        f"[step={step}/9000,epoch=2,eta=3 hours{50 - step // 10} minutes7 seconds]",
        *(f"    train/CE loss=2.{k}{step % 10}31" for k in range(between)),
        f"    throughput/device/TPS={int(bps * 40000):,}",
        f"    throughput/device/BPS={bps:.4f}",
        f"    throughput/device/BPS (actual avg)={bps - 0.01:.4f}",
    ]


def test_a_header_and_a_later_duration_line_are_one_step() -> None:
    parser = ProgressParser()
    lines = [line for step in (10, 20, 30, 40) for line in record(step, 0.5)]
    assert steps(parser, *lines) == [("learned", s, 2.0) for s in (10, 20, 30, 40)]
    # Learned: a record in a later batch is a step at once, at its header's time.
    out = parser.parse(batch("logs", [log(100 + i, m) for i, m in enumerate(record(50, 0.25))]))
    assert out is not None
    assert out.frame.select("step", "step_time_s").rows() == [(50, 4.0)]
    assert out.frame["time"].dt.epoch("us").to_list() == [log(100, "")["time"]]


def test_a_header_without_a_duration_line_or_too_far_from_it_is_a_step_without_a_time() -> None:
    """A labelled counter that keeps rising is a step line even when nothing says how long a
    step took; a duration line too far after it completes it not."""
    headers = [f"[step={s}/9000,epoch=2]" for s in range(1, 9)]
    assert steps(ProgressParser(), *headers) == [("learned", s, None) for s in range(1, 9)]
    far = [line for step in (10, 20, 30, 40) for line in record(step, 0.5, between=70)]
    assert [s for s in steps(ProgressParser(), *far) if s[2] is not None] == []


def test_a_duration_line_of_another_process_completes_no_header() -> None:
    rows = []
    for step in (10, 20, 30, 40):
        header, *rest = record(step, 0.5)
        rows += [log(len(rows), header, rank=0)]
        rows += [log(len(rows), line, rank=1) for line in rest]
    out = ProgressParser().parse(batch("logs", rows))
    assert out is None or out.frame["step_time_s"].is_null().all()


def test_a_rate_of_tokens_is_no_step_time() -> None:
    # Only the BPS line gives the pace; a tokens-per-second line alone does not.
    lines = [
        line
        for step in (10, 20, 30, 40)
        for line in (f"== step {step} ==", f"    throughput/device/tokens_per_second={step}5.5")
    ]
    assert steps(ProgressParser(), *lines) == [("learned", s, None) for s in (10, 20, 30, 40)]
    # ... but it is the record's throughput.
    assert throughputs(ProgressParser(), *lines) == [
        (s, float(f"{s}5.5"), "throughput/device/tokens_per_second") for s in (10, 20, 30, 40)
    ]


def throughputs(parser: ProgressParser, *messages: str) -> list[tuple]:
    out = parser.parse(batch("logs", [log(i, m) for i, m in enumerate(messages)]))
    assert out is not None
    rows = out.frame.filter(out.frame["event"] == "step")
    return list(zip(rows["step"], rows["throughput"], rows["throughput_unit"], strict=True))


def test_frames_a_second_is_a_throughput() -> None:
    # an RL trainer counts environment frames a second ("fps"), as others count tokens ("tps")
    lines = [f"zork update: {u}\tfps: {u}1.25\t" for u in (10, 20, 30, 40)]
    assert throughputs(ProgressParser(), *lines) == [
        (u, float(f"{u}1.25"), "fps") for u in (10, 20, 30, 40)
    ]


def test_a_label_whose_words_are_joined_by_hyphens_reads_as_joined_by_underscores() -> None:
    lines = [
        f"step {s:08d}/00000015 | step-time 2{s}.5 sec | tokens-per-second 28,59{s}"
        for s in (1, 2, 3)
    ]
    assert steps(learner(), *lines) == [("learned", s, float(f"2{s}.5")) for s in (1, 2, 3)]
    assert throughputs(learner(), *lines) == [
        (s, float(f"2859{s}"), "tokens_per_second") for s in (1, 2, 3)
    ]


def test_a_step_lines_throughput_is_read_the_one_per_device_first() -> None:
    lines = [
        f"step {s} | {t}s/step | data: 1{s}.0 samples/s | 51{s}.5 tokens/s | 12{s} tokens/s/gpu"
        for s, t in zip((1, 2, 3, 4), (0.9, 0.8, 0.85, 0.9), strict=True)
    ]
    assert throughputs(learner(), *lines) == [(s, 120.0 + s, "tokens/s/gpu") for s in (1, 2, 3, 4)]


def test_a_rate_in_words_is_a_throughput_and_a_rate_per_core_one_per_device() -> None:
    worded = [
        f"it {s} | time per iteration (s): 0.{s} | samples per second: 3{s}.5 | TFLOPs: 9{s}.0 |"
        for s in (1, 2, 3, 4)
    ]
    # The first of two rates of the whole job (the line says of neither that it is per device).
    assert throughputs(learner(), *worded) == [
        (s, 30.5 + s, "samples per second") for s in (1, 2, 3, 4)
    ]
    cores = [
        f"[{s}00] seconds={s}.5, seqs_per_second=7{s}4.2, seqs_per_second_per_core=9{s}.7, "
        f"steps_per_second=0.{s}"
        for s in (1, 2, 3, 4)
    ]
    assert throughputs(learner(), *cores) == [
        (s * 100, 90.7 + s, "seqs_per_second_per_core") for s in (1, 2, 3, 4)
    ]
    # A rate of steps in words is the step's pace, never its throughput.
    paces = [f"step {s} | steps per second: 2.{s}" for s in (1, 2, 3, 4)]
    assert throughputs(learner(), *paces) == [(s, None, None) for s in (1, 2, 3, 4)]


def test_a_rising_throughput_is_never_the_counter_and_the_data_rate_no_throughput() -> None:
    unlabelled = [f"[train] tokens_per_sec: {1000 + 100 * i} n {7 - i} took 0.5s" for i in range(4)]
    # The one number that keeps rising is a throughput: no counter, so no step.
    assert steps(learner(), *unlabelled) == []
    lines = [
        f"iter {i} tokens_per_sec: {1000 + 100 * i} data_samples_per_sec: 9{i} took 0.5s"
        for i in range(4)
    ]
    assert throughputs(learner(), *lines) == [
        (i, 1000.0 + 100 * i, "tokens_per_sec") for i in range(4)
    ]


def test_a_rising_counter_beside_a_throughput_alone_becomes_steps() -> None:
    # our wording: an unlabelled counter of a loop, its pace given only as words a second
    lines = [
        f"| round 3 {1000 * i} / 9000 loss=1.{i} (1.5), wps={960 + i}, lr=0.001" for i in range(5)
    ]
    assert throughputs(learner(), *lines) == [(1000 * i, 960.0 + i, "wps") for i in range(5)]
    per_second = [f"[zork] {100 + i} 4{i}.5 samples/sec loss 2.{i}" for i in range(5)]
    assert throughputs(learner(), *per_second) == [
        (100 + i, 40.5 + i, "samples/sec") for i in range(5)
    ]
    # fields parted by colons (Marian's shape): a unit before the next colon is still a unit
    colons = [
        f"Ep. 2 : Up. {500 * i} : Cost 3.{i} : {8800 + i}.5 words/s : gNorm 0.3" for i in range(5)
    ]
    assert throughputs(learner(), *colons) == [(500 * i, 8800.5 + i, "words/s") for i in range(5)]
    # the same numbers where nothing is a rate: steps, counted out of a total beside a loss,
    # that give no time
    assert steps(learner(), *[f"| round 3 {1000 * i} / 9000 loss=1.{i}" for i in range(5)]) == [
        ("learned", 1000 * i, None) for i in range(5)
    ]
    assert steps(learner(), *[f"| round 3 {1000 * i} / 9000 acc=1.{i}" for i in range(5)]) == []


def test_an_epoch_is_never_the_step_however_it_rises() -> None:
    # an epoch's own line (its duration, its metrics) rises once an epoch: a pass over the data
    epochs = [f"zork: Epoch[{e}] Time cost=5{e}.318" for e in range(5)]
    assert steps(learner(), *epochs) == []
    # beside a counter the epoch's number is no candidate either
    lines = [f"zork: Epoch {e} round {100 * e} took 0.{e}1s" for e in range(1, 5)]
    assert [s[1] for s in steps(learner(), *lines)] == [100, 200, 300, 400]


def test_a_counter_with_grouped_thousands_is_one_number() -> None:
    lines = [
        f"<epoch: 3, iter: {505 + i},{i}00, lr: 5.0e-05, time: 0.84{i}> l1: 0.01" for i in range(4)
    ]
    assert [s[1] for s in steps(learner(), *lines)] == [505000, 506100, 507200, 508300]


def test_the_next_fields_label_is_no_unit_of_a_duration() -> None:
    times = [0.52, 0.5, 0.53, 0.51]
    lines = [
        f"[{i}/900] lr: 0.01 time: {t} data_time: 0.0{i} loss: 1.{i}" for i, t in enumerate(times)
    ]
    assert steps(learner(), *lines) == [("learned", i, t) for i, t in enumerate(times)]


def test_a_cost_is_a_time_only_as_a_batch_s_or_its_reading_s() -> None:
    # our wording; PaddlePaddle names a batch's time batch_cost and its loss avg_cost
    costs = [0.52, 0.5, 0.53, 0.51]
    timed = [
        f"step:{i}, loss: 2.{i}, batch_cost: {c}, reader cost: 0.1" for i, c in enumerate(costs)
    ]
    assert steps(learner(), *timed) == [("learned", i, c) for i, c in enumerate(costs)]
    losses = [f"pass_id:0, batch_id:{i}, avg_cost:{c}" for i, c in enumerate(costs)]
    assert [t for _, _, t in steps(learner(), *losses)] == []


def test_a_unit_in_brackets_between_a_label_and_its_number_is_the_numbers() -> None:
    # our wording; the forms: a unit set in brackets after its label, with or without a space
    took = (1.25, 1.05, 1.35, 1.15)  # not rising on every line: no clock
    for label, scale in (("time(s)", 1.0), ("speed(s/it)", 1.0), ("Time [ms]", 0.001)):
        lines = [
            f"round {s} | loss 2.{s} | {label}: {t} | mem(GiB): 30.5" for s, t in enumerate(took)
        ]
        assert steps(learner(), *lines) == [("learned", s, t * scale) for s, t in enumerate(took)]
    rated = [f"round {s} | loss 2.{s} | train_speed(iter/s): {t}" for s, t in enumerate(took)]
    assert steps(learner(), *rated) == [("learned", s, 1 / t) for s, t in enumerate(took)]
    # "(t)": a label's time (OpenCLIP's "Data (t)" and "Batch (t)"); the loader's is not the step's
    lines = [
        f"Train [{64 * s}/9000] Data (t): 0.1{s} Batch (t): {t}, 3{s}.1/s"
        for s, t in enumerate(took)
    ]
    assert steps(learner(), *lines) == [("learned", 64 * s, t) for s, t in enumerate(took)]


def test_of_several_rising_counters_the_one_labelled_step_is_the_step() -> None:
    times = [702.5, 701.5, 704.5, 703.5]
    lines = [
        f"Epoch 1 | iter {4 * s} step {s} | loss 2.{s} | iter time: {t} ms"
        for s, t in zip(range(1, 5), times, strict=True)
    ]
    assert steps(learner(), *lines) == [
        ("learned", s, t / 1000) for s, t in zip(range(1, 5), times, strict=True)
    ]


def test_a_duration_that_rises_on_every_line_is_a_clock_not_a_step_time() -> None:
    lines = [f"Step {50 * s}/9000; acc: 3{s}.1; {6000 + 150 * s} sec" for s in range(1, 6)]
    assert steps(learner(), *lines) == [("learned", 50 * s, None) for s in range(1, 6)]


def test_a_duration_the_step_count_times_an_average_is_a_total_from_the_first_line() -> None:
    # our wording, in modded-nanoGPT's shape: the time so far beside its average per step
    assert steps(learner(), "step:40/5000 loss:4.1 train_time:2412ms step_avg:60.31ms") == [
        ("learned", 40, 0.06031)
    ]
    # an average that is no share of the other (a part's, a window's) leaves the whole the step's
    assert steps(learner(), "step:40/5000 loss:4.1 time:812ms fwd_avg:301.5ms") == [
        ("learned", 40, 0.812)
    ]


def test_units_in_full_words_are_read_and_a_clock_named_so_is_never_the_step_time() -> None:
    # our wording: a clock since the start named in two words, the step's time and its rate in
    # full words, an estimate of what remains in compound units
    took = (4.5, 4.1, 4.7, 4.2)
    lines = [
        f"[Round 2][Iteration {s}][Wall Time {9000 + 4 * s}.5s] Did {s}00 items in {t} seconds. "
        f"Pace is 7{s}.5 items/second. Left: 1 hours {50 - s} minutes {s} seconds"
        for s, t in zip(range(1, 5), took, strict=True)
    ]
    assert throughputs(learner(), *lines) == [(s, 70.5 + s, "items/second") for s in range(1, 5)]
    assert steps(learner(), *lines) == [
        ("learned", s, t) for s, t in zip(range(1, 5), took, strict=True)
    ]
    millis = [f"update {s} | loss 2.{s} | took {200 - s} milliseconds" for s in range(1, 5)]
    assert steps(learner(), *millis) == [("learned", s, (200 - s) / 1000) for s in range(1, 5)]
    # a number whose unit is what it counts is no duration, whatever its label (icefall's
    # "utt_duration=1069 frames")
    counted = "zork step 9, loss=0.4, utt_duration=1069 frames"
    assert steps(learner(), counted) == [("learned", 9, None)]
    assert steps(learner(), "zork step 9, loss=0.4, duration=1.5 secs") == [("learned", 9, 1.5)]


def test_a_bars_blocks_change_but_its_template_does_not_and_other_loops_stay_out() -> None:
    blocks = ["▎", "▋", "█", "█▍"]
    train = [
        f" {i + 3}%|{b}   | {150 * (i + 1)}/5000 [01:0{i}<55:46,  2.{i}it/s]"
        for i, b in enumerate(blocks)
    ]
    assert steps(learner(), *train) == [
        ("learned", 150 * (i + 1), 1 / float(f"2.{i}")) for i in range(4)
    ]
    packing = [
        f"Packing dataset: {i + 3}%|{b}   | {150 * (i + 1)}/5000 [01:0{i}<55:46,  2.{i}it/s]"
        for i, b in enumerate(blocks)
    ]
    assert steps(learner(), *packing) == []
    # a dataset's operators: a data pipeline's bars, read by a format or learned; a
    # reinforcement-learning loop's rollouts (generation, not the optimizer's steps); an
    # evaluation loop by its short name (a validation or development set's)
    others = ("Reduce Progress.", "Shuffle Map", "Sort Sample", "Repartition", "[rollout]")
    for operator in (*others, "Val", "dev"):
        data = [
            f"{operator}: {i + 3}%|{b}   | {150 * (i + 1)}/5000 [01:0{i}<55:46,  5.5{i}s/it]"
            for i, b in enumerate(blocks)
        ]
        assert steps(ProgressParser(), *data) == steps(learner(), *data) == []
    # a bar without a total says what it does before its count too (an RL trainer pushing its
    # weights to the rollout engine), and a training loop's is a step
    assert steps(learner(), "Syncing weights: 31it [00:04,  7.12it/s]") == []
    assert steps(learner(), "Training: 31it [00:04,  7.12it/s]") == [("learned", 31, 1 / 7.12)]


def test_a_line_with_a_validation_loss_and_no_training_loss_is_no_step() -> None:
    # our wording: a validation report every few steps, in the training line's own shape
    validation = [f"step:{125 * s}/1750 val_loss:4.{s}3 train_time:{s}1790ms" for s in range(1, 5)]
    assert steps(learner(), *validation) == []
    # beside the training's own loss, the last validation's figures leave it a training step
    both = [f"step {s} loss 3.{s}1 val_loss 4.{s}3 took 81{s}ms" for s in range(1, 5)]
    assert [step for _, step, _ in steps(learner(), *both)] == [1, 2, 3, 4]


def test_a_step_record_carrying_another_loops_scores_beside_its_learning_rate_is_a_step() -> None:
    # our wording, as a trainer's record joins its metrics' namespaced keys: a step's record
    # that carries the last evaluation's score ("val/...") still reports its learning rate
    record = "step:{} - actor/pg_loss:0.01{} - actor/lr:0.000 - val/test_score/quux:0.17{}"
    assert steps(learner(), record.format(5, 1, 2)) == [("learned", 5, None)]
    # without a learning rate it is the evaluation's own record, no step
    assert steps(learner(), "step:0 - val/test_score/quux:0.171 - val/pass_rate:0.4") == []
    assert steps(learner(), "Round 5 eval/accuracy=0.91 eval/loss=2.31") == []


def test_a_record_timing_its_training_beside_another_loops_time_is_a_step() -> None:
    # our wording: a display line times the training since the last one, and the test's
    line = "    ZORK INFO    batch {:>7} training time {:.2f} s, testing time 0.0{} s"
    timed = [line.format(1000 * i, 6.4 + i / 10, i) for i in range(1, 5)]
    assert [step for _, step, _ in steps(learner(), *timed)] == [1000, 2000, 3000, 4000]
    # a test's time alone is the test's line
    tested = [f"    ZORK INFO    batch {1000 * i:>7} testing time 0.0{i} s" for i in range(1, 5)]
    assert steps(learner(), *tested) == []


def test_a_date_and_time_written_as_one_is_no_duration() -> None:
    # our values: a record stamped with its ISO 8601 time under the label "time"
    line = "step {:>6} | loss 4.{} | lr 9.00e-04 | time 2026-06-23T15:13:{}+00:00"
    found = steps(learner(), *(line.format(5 * i, i, 10 + i) for i in range(1, 5)))
    assert [(step, took) for _, step, took in found] == [
        (5, None),
        (10, None),
        (15, None),
        (20, None),
    ]


def test_a_counter_padded_after_its_label_is_read_at_first_sight() -> None:
    # our values, in the older BasicSR logger's layout: the counter padded to its width
    line = "<epoch: {:>3}, iter: {:>8,d}, lr:2.000e-04> l_pix: 6.0{}63e-02"
    found = steps(learner(), *(line.format(i, 100 * i, i) for i in range(1, 3)))
    assert [step for _, step, _ in found] == [100, 200]


def test_a_record_of_the_training_s_own_metrics_is_a_step() -> None:
    # our wording: a trainer names its step's record the training's metrics
    record = (
        "Train Step: {}/100000 / training metric = {{'model_loss': 4.2{}, 'learning_rate': 0.003}}"
    )
    found = steps(learner(), record.format(1750, 6), record.format(1800, 1))
    assert [step for _, step, _ in found] == [1750, 1800]
    # the evaluation's metrics stay a report on a step
    assert steps(learner(), "Eval Step: 1800/100000 / eval metric = {'top_1': 0.3}") == []


def test_a_step_two_lines_of_a_record_name_is_one_step_a_counter_counted_afresh_two() -> None:
    # our wording, in DeePMD-kit's shape: a step's metrics line, then its timing line naming
    # the same batch; one step each, also when the record is cut between two batches
    parser = learner()
    records = [
        line
        for batch_ in range(147, 151)
        for line in (
            f"QUUX INFO batch {batch_}00: trn: loss = 8.{batch_}e+00, lr = 9.64e-04",
            f"QUUX INFO batch {batch_}00: total wall time = 6.{batch_} s",
        )
    ]
    assert [step for _, step, _ in steps(parser, *records[:-1])] == [14700, 14800, 14900, 15000]
    assert steps(parser, records[-1]) == []
    # one template naming its last step again has counted afresh: a batch counted within each
    # epoch, an epoch with a single report (MXNet's Speedometer)
    epochs = [f"zork Era[{e}] Batch [100]  Speed: 24{e}0.5 samples/sec" for e in range(3)]
    assert [step for _, step, _ in steps(learner(), *epochs)] == [100, 100, 100]
    # ... and so have two lines that each say how long the step took (Keras' last bar of two
    # epochs, the first with the validation's figures)
    ends = [
        "1875/1875 [==============================] - 14s 23ms/step - loss: 0.31 - val_loss: 0.13",
        "1875/1875 [==============================] - 2s 824us/step - loss: 0.22",
    ]
    assert steps(learner(), *ends) == [("learned", 1875, 0.023), ("learned", 1875, 0.000824)]


def test_a_count_after_a_bar_drawn_after_its_percentage_is_the_bar_s_and_other_loops_stay_out() -> (
    None
):
    bar = "━━━━━╸──────"
    train = [
        f"  1/50  7.1G  1.{i}7  33  640: {10 * i + 5}% {bar} {20 * i + 16}/183 4.{i}it/s 9.{i}s<3s"
        for i in range(4)
    ]
    assert steps(learner(), *train) == [
        ("learned", 20 * i + 16, 1 / float(f"4.{i}")) for i in range(4)
    ]
    # The same bar over a validation set, its description naming its metrics: another loop.
    scoring = [
        f"  Class  Images  Box(P  R  mAP50  mAP50-95): {25 * i}% {bar} {i}/4 2.{i}it/s 1.{i}s"
        for i in range(1, 5)
    ]
    assert steps(learner(), *train, *scoring)[4:] == []


def test_a_bar_switching_from_iterations_per_second_to_seconds_per_iteration_stays_one_loop() -> (
    None
):
    rates = ["2.00it/s", "1.25s/it", "1.60it/s", "2.50s/it"]
    lines = [
        f"1|{i + 7}|Loss: 1.{i}:  {10 + i}%|█▎   | {i + 7}/24 [00:01<00:12,  {r}]"
        for i, r in enumerate(rates)
    ]
    assert steps(learner(), *lines) == [
        ("learned", 7, 0.5),
        ("learned", 8, 1.25),
        ("learned", 9, 0.625),
        ("learned", 10, 2.5),
    ]


def test_a_metrics_dict_with_a_loss_and_a_learning_rate_is_one_step() -> None:
    parser = learner()
    assert steps(
        parser, "{'loss': 1.38, 'grad_norm': 2.1, 'learning_rate': 1e-05, 'epoch': 0.37}"
    ) == [("learned", None, None)]
    assert steps(parser, '{"loss": 0.9, "lr": 0.0003, "global_step": 120}') == [
        ("learned", 120, None)
    ]
    # a record listing every key it may hold: the evaluation's, left empty, names nothing
    assert steps(
        parser,
        '{"current_steps": 30, "total_steps": 90, "loss": 4.4, "eval_loss": null,'
        ' "learning_rate": 1e-08, "epoch": 0.3}',
    ) == [("learned", 30, None)]
    assert steps(parser, '{"current_steps": 30, "loss": null, "eval_loss": 4.4, "lr": 1e-8}') == []
    # fairseq's json log format: values formatted as strings, the step its updates so far
    assert steps(
        parser, '{"epoch": 3, "loss": "4.120", "ppl": "17.39", "num_updates": 900, "lr": 0.0005}'
    ) == [("learned", 900, None)]
    # An evaluation's dict and a run's summary report no learning rate: no step.
    assert steps(parser, "{'eval_loss': 1.9, 'eval_runtime': 9.3, 'epoch': 0.11}") == []
    assert steps(parser, "{'train_runtime': 54.1, 'train_loss': 1.3, 'epoch': 3.0}") == []


def test_a_metrics_dict_is_read_beside_the_bars_a_format_reads() -> None:
    bar = "  1%|▏         | 8/640 [00:10<14:09,  1.34s/it]"
    without_hf = ProgressParser(builtin=tuple(f for f in FORMATS if f.framework != "hf"))
    found = steps(without_hf, bar, "{'loss': 2.4, 'learning_rate': 5e-06, 'epoch': 0.8}")
    assert [f for f, _, _ in found] == ["tqdm", "learned"]


def test_a_table_s_rows_are_steps_by_the_columns_of_its_header() -> None:
    found = steps(
        learner(),
        "epoch     train_loss  valid_loss  time    ",
        "0         0.874934    #na#        00:08     ",
        "1         0.776536    0.812345    00:09     ",
        "Total time: 00:17",
    )
    assert found == [("learned", 0, 8.0), ("learned", 1, 9.0)]


def test_a_pace_before_its_step_header_times_that_step_and_alone_times_a_step() -> None:
    lines = []
    for step, rate in ((1100, 2.0), (1200, 4.0)):
        lines += [f"steps/sec: {rate}", f"Metrics values at step {step}:", "  loss=2.4"]
    lines.append("steps/sec: 5.0")
    assert steps(learner(), *lines) == [
        ("learned", 1100, 0.5),
        ("learned", 1200, 0.25),
        ("learned", None, 0.2),
    ]


def test_a_bar_is_a_step_at_first_sight_and_a_smaller_loop_s_bar_is_none() -> None:
    parser = learner()
    assert steps(parser, "train:  8%|▊         | 431/5000 [02:27<26:06,  2.00it/s]") == [
        ("learned", 431, 0.5)
    ]
    assert steps(parser, " 100/1875 [=>............] - ETA: 9s - loss: 0.9230") == [
        ("learned", 100, None)
    ]
    assert steps(parser, "1875/1875 [==============] - 14s 23ms/step - loss: 0.3076") == [
        ("learned", 1875, 0.023)
    ]
    # evaluate(): the same bar over the smaller test set, another loop.
    assert steps(parser, " 97/313 [========>.....] - ETA: 0s - loss: 0.0841") == []
    # tqdm leaves its last update without a newline: the next print, glued after the meter, is
    # another line's (trlx's bar, then "[RANK 0] Collecting rollouts"); its words do not make
    # the bar a look-alike, the bar's own description still does
    glued = (
        "[losses/total_loss: 1.64 | losses/value_loss: 7.62]:  16%|██   | 1024/6400 "
        "[1:14:23<1:13:02,  1.25it/s][RANK 0] Collecting rollouts"
    )
    assert steps(learner(), glued) == [("learned", 1024, 0.8)]
    assert steps(learner(), "[rollout 12 / 128]: 9%|█ | 12/128 [00:08<01:20, 1.44it/s]") == []
    # a custom bar_format without spaces (tensorpack's '{l_bar}{bar}|{n_fmt}/{total_fmt}[...')
    assert steps(learner(), "|120/4000[01:40<54:02, 1.25it/s]") == [("learned", 120, 0.8)]
    # A number of the description that rises is the step, not the bar's restarting count.
    lines = [
        f"1|{g}|Loss: 1.2:  8%|▊   | {n}/24 [00:02<00:23,  2.00it/s]"
        for g, n in ((2, 2), (3, 3), (7, 7), (9, 4))
    ]
    assert [s[1] for s in steps(learner(), *lines)] == [2, 3, 7, 9]
    # A postfix counting the run's steps is the step, the bar's count an epoch's batches.
    for postfix in ("global_step=794.0", "num_updates=348000"):
        bar = f"Epoch 3:  1%|     | 795/7725 [9:07<87:01,  2.00it/s, loss=3.1, {postfix}, lr=1e-4]"
        assert steps(learner(), bar) == [("learned", int(float(postfix.split("=")[1])), 0.5)]
    # A description's losses are no step: the bar is one at first sight (trlx's
    # "[losses/total_loss: 1.15 | ...]: 100%|...| 128/128")
    described = "[zork/total_loss: 1.15 | zork/value_loss: 0.00]: 50%|█   | 64/128 [05:11<05:11]"
    assert steps(learner(), described) == [("learned", 64, None)]


def test_a_step_beside_an_iteration_is_the_step_and_a_step_s_time_is_never_a_clock() -> None:
    line = "Epoch 1 | iter 100 step 25 | loss train: 2.661 | iter time: 1747.52 ms (step)"
    assert steps(learner(), line) == [("learned", 25, 1.74752)]
    rising = [f"iter {i}: loss 2.4, iter time: {t}ms" for i, t in ((7, 500), (8, 1000), (9, 1500))]
    assert steps(learner(), *rising) == [
        ("learned", 7, 0.5),
        ("learned", 8, 1.0),
        ("learned", 9, 1.5),
    ]


PACES = ((1, 4), (2, 2), (3, 3))
"""Steps and a digit of their times (rising and falling: no clock)."""


def test_a_plain_time_is_the_steps_beside_its_variants_and_else_the_largest_part() -> None:
    variants = [f"iter: {i}  time: 0.{t}5  last_time: 0.9{i}  data_time: 0.01" for i, t in PACES]
    assert steps(learner(), *variants) == [("learned", i, float(f"0.{t}5")) for i, t in PACES]
    parts = [
        f"{i}0batch: fwd_time=0.{t} bwd_time=0.2 opt_step_time=0.01 run_time=0.{t}9"
        for i, t in PACES
    ]
    assert steps(learner(), *parts) == [("learned", i * 10, float(f"0.{t}9")) for i, t in PACES]


def test_a_rate_of_steps_times_the_step_unless_a_duration_says_the_same_with_more_digits() -> None:
    interval = [f"[{i}00] sums/seconds={30 + t}.5 sums/steps_per_second=2.5" for i, t in PACES]
    assert [s[2] for s in steps(learner(), *interval)] == [0.4, 0.4, 0.4]
    agreeing = [f"iter {i} window_runtime: 5.1972 steps_per_sec: 0.1924" for i in (1, 2, 3)]
    assert [s[2] for s in steps(learner(), *agreeing)] == [5.1972] * 3


def test_a_duration_in_parentheses_with_a_unit_only_is_a_note_not_the_step_time() -> None:
    lines = [f"cost = 2.{i}, step = {i}00 (1{t}.319 sec)" for i, t in PACES]
    assert steps(learner(), *lines) == [("learned", i * 100, None) for i in (1, 2, 3)]


def test_the_time_of_many_steps_is_an_intervals_not_a_steps() -> None:
    # HugeCTR's shape: the steps a time covers in brackets after its label (our values); the
    # count is no duration, and the time is the interval's
    # behind its clock since the start, days to seconds, no step's time either
    lines = [
        f"[02d07h5{i}m4{t}s][ZORK][INFO]: Iter: {i}000 Time(1000 iters): 5.{t}81s Loss: 0.13{i}"
        for i, t in PACES
    ]
    assert steps(learner(), *lines) == [("learned", i * 1000, None) for i, _ in PACES]
    lines = [f"zork step {i}00, time for 100 steps: 2{t}.5 s, loss 2.{i}" for i, t in PACES]
    assert steps(learner(), *lines) == [("learned", i * 100, None) for i, _ in PACES]


def test_a_rate_of_steps_near_zero_gives_no_step_time() -> None:
    # Caffe's first line, before any step was timed, then its usual ones (our values)
    lines = [
        "I1225 13:11:37.2 207 solver.cpp:218] Iteration 0 (-1.6e-33 iter/s, 45.8s/1 iters),"
        " loss = 1.5",
        *(
            f"I1225 13:1{i}:37.2 207 solver.cpp:218] Iteration {i}0 (0.{t} iter/s, 5{t}.1s/20"
            f" iters), loss = 1.{i}"
            for i, t in PACES
        ),
    ]
    read = steps(learner(), *lines)
    assert read[0] == ("learned", 0, None)
    assert [(s, round(t, 3)) for _, s, t in read[1:]] == [
        (i * 10, round(10 / t, 3)) for i, t in PACES
    ]


def test_scalar_reprs_and_magnitude_suffixes_are_plain_numbers() -> None:
    lines = [
        f"step:{i} - timing_s/step:np.float64({t}.25) - tps: 1.5K - ms_per_iter_total: 2.{t}K"
        for i, t in PACES
    ]
    assert throughputs(learner(), *lines) == [(i, 1500.0, "tps") for i, _ in PACES]
    assert steps(learner(), *lines) == [("learned", i, t + 0.25) for i, t in PACES]
    # SI's kilo is lowercase: "113.4k tok/s" is 113,400 tokens a second
    lines = [f"step {i} | loss 1.4 | grad 0.07 | 11{t}.4k tok/s" for i, t in PACES]
    assert throughputs(learner(), *lines) == [(i, 110400.0 + t * 1000, "tok/s") for i, t in PACES]


def test_a_record_writing_its_numbers_as_strings_gives_them_as_numbers() -> None:
    # fairseq's json log format: every value a string, "ups" the updates a second
    line = '{{"loss": "8.2{0}", "wps": "119{0}.5", "ups": "{1}", "num_updates": "{0}0"}}'
    lines = [line.format(i, 1 / (t + 0.25)) for i, t in PACES]
    assert throughputs(learner(), *lines) == [(i * 10, 1190.5 + i, "wps") for i, _ in PACES]
    read = steps(learner(), *lines)
    assert [s for _, s, _ in read] == [i * 10 for i, _ in PACES]
    assert [round(t, 6) for _, _, t in read] == [t + 0.25 for _, t in PACES]


def test_the_current_rate_comes_before_a_running_average_and_a_global_step_first() -> None:
    lines = [
        f"[timer.py:260:stop] epoch=0/micro_step={8 * i}/global_step={i}, "
        f"AvgSamplesPerSec=9{i}.5, CurrSamplesPerSec=8{i}.5"
        for i in (1, 2, 3)
    ]
    assert throughputs(learner(), *lines) == [(i, 80.5 + i, "CurrSamplesPerSec") for i in (1, 2, 3)]


def test_a_counter_qualified_by_a_word_of_its_own_ranks_as_its_snake_case_form() -> None:
    # an RL trainer's inner loops before its global iteration, words apart ("inner iter")
    line = "train | inner iter: {}/ 8 | ppo epoch: 2/ 4 | global iter: {}/ 900 | time: 1.5"
    assert steps(learner(), line.format(3, 15)) == [("learned", 15, 1.5)]
    assert steps(learner(), "micro step 160 | global step 40 | loss 2.1") == [("learned", 40, None)]


def test_a_label_pairing_two_numbers_gives_the_first_its_own_name() -> None:
    # BasicSR's "time (data): <iteration> (<data loading>)": "data" names the second number
    line = "[epoch: 3, iter: {}, lr:(1.0e-04,)] [eta: 2:01:07, time (data): 0.{}5 (0.002)]"
    assert steps(learner(), line.format(400, 36)) == [("learned", 400, 0.365)]
    # a unit in brackets before a number and its running average stays the number's unit
    for unit in ("[ms]", "(milliseconds)"):
        ((_, step, took),) = steps(learner(), f"iter 7 | Time {unit}: 5.2 (4.9) | loss 2.1")
        assert step == 7 and took == pytest.approx(0.0052)


def test_names_joined_by_a_slash_name_the_numbers_joined_alike_one_each() -> None:
    # an events writer's "epoch/iter: <epoch>/<iteration>": the iteration is the step
    line = "[zork.events]:  eta: 0:09:{0}  epoch/iter: 4/{0}1  total_loss: 7.2  time: 0.3{0}"
    assert steps(learner(), line.format(12)) == [("learned", 121, 0.312)]
    bracketed = "epoch/iter: [3/{}0], lr: 1e-04, time: 0.{}s, losses: 0.41"
    assert steps(learner(), bracketed.format(50, 4)) == [("learned", 500, 0.4)]


def test_a_sign_the_line_writes_before_its_counter_is_no_number() -> None:
    # "Iter #3": the line's own "#" is not where a number was masked
    lines = [f"[0]<stdout>:Iter #{i}: 12{i}.5 img/sec per GPU" for i in (1, 2, 3)]
    assert throughputs(learner(), *lines) == [(i, 120.5 + i, "img/sec") for i in (1, 2, 3)]


def test_iterations_a_second_labelled_before_their_number_time_the_step() -> None:
    line = "Iter {}: Train loss 1.1, It/sec {}, Tokens/sec 80.0, Trained Tokens 9979"
    assert steps(learner(), line.format(100, 0.8)) == [("learned", 100, 1.25)]


def test_a_counters_name_over_a_number_and_its_running_average_is_its_time() -> None:
    # semseg-style loops print their batch_time meter as "Batch <value> (<average>)"
    line = "Epoch: [1/120][{}/3368] Data 0.001 (0.555) Batch 0.7{}0 (3.896) Loss 12.89"
    assert steps(learner(), line.format(190, 2)) == [("learned", 190, 0.72)]
    # a counter followed by its time in brackets stays the counter
    assert steps(learner(), "Step 40 (1.5s) loss 2.1") == [("learned", 40, None)]


def test_every_part_of_a_record_is_read_its_rate_of_steps_first() -> None:
    """A header, then one line per metric: the counter-like "time/batch" part and the
    samples' rate are no step time; the rate of batches is."""
    lines = [
        line
        for step, rate in ((100, 4.0), (200, 0.5), (300, 2.0), (400, 1.0))
        for line in (
            f"[batch={step}/4800]:",
            f"\t Train time/batch: {step - 1}",
            f"\t Train time/sample: {step * 256}",
            f"\t Train loss/train/total: 2.{step}",
            f"\t Train throughput/batches_per_sec: {rate}",
        )
    ]
    assert steps(learner(), *lines) == [
        ("learned", 100, 0.25),
        ("learned", 200, 2.0),
        ("learned", 300, 0.5),
        ("learned", 400, 1.0),
    ]


def test_a_record_s_part_is_read_by_the_words_of_its_own_line() -> None:
    """Chainer's ProgressBar (ESPnet1): the header's counters, then a rate with no label of its
    own; the header's last word ("epochs") is no label of the rate on the next line."""
    lines = [
        line
        for step, rate in ((39600, 2.5), (39700, 2.0), (39800, 4.0))
        for line in (
            f"     total [#####.....] {step / 1600:.2f}%",
            f"     {step} iter, 50 epoch / 200 epochs",
            f"    {rate} iters/sec. Estimated time to finish: 12:18:57.546793.",
        )
    ]
    assert steps(learner(), *lines) == [
        ("learned", 39600, 0.4),
        ("learned", 39700, 0.5),
        ("learned", 39800, 0.25),
    ]


def test_a_step_s_time_is_never_its_counter_whatever_its_label_names() -> None:
    # "time/step" names what the time is per, not the counter; the count out of its total
    # after a dash is the step, a loss beside it says so at first sight
    lines = [
        f"2026-08-14 15:25:53,342 - [{step}/8782] \tloss: 0.1{i}, time/step={240 + i}ms"
        for i, step in enumerate((1100, 1200))
    ]
    assert [s[1:] for s in steps(learner(), *lines)] == [(1100, 0.24), (1200, 0.241)]


def test_the_line_a_message_was_logged_from_is_no_measure_whatever_its_path_says() -> None:
    # TensorFlow's device lines at start-up, one per GPU: "common_runtime" in the logging
    # file's path names no time, and the line number after it is no duration
    lines = [
        f"2026-02-07 11:26:42.29779{gpu}: I zork/core/common_runtime/gpu/gpu_device.cc:1120]"
        f" Creating device (/device:GPU:{gpu}) -> (device: {gpu}, name: Zork 1080,"
        f" pci bus id: 0000:0{gpu + 2}:00.0, compute capability: 6.1)"
        for gpu in range(4)
    ]
    assert steps(learner(), *lines) == []


def test_a_counter_given_as_the_range_a_report_covers_is_the_range_s_end() -> None:
    lines = [
        f"zork: Epoch[2] Batch [{done - 100}-{done}]\tSpeed: 81{i}.5 samples/sec\tacc=0.8{i}"
        for i, done in enumerate((300, 400, 500))
    ]
    assert [s[1] for s in steps(learner(), *lines)] == [300, 400, 500]


def test_a_counter_named_after_its_number_is_the_step_and_a_hosts_digits_never_are() -> None:
    lines = [
        f"[node-a0{host}] 1epoch:train:{step - 99}-{step}batch: loss=2.{host}, run_time=0.{t}"
        for host, (step, t) in enumerate(((100, 4), (200, 2), (300, 3), (400, 5), (100, 3)))
    ]
    assert [s[1:] for s in steps(learner(), *lines)] == [
        (100, 0.4),
        (200, 0.2),
        (300, 0.3),
        (400, 0.5),
        (100, 0.3),
    ]


def test_a_number_padded_to_its_width_keeps_its_lines_one_template() -> None:
    lines = [
        f"engine INFO: Epoch: [3] [{step:>4}/1465] lr: 0.01 batch_cost: 0.{t}5 ips: 1{t}.5 img/s"
        for step, t in ((980, 4), (1000, 2), (1020, 3))
    ]
    assert steps(learner(), *lines) == [
        ("learned", 980, 0.45),
        ("learned", 1000, 0.25),
        ("learned", 1020, 0.35),
    ]


def test_a_bar_redrawn_behind_carriage_returns_is_read_at_the_update_a_terminal_shows() -> None:
    # A bar written to a file puts each update behind "\r" and an erase-line escape: one log
    # line holds every update since the last newline, one or several.
    def update(count: int, rate: float) -> str:
        filled = "━" * (count // 30) + "╸" + "─" * (10 - count // 30)
        head = f"      3/50   1.{count % 7}G   0.81: {count // 3}%"
        return f"\r\x1b[K{head} {filled} {count}/300 {rate}it/s"

    lines = [
        update(40, 4.0),
        update(60, 5.0) + update(90, 2.0),
        update(120, 4.0) + update(150, 5.0) + update(180, 8.0),
        update(200, 2.5),
        update(215, 4.0) + update(230, 2.0) + "\r" + " " * 40 + "\r",  # cleared at its end
    ]
    assert steps(learner(), *lines) == [
        ("learned", 40, 0.25),
        ("learned", 90, 0.5),
        ("learned", 180, 0.125),
        ("learned", 200, 0.4),
        ("learned", 230, 0.5),
    ]


def test_a_counter_in_a_short_form_or_written_as_its_unit_is_the_step_at_first_sight() -> None:
    # "Up." for updates beside an epoch's "Ep.": a step reporting its throughput
    line = "[@] Ep. 1 : Up. 200 : Sen. 25600 : Cost 194.7 : Time 34.9s : 9357.3 words/s"
    assert steps(learner(), line) == [("learned", 200, 34.9)]
    # the counter written as the unit of its number, the next field's separator after it:
    # "7 iter, 7000 ts" counts 7 iterations, and "iter," labels no 7000
    line = "zork_0: RUNNING [pid=86], 313 s, 7 iter, 7000 ts, -1.07e+03 rew"
    assert steps(learner(), line) == [("learned", 7, 313.0)]
    # a rate of updates is no counter of them
    assert steps(learner(), "zork 4 | ups=2.1 | loss 3.2 | wps 3000") == []


def test_the_work_a_steps_time_is_per_names_the_counter() -> None:
    # a loop timing its steps "sec/tick" counts ticks, whatever it calls them
    lines = [
        f"tick {t}  kimg {t * 6.1:.1f}  lod 0.00  minibatch 32  time {t}m 19s  sec/tick 644.3"
        f"  sec/kimg 107.10  gpumem 5.1"
        for t in (2, 3)
    ]
    assert steps(learner(), *lines) == [("learned", 2, 644.3), ("learned", 3, 644.3)]
    # without a time per tick, a tick is a number like any other: learned only as it rises
    assert steps(learner(), "tick 2  kimg 12.2  lod 0.00  time 23m 19s  gpumem 5.1") == []


def test_an_epoch_s_time_is_no_step_s() -> None:
    # our wording: steps without a time, and an epoch's time after them
    lines = [f"INFO:root:Epoch 0, Step {s}, loss: 0.{s}1, disc_loss: 0.003" for s in (20, 40, 60)]
    lines += ["INFO:root:Epoch time: 5668.2"]
    assert steps(learner(), *lines) == [("learned", s, None) for s in (20, 40, 60)]


def test_a_label_that_is_a_step_s_unit_gives_its_time() -> None:
    # HiFi-GAN's form: seconds a batch, the label "s/b"
    times = (1.131, 1.216, 1.128)
    lines = [
        f"Steps : {210005 + 5 * i}, Gen Loss Total : 25.6{i}, s/b : {t}"
        for i, t in enumerate(times)
    ]
    assert steps(learner(), *lines) == [("learned", 210005 + 5 * i, t) for i, t in enumerate(times)]


def test_a_record_s_part_may_show_its_running_average() -> None:
    # our values, in the form Coqui's trainer prints a step: a header, then each metric beside
    # its running average; the step's time is the step_time line's, not the loader's
    lines = []
    for step, took in ((0, 0.81), (200, 0.17), (400, 0.12)):
        lines += [
            f"   --> TIME: 2026-11-30 14:22:56 -- STEP: {step}/3984 -- GLOBAL_STEP: {step}",
            f"     | > loss: 0.1{step}  (0.12)",
            f"     | > step_time: {took}  (0.31)",
            "     | > loader_time: 0.0095  (0.0154)",
        ]
    assert steps(learner(), *lines) == [
        ("learned", s, t) for s, t in ((0, 0.81), (200, 0.17), (400, 0.12))
    ]


def test_a_word_joining_a_counter_to_its_label_leaves_it_labelled() -> None:
    # our values: a research loop's "step at N" (and "Step no. N") names its step as plainly
    lines = [f"Total loss at epoch 5, step at {58400 + 200 * i}, loss=3{i}.05" for i in range(3)]
    assert [s for _, s, _ in steps(learner(), *lines)] == [58400, 58600, 58800]
    assert steps(learner(), "Step no. 12 | loss 2.31 | lr 1e-4") == [("learned", 12, None)]


def test_the_word_load_alone_before_a_decimal_is_a_times_label_not_a_loading_line() -> None:
    # our values, in the form DGL's sampling examples print a step: "Load" is the time the step
    # waited for its batch; a line about loading things stays out
    lines = [
        f"Epoch 00000 | Step {20 * i:05d} | Loss 1.{i}51 | Speed (samples/sec) 57{i}3.4|57{i}3.4"
        f" | Load 1.7{i}95| train 0.01{i}1 | GPU 2180.8 MB"
        for i in range(1, 5)
    ]
    assert [s for _, s, _ in steps(learner(), *lines)] == [20, 40, 60, 80]
    loading = [f"load {3 + i} shards | step {10 * i} | 0.{i}5s" for i in range(1, 5)]
    assert steps(learner(), *loading) == []


def test_a_loss_named_with_a_seconds_suffix_is_no_duration() -> None:
    # a style-transfer loop's losses: content (loss_c) and style (loss_s), the step's time apart
    lines = [f"it {s} | loss_c=0.6{s} | loss_s=3.1{s} | iter_time=0.27{s}" for s in (1, 2, 3)]
    assert steps(learner(), *lines) == [("learned", s, float(f"0.27{s}")) for s in (1, 2, 3)]


def test_a_setting_that_bounds_a_loop_counts_nothing_done() -> None:
    # a config printout: the loop's bound and its size are no counter of the steps run
    for line in (
        "weight_decay: 0.1, learning_rate: 0.0003, max_steps: 50000, ",
        "learning_rate: 0.0003, num_iters: 50000, ",
    ):
        assert steps(ProgressParser(), line) == []
    # beside a counter of the steps run, the bound is passed over
    lines = [f"it {s}00 | max_iters 5000 | loss 2.{s} | 0.3{s} s/it" for s in (1, 2, 3)]
    assert steps(learner(), *lines) == [("learned", s * 100, float(f"0.3{s}")) for s in (1, 2, 3)]


def test_a_counter_named_as_a_variable_holding_its_number_is_that_counter() -> None:
    # a status line naming its counter as the code's variable (paxml's "step_i"), a loss beside
    lines = [f"[ZORK STATUS] step_i: {s}00, training loss: 5.{s}" for s in (1, 2, 3)]
    assert steps(learner(), *lines) == [("learned", s * 100, None) for s in (1, 2, 3)]
    timed = [f"zork | iter_num {s}0 | loss 2.{s} | 0.3{s} s/it" for s in (1, 2, 3)]
    assert steps(learner(), *timed) == [("learned", s * 10, float(f"0.3{s}")) for s in (1, 2, 3)]


def test_a_boosting_round_indexed_in_brackets_is_a_step_beside_every_sets_metrics() -> None:
    # XGBoost's EvaluationMonitor and LightGBM's log_evaluation: "[round]" and then each watched
    # set's metric, the training set's and a validation set's on one line
    xgb = [f"[{i}]\ttrain-rmse:{9 - i}.125\tvalid-rmse:{9 - i}.5" for i in range(5)]
    assert steps(learner(), *xgb) == [("learned", i, None) for i in range(5)]
    gbm = [
        f"[{i}0]\ttraining's binary_logloss: 0.{9 - i}\tvalid_0's binary_logloss: 0.9"
        for i in (1, 2, 3)
    ]
    assert steps(learner(), *gbm) == [("learned", i * 10, None) for i in (1, 2, 3)]
    # a validation set's metrics alone are an evaluation's
    assert steps(learner(), *(f"[{i}]\tvalid-rmse:{9 - i}.5" for i in range(5))) == []


def test_an_index_that_does_not_rise_on_every_line_is_a_tag_not_a_counter() -> None:
    # four ranks tagging their lines "[rank]" cycle through their tags
    tagged = [f"[{r}] loss: 0.{e}{r}" for e in range(1, 4) for r in range(4)]
    assert steps(learner(), *tagged) == []
    # a list of devices numbered in brackets holds no metric's value
    listed = [f"[{g}] NVIDIA A100-SXM4-80GB | 3{g}'C, 0 % | 4 / 81920 MB |" for g in range(8)]
    assert steps(learner(), *listed) == []
