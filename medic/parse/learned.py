"""Progress from frameworks nobody wrote a format for: templates learned per job.

A training loop prints the same line over and over with its numbers changed: a counter that
grows by a few each time (the step), and a duration or a rate (how long a step took). The
reader cuts each line into its template (its numbers masked, its runs of spaces collapsed,
times of day and dates masked apart) and its numbers, and learns per job which templates recur
with one number that keeps increasing and one whose label or unit says it is a duration or a
rate. Once a template has shown this over ``MIN_LINES`` lines, each of its lines is a step.
Some lines say enough to be one at first sight (``Fields.sure``): a counter labelled a step or
an iteration beside a duration, a rate, a loss or a learning rate; a counter labelled a batch
or an update beside a loss or a throughput; a count out of a total (``[50/7330]``) beside a
loss. A number whose unit or label names a rate of samples, tokens, images or FLOPs is the
step's throughput, never its counter; an epoch's number or a loss is never the counter.

A step may also be a record of several lines (OLMo-core's ``[step=N/M,...]`` and then one
``name=value`` line per metric): a line whose only numbers are labelled as a step, an iteration,
a batch or an update (a header) and the later lines of the same process, within
``RECORD_WINDOW`` lines and before its next header, whose one number is a duration or a rate
(its parts: Composer's ``time/batch``, ``throughput/batches_per_sec``, ...) are joined into one
line before learning, read at the header's time (its durations chosen as a line's are). A
record may lead with its part instead
(paxml's ``steps/sec: 2.4``, then ``Metrics values at step 1100:``): which comes first is
learned per process from the first lines of the part's template, and a pace of such a process
that no header follows (a rate of steps alone) is a step that names no number.

A progress bar (``n/N`` right before its drawn bar or tqdm's elapsed clock, or right after
a bar drawn after its percentage: ``BAR_COUNTER``) is a step at first sight, whether it says
how long the step took or not; under one description, a bar with a smaller total than the
largest its process showed is another loop (an evaluation over a smaller set), never a step. A
table (a header naming its columns, then rows of numbers) is read by column
(``medic.parse.tables``).

A step may also be a record of metrics printed as one dict (``{'loss': 1.38,
'learning_rate': 2e-05, 'epoch': 0.37}``, Hugging Face Trainer's log and every trainer built
on it): a dict that reports a training loss and the learning rate is one optimizer step (an
evaluation's or a run's summary reports no learning rate), numbered by its step key where it
has one (``metrics_records``), where the templates do not read it. Any job's dicts are read,
whether a format reads its other lines or not.

Lines that say what else they are (evaluation, testing, inference, loading, downloading,
tokenising, ... ``LOOKALIKE_LINE``) are never learned. The work per line is vectorised (masking,
extracting the numbers, checking the counter); only the few distinct templates of a batch are
looked at one by one, and what was learned (a template's counter and duration fields, its last
counter value, how many lines it has shown) is kept per job.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

import polars as pl

from medic.parse.progress_formats import ITEMS_PER_S, LOOKALIKE
from medic.parse.tables import Tables

MIN_LINES = 3
"""Lines of one template, counter increasing, before its lines are read as steps."""
RISE = 0.75
"""Share of line pairs in which a number must grow to be a counter ..."""
LABELLED_RISE = 0.5
"""... or, labelled a counter (a step, an iteration, a batch...), in which it must grow."""
NUMBER = r"[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?|[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?"
"""A number, its thousands grouped by commas or not ("505,100" is one number)."""
NON_FINITE = r"(?i:(?-u:\b)(?:nan|inf(?:inity)?)(?-u:\b))"
VALUE = f"{NUMBER}|{NON_FINITE}"
"""What a number's place holds: a number, or a value gone non-finite (``loss = nan``): a line
keeps its template when one of its values does, and reads it as no number. Only the batches
holding a non-finite word are read with it (its letters slow the scan of every line)."""
NUMBER_SIGN = "\u2116"
"""What a line's own ``#`` becomes before its numbers are masked as ``#`` (``Iter #3``, ``Epoch
#80``): a sign the line writes is no number's place, and the label before it is the number's."""
CLOCK = (
    r"\b[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(?::[0-9]{2})?(?:[.,][0-9]+)?"
    r"(?:Z|[+-][0-9]{2}:?[0-9]{2})?(?:\b|$)"
    r"|\b[0-9]{1,2}:[0-9]{2}(?::[0-9]{2})?(?:[.,][0-9]+)?\b|\b[0-9]{4}[-/][0-9]{2}[-/][0-9]{2}\b"
)
"""Times of day, durations as h:mm:ss and dates, an ISO 8601 date and time written as one
(``time 2026-06-23T15:13:28+00:00``, its date glued to its time): masked apart, never a counter
nor a duration."""
CANDIDATE = (
    r"[0-9] ?(?:ms|s|sec|secs|seconds|us)(?-u:\b)"
    r"|(?i:time|dt[:=]|took|duration|timing|cost|latency|ms/|s/it|it/s|steps?/s|_per_s|persec"
    r"|throughput|(?-u:\b)[btwsif]ps(?-u:\b)|/s(?:ec(?:ond)?)?(?:/|(?-u:\b)))"
)
"""A line worth learning from holds a duration or a rate (a unit a second, ``samples/s``, or its
abbreviation, ``wps``: what ``_RATE`` reads; its words, ``per second``, cost this scan of every
line a tenth more and come beside a duration) ..."""
COUNTER_NAMES = "step|iter|iteration|batch|update"
"""The names a training loop's counter goes by, in full."""
HEADER = rf"(?i)(?:\b|_|\x1b\[[0-9;]*m)(?:{COUNTER_NAMES})s?(?:\W{{0,2}}|:\s+)[0-9]"
"""... or a counter labelled as a step (alone: a step line that gives no time; followed by a
line giving the time: a multi-line record), its label coloured or not, its number padded or
not after its colon (BasicSR's ``iter:     100``) ..."""
REPORTS_LOSS = r"(?i)loss|\bppl\b|perplexity"
"""... or a loss, or its exponential, the perplexity language models report (a count out of a
total beside a loss is a step that gives no time) ..."""
INDEXED = r"^\s*\[[0-9]+\]\s"
"""... or an index in brackets opening the line (a boosting round's: ``[10]\ttraining's auc:
0.87``)."""
AGREE = 0.01
"""How close a duration must come to a rate's inverse to say the same (``Fields.rated``)."""
TOTAL_AGREE = 0.05
"""How close a duration must come to the counter's number of steps times an average per step
to be their total so far (``Fields.averaged``); the average is printed rounded."""
LONGEST_STEP_S = 86_400.0
"""The longest step time read: a rate of steps near zero (Caffe's first "Iteration 0
(-1.58519e-33 iter/s, ...)", before any step was timed) says nothing of a step's time."""
RECORD_WINDOW = 64
"""Lines after a record's header in which its part is looked for."""
JOINT = " ¦ "
"""Between a record's header and its part, joined into one line."""
_WORD_ENDS = (
    r"[_-][^A-Za-z]|[_-]?$|\.(?:[^A-Za-z]|$|(?:py|pth?|bin|ckpt|json|log|txt|ya?ml"
    r"|safetensors|tar|gz|npz|h5|pkl|onnx)(?:[^0-9A-Za-z_]|$))"
)
"""Where an activity's word ends in ``LOOKALIKE_LINE`` other than at a separator: a compound's
joint before no letter, or a file's extension."""
LOOKALIKE_LINE = (
    r"(?i)(?-u:\b)(?:eval\w*|valid\w*|test\w*|cv|infer\w*|predict\w*|error|exception|"
    r"timeout|timed|watchdog|fail\w*|abort\w*|warn\w*|traceback|what|nccl|signal|kill\w*|"
    r"terminat\w*|retry\w*|shards?|map|filter|reduce|shuffle|sort|repartition|sampling|"
    r"rollouts?)"
    r"(?-u:\b)|(?-u:\b)val(?:[^:=\w]|$)"
    r"|(?-u:\b)(?:(?:generat|download|tokeniz|preprocess|decod|checkpoint|sav)[0-9A-Za-z]*"
    rf"|load[0-9A-Za-z]+)(?:[^._\-0-9A-Za-z]|{_WORD_ENDS})"
    r"|(?-u:\b)load(?:[^._\-0-9A-Za-z \t:=]|[ \t:=]+(?:[^0-9 \t:=]|[0-9]+(?:[^.0-9]|$)"
    rf"|[0-9]+\.(?:[^0-9]|$))|[ \t:=]*$|{_WORD_ENDS})"
    r"|(?-u:\b)cuda(?:[^:0-9A-Za-z_]|:[^0-9]|:?$)"
    r"|\[[0-9:]+<[0-9:?]+,\s*[0-9.]+\s?[kKMGTP]?i?B/s[],]"
    rf"|\[[0-9:]+(?:<[0-9:?]+)?,\s*[1-9][0-9]{{{len(str(ITEMS_PER_S)) - 1},}}(?:\.[0-9]+)?\s?"
    r"[A-Za-z]*/s[],]"
).replace(r"\w", "[0-9A-Za-z_]")
"""Words of lines that are no training step, whatever their numbers do: other loops (``CV``:
cross-validation, as speech toolkits name it), a dataset's operators (map, filter, reduce,
shuffle, sort, repartition: a data pipeline's bars, as Ray Data and ``datasets`` name them),
a reinforcement-learning loop's rollouts (generation, not an optimizer's steps),
errors and timeouts (a watchdog's "ran for N milliseconds" is a hang, not a pace),
checkpoints; "val" naming a loop ("Epoch(val)", "val loss"), not a field ("val: n/a" beside a
training loss); a bar counting bytes (tqdm's ``[00:30<00:36, 150MB/s]``, its postfix after a
comma: a download, an upload, a copy), or items at ``ITEMS_PER_S`` or more (bytes, examples or
requests: no training loop's steps). A word of an activity (loading, decoding, generating,
saving ...) that begins a metric's compound name is that metric's, not the line's: a training
step reports its ``load_balancing_loss`` (``load-balance-loss``), ``generator_loss`` or a head's
metrics (OpenMMLab's ``decode.loss_ce``, ``decode.acc_seg``; ``checkpoint.py`` or ``.pt`` is a
file, not a metric); the word load alone before a decimal number is a time's label, not the
line's activity (DGL's examples: ``| Load 1.7095| train 0.0131 |``, the time a step waited
for its batch); a loop's word names the loop wherever it stands (``eval_loss`` is an
evaluation's). "cuda" naming a device (``mem_usage:cuda:3 6.7GB``) is no CUDA error. Word
characters and boundaries are ASCII: Unicode ones send the regex engine down its slow path on
every line holding non-ASCII text (a progress bar's blocks), ten times the cost."""
AFTER_METER = r"(\[[0-9]{1,3}:[0-9]{2}(?::[0-9]{2})?(?:<[0-9:?]+)?,[^\]]*\]).+$"
"""A tqdm meter (``[01:14:23<1:13:02,  1.23it/s]``) and what follows it on its line: tqdm
leaves its last update without a newline, so the next print lands after it (trlx's bar, then
``[RANK 0] Collecting rollouts``): that text is another line's, and says nothing of the bar."""
EMPTY_FIELD = (
    r"""["']?[0-9A-Za-z_./-]+["']?\s*[:=]\s*(?:null|None|nan|NaN|n/a|N/A|""|'')"""
    r"(?:\s*[,;|]|\s*(?:[}\]]|$))"
)
"""A field without a value (``"eval_loss": null``): a record that lists every key it may hold
(LLaMA-Factory's ``trainer_log.jsonl`` names the evaluation's loss on every training line) says
nothing by a key it leaves empty, so ``LOOKALIKE_LINE`` does not read its name."""
ERROR_METRIC = r"(?i)(?-u:\b)error(?::[0-9A-Za-z_/.]+)*\s*[:=]?\s*[0-9]*\.[0-9]+%?(?:[^.0-9]|$)"
"""A metric named "error" (an error rate: speech toolkits' ``error:ctc 0.099``, a classifier's
``error 0.12``) by its fractional value, where an error report gives a code (``error 2``) or
words: that field is a metric's, and ``LOOKALIKE_LINE`` does not read its name."""
LOOP_METRIC = (
    r"(?i)(?:^|[^0-9A-Za-z_])(?:val|valid[0-9A-Za-z_]*|test[0-9A-Za-z_]*|eval[0-9A-Za-z_]*)"
    r"(?:-[0-9A-Za-z]+)*[/.][0-9A-Za-z_/.@-]*\s*[:=]\s*[-+]?[0-9.]"
)
"""A metric of another loop by its namespace (``val/test_score/gsm8k:0.171``,
``val-core/gsm8k/reward/mean@1:0.4``, ``eval/accuracy=0.9``): beside a learning rate
(``TRAINED_WITH``), the last evaluation's score that a training step's record carries (veRL's
``step:5 - ... - actor/lr:0.000 - val/test_score/...``), and ``LOOKALIKE_LINE`` does not read
its name."""
TRAINED_WITH = (
    r"(?i)(?:^|[^0-9A-Za-z])(?:lr|learning[_ ]rate)\s*[:=]\s*[-+]?[0-9.]"
    r"|(?:^|[^0-9A-Za-z])train(?:ing)?(?:[-_./]|'s )[0-9A-Za-z_@.-]+\s*[:=]\s*[-+]?[0-9.]"
    r"|(?:^|[^0-9A-Za-z])train(?:ing)?[ _-]?time\s*[:=]?\s*[0-9.]"
)
"""A learning rate's field, a metric of the training set by its set's name (gradient
boosting's ``train-logloss:0.66``, ``training's auc: 0.87``), or the time the training took
(DeePMD-kit's ``batch 1000 training time 7.61 s, testing time 0.01 s``): what an optimizer's
step or a boosting round reports, an evaluation does not."""
LOOP_TIME = (
    r"(?i)(?:^|[^0-9A-Za-z_])(?:test(?:ing)?|eval(?:uation)?|valid(?:ation)?|val)[ _-]?time"
    r"\s*[:=]?\s*[0-9.]+"
)
"""The time another loop took, as a training step's record reports it beside its own
(``TRAINED_WITH``): that record's part, and ``LOOKALIKE_LINE`` does not read its name."""
SET_METRIC = (
    r"(?i)(?:^|[^0-9A-Za-z_])(?:valid(?:ation)?|val|test|eval)(?:_?[0-9]+)?(?:-|'s )"
    r"[0-9A-Za-z_@.-]+\s*[:=]\s*[-+]?[0-9.]"
)
"""A metric of another data set named by the set, then a dash or a possessive (``valid-logloss:
0.66``, ``valid_1's auc: 0.85``): XGBoost's and LightGBM's evaluation of each watched set
after every boosting round, printed on the round's line beside the training set's."""
PADDING = r"([\[(/])\s+"
"""Spaces padding a number after a bracket or a slash (``[  20/1465]``, ``[1000/1465]``):
dropped, so that the line's template does not change with the number's width."""
BLOCKS = "[█▉▊▋▌▍▎▏▐░▒▓━╸╺─]"
"""The characters a progress bar is drawn with."""
BAR = f"{BLOCKS}+|\\[[=>.]+\\]"
"""A progress bar's blocks, or its arrow (``[====>....]``): masked apart (they change from
line to line, the line's template does not)."""
BAR_COUNTER = re.compile(r"(?:^|[ |])#(?:/#)? ?(?:~|\[@)|(?:^| )#it \[@|#% ~ #/#(?= |$)")
"""A bar's counter in a template: ``n/N`` (or ``n``, or tqdm's ``n it`` without a total) right
before its drawn bar (``~``) or its elapsed clock (tqdm's ``[00:10<...``; a custom
``bar_format`` may drop the spaces: tensorpack's ``|249/6000[06:58<2:22:15,0.67it/s]``), or
``n/N`` right after a bar drawn after its percentage (``45% ━━━━╸─── 82/183``: Ultralytics'
own bar)."""
SECONDS_PER_IT = r"([0-9]+(?:\.[0-9]+)?)s/it"
"""A bar's rate when slower than one iteration a second."""
BAR_DESC = rf"^(.*?)(?:[0-9]+%(?:\||\s*{BLOCKS})|[0-9]+it \[[0-9])"
"""A bar's description (tqdm's "desc: 45%|", "desc: 45% ━━╸──", or, without a total, "desc: 31it
[00:04, ..."): a loop that says it is no training loop (``LOOKALIKE``: loading, mapping,
compiling, packing, ...) is none."""
SUMMARY_LINE = (
    r"(?i)(?-u:\b)(?:val|dev|metrics?|summar[a-z]*|wrote|written|best|"
    r"report[a-z]*)(?-u:\b)"
)
"""Words of lines that report on a step rather than make one ("step 250: train loss 4.1, val
loss 4.3", "Wrote summary entry at step 1100"): a counter-only line holding one is no step
(a line that also says how long the step took is)."""
TRAINING_METRICS = r"(?i)(?-u:\b)train(?:ing)?[ _/]metrics?(?-u:\b)"
"""The training's own metrics, named so (VATT's "Train Step: 1750/100000 / training metric =
{...}"): the step's record, not a report on another loop's."""
METRICS_LOSS = r"""['"](?:train[_/])?loss['"]\s*:\s*['"]?[-+]?(?:[0-9]|nan|inf)"""
"""A metrics dict's training loss (Python's or JSON's quotes; its value formatted as a string
too, as fairseq's json log format writes it) ..."""
METRICS_RATE = r"""['"](?:learning_rate|lr)['"]\s*:"""
"""... and its learning rate: both, an optimizer step's record."""
METRICS_STEP = (
    r"""['"](?:(?:global_|current_|cur_|train_)?(?:step|iter|iteration)s?|num_updates)"""
    r"""[^'"]{0,16}['"]\s*:\s*['"]?([0-9]+)"""
)
"""A dict's step key (``'step': 120``, ``'global_step/max_steps': '120/1200'``,
``"current_steps": 120``, fairseq's ``"num_updates": 120``), not a total's
(``"total_steps"``)."""
SCALAR_REPR = (
    r"(?-u:\b)(?:(?:np|numpy)\.(?:float|u?int)[0-9]+|tensor)\(([-+]?[0-9][0-9.eE+-]*)[^()]*\)"
)
"""A number in its scalar type's repr (numpy's, torch's): its value the first argument."""
QUOTED_NUMBER = r"""(:\s*)["']([-+]?[0-9][0-9.eE+-]*)["']"""
"""A record's value written as a string (fairseq's json log: ``"wps": "1195.4"``): its number."""
MAGNITUDES = {"k": "e3", "K": "e3", "M": "e6", "G": "e9"}
"""A number's magnitude suffix (``24.5K``, SI's kilo ``113.4k tok/s``), as the exponent it
stands for (a lowercase ``m`` is SI's milli, or minutes: no magnitude read)."""
NO_THROUGHPUT = (
    pl.lit(None, pl.Float64).alias("throughput"),
    pl.lit(None, pl.String).alias("throughput_unit"),
)
"""The throughput columns of step rows that give none (tables, paces, metrics dicts)."""
_LABEL = re.compile(
    r"([A-Za-z_/%@.\-]*[A-Za-z][A-Za-z_/%@.\-]*)(?:\W{1,3}(?:at|is|no|nr|number))?\W{0,3}$"
)
"""The word naming the number after it, across a word joining them (``step at 58600``, ``Step
no. 12``, ``time is 0.41``); a word holds a letter (a dash before ``[1100/8782]`` names none)."""
_SOURCE_LINE = re.compile(
    r"(?i)[\w-]\.(?:cc|cpp|cxx|c|h|hpp|cu|cuh|py|pyx|rs|go|java|scala|jl|lua)\W{0,2}$"
)
"""A source file's name right before a number: the line the message was logged from (glog's
``common_runtime/gpu/gpu_device.cc:1120]``, Python's ``logger.py:50``), never a measure of the
step, whatever words its path holds."""
_COUNTER_RANK = {"step": 0, "iter": 1, "iteration": 1, "update": 2, "batch": 3}
"""Which labelled counter is the step when a line has several (``iter 100 step 25``)."""
_SHORT_COUNTER = {"it": "iter", "itr": "iter", "up": "update", "upd": "update"}
"""The counter each short form names."""
_COUNTER_LABEL = re.compile(
    rf"(?i)^(?:([a-z]+)_)?(?:({COUNTER_NAMES})s?|({'|'.join(_SHORT_COUNTER)}))"
    r"(?:_(?:i|idx|index|num|no|nr|n|count|cnt))?$"
)
"""A counter's name, or its short form (Marian's ``Up. 200``, ``it 300``); a short form takes
no plural: ``ups`` is a rate of updates (fairseq's ``ups=2.1``). A variable's suffix saying it
holds the counter's number may follow (paxml's ``step_i: 100``, ``batch_idx``, ``iter_num``)."""
_SPACED_QUALIFIER = re.compile(r"(?i)\b(global|micro|inner|local)[ _-]+$")
"""A word before a counter's label saying whose counter it is (``global iter``)."""
_INNER = frozenset({"micro", "inner", "local"})
"""Qualifiers of a loop inside the step (a micro-batch's, an inner PPO epoch's)."""
_BOUNDS = frozenset({"max", "min", "num", "n"})
"""Qualifiers of a setting that bounds or sizes a loop (``max_iters: 1000000``, ``num_steps``):
its value counts nothing done."""
UNLABELLED = len(_COUNTER_RANK) + 1
"""The rank of a number no counter's name labels."""
_FRACTION = re.compile(
    r"(?<![#/.\w])#(?:it)? ?/ ?(?:#(?:[kKMG]?it)?|[-?]|(?i:unknown))(?![#/\w])(?! ?@)"
)
"""A count out of a total in a template (``[50/7330]``, ``100 / 1000``, tqdm's scaled
``3.00it/10.0kit``), the total unknown or not (``120/-``, ``412/Unknown``); never a date
(``05/16 18:09``, ``12/01/2026``)."""
_LEARNING_RATE = re.compile(r"(?i)^(?:lr|learning_rate|[a-z0-9]+_lr)$")
"""A learning rate's label: a line naming its step and its learning rate reports an optimizer
step (an evaluation's or a summary's reports none)."""
_EPOCH = re.compile(r"(?i)^(?:epoch|ep\.?)$")
"""An epoch's label: a pass over the data, never one step, however it rises."""
_TALLY = re.compile(r"(?i)^(?:num|n|total|count)_")
"""A label counting steps done (``num_updates``), not naming the one reported."""
_RUN_COUNTER = re.compile(rf"(?i)^(?:global_(?:{COUNTER_NAMES})s?|num_updates)$")
"""A bar's postfix field counting the run's steps (NeMo's ``global_step=794.0``, fairseq's
``num_updates=348000``), where the bar counts an epoch's batches: the step."""
_LOOP_NAME = re.compile(r"(?i)^train(?:ing)?$")
"""A word naming the training loop right before its count (``Progress on:train 42it/10kit``)."""
_COUNTER_AFTER = re.compile(
    rf"(?i)^(?:({COUNTER_NAMES})s?(?![a-z])| ({COUNTER_NAMES}|it|itr)s?(?=\s*[,;|]))"
)
"""A counter's name written right after its number (ESPnet's ``1-100batch``), or as its unit
before the next field's separator (RLlib's ``313 s, 7 iter, 7000 ts``; not "up": "3 up" says
where as often as how many)."""
_UNIT_BEFORE = re.compile(r"[A-Za-z.]\s*[,;]\s*$")
"""A word, then a separator, right before a number: the unit of the number before it (``7
iter, 7000 ts``), not this number's label."""
_PER = re.compile(r"(?i)(?:/|\bper )([a-z]+)$")
"""The work a duration is per (``sec/tick``, ``ms/step``, ``time per iteration``)."""
NO_COUNTER = 99
"""The rank of a number that is no counter however it rises (a percentage)."""
_PHRASE = re.compile(r"([A-Za-z_/%@.\-]+(?: \(?[A-Za-z_/%@.\-]+\)?){0,3})\W{0,3}$")
"""The last words before a number (``elapsed time per iteration (ms)``)."""
_UNIT_AFTER = re.compile(r"^\s?([A-Za-z/_]++)(?![^\w)\]]{0,2}[:=][^A-Za-z]*$)")
"""The unit after a number: the word right after it, unless that word is the next field's
label ("time: 0.62 data_time: 0.03": the next number follows its colon). Fields separated by
colons keep their units ("100786.61 words/s : gNorm 0.34", Marian's), and so does a number in
brackets ("Time(1000 iters): 5.38s", HugeCTR's: the colon is the bracketed label's)."""
_SINCE_START = re.compile(r"(?i)\s+(elapsed|ago|so far|remaining|left)(?![\w/]|\s*[:=])")
"""Words after a duration's unit saying it is a clock since the start or an estimate
(OpenNMT-py's ``18191 s elapsed``, ``40 s left``), not how long a step took (a word that is
the next field's label, ``rate:2.2it/s remaining:1:15:44``, is not): kept in the unit
(``s elapsed``), which ``_scale`` then reads as no step time."""
_EXCLUDED = re.compile(r"(?i)data|eta|remaining|total|wall|elapsed_total|load|reader|epoch")
"""Words naming a duration that is not the step's (a loader's, an estimate, a clock since the
start, an epoch's: ``Epoch time: 5668.2``, ``12.3 s/epoch``), in its label or anywhere in its
name (``Wall Clock``)."""
_LOSS_NAME = re.compile(r"loss|ppl|perplexity")
"""A loss's name, whatever it ends with: ``loss_s`` (a style loss) is no duration in seconds."""
_COUNTED = re.compile(r"^[a-z]{3,}s$")
"""A unit naming what a number counts, a plural noun (``utt_duration=1069 frames``): no
duration, whatever its label says, unless it is a unit of time."""
_SECONDS = ("s", "sec", "secs", "second", "seconds")
_MILLISECONDS = ("ms", "millisecond", "milliseconds")
_MICROSECONDS = ("us", "microsecond", "microseconds")
_INTERVAL = ("iters", "iterations", "steps", "batches", "updates")
"""A duration's label that counts steps ("Time(1000 iters): 5.38s", "time for 10 steps:
2.1s"): the time of an interval of many, no one step's."""
_STEPS_AFTER = re.compile(rf"^\s?({'|'.join(_INTERVAL)})\b")
"""... and the number before it is that count (its unit), though the word labels the time."""
_COARSER = ("d", "day", "days", "h", "hour", "hours", "m", "min", "mins", "minute", "minutes")
"""A label that is a coarser unit of time: the number continues a compound duration ("3 hours
50 minutes 7 seconds", HugeCTR's clock "[02d07h54m43s]": an estimate or a clock), never a step's
time alone."""
_TIME_UNITS = frozenset({*_SECONDS, *_MILLISECONDS, "msec", *_MICROSECONDS, *_COARSER, "hr"})
"""Every unit of time a number's unit may be written as."""


@dataclass(frozen=True)
class Fields:
    """Which numbers of a template mean what: how many it holds, its durations (or rate), and
    the rank of each number's counter label (lower: the likelier step)."""

    width: int
    durations: tuple[int, ...] = ()
    """The fields of which the largest (in seconds) is how long the step took: a rate of steps
    or a duration per step by its unit (``it/s``, ``ms/step``) alone; or else every duration a
    label names (a step's time and its parts: forward, backward, optimizer ...: the whole is
    the largest); or else one that has a unit only. Empty: a labelled counter without a time (a
    step line that gives none, or a record's header)."""
    scales: tuple[float, ...] = ()
    """Per duration field: seconds per unit, or -1 for a rate (steps per second)."""
    ranks: tuple[int, ...] = ()
    throughput: int | None = None
    """The field of the step's throughput (samples, tokens, images or FLOPs per second), the
    one per device where the line gives several; None when the line gives none."""
    unit: str | None = None
    """The throughput's unit or, without one, its label."""
    bar: int | None = None
    """A progress bar's counter (``BAR_COUNTER``): a step at first sight, timed or not, unless
    its description holds a number that may be the step instead (torchtune's global step before
    a bar that restarts each epoch): then learned, a rising number of the description first."""
    total: int | None = None
    """The bar's total, where it shows one (``n/N``)."""
    per_step: tuple[bool, ...] = ()
    """Per duration field: its words say it is a step's (``iter time``, ``ms/step``, ``per
    iteration``): never a clock."""
    averaged: tuple[bool, ...] = ()
    """Per duration field: its label says it is an average over the steps (``step_avg``). A
    duration the counter's number of steps times it is their total so far, a clock (modded-
    nanoGPT's ``train_time:541ms`` beside ``step_avg:60.06ms`` at step 9), told from the first
    line, before a clock has risen."""
    rated: bool = False
    """The first duration field is a rate of steps, the others durations labels name: one of
    them is read in its place where it says the same (to ``AGREE``; a rate is printed with
    fewer digits), the rate where none does (an interval's seconds, a part of the step)."""
    noted: bool = False
    """The one duration is a note in parentheses with a unit and no label (``step = 100 (14.3
    sec)``: the time since the last line, over every step between): the line is timed, but
    gives no one step's time."""
    loss: bool = False
    """A number is labelled a loss (``loss: 2.1``, ``total_loss``): the line reports on a
    training step, whether it says how long the step took or not."""
    rate: bool = False
    """A number is labelled a learning rate (``lr=[0.00016]``)."""
    counted: int | None = None
    """The field labelled a counter of any kind likeliest the step, not a tally of them
    (``num_updates``: an epoch's summary reports one) nor a count's total (``200/2983
    batches``)."""
    fraction: int | None = None
    """The field counting steps out of a total (``[50/7330]``, ``100 / 1000``), unlabelled or
    labelled a counter (not an epoch's, a rank's, a shard's); of several, the last (an epoch's
    count comes first: ``[1/10][50/7330]``)."""
    run_counter: int | None = None
    """A field after the bar counting the run's steps (``_RUN_COUNTER``): the step instead."""
    totals: frozenset[int] = frozenset()
    """The fields after a count's slash (``n/N``): its total, or, where the count stays as it
    rises, a second counter (WeNet's ``Batch 4/203700``: the epoch, then the batch)."""
    index: bool = False
    """The template opens with its line's index (``_LEADING_INDEX``) before metrics' values: a
    counter only where it rose on every line (a rank's tag in front of each rank's line cycles
    instead)."""
    averaged_after: bool = False
    """The template's last number is the running average of the one before it, in parentheses
    (``| > step_time: 0.8086  (0.8312)``, as Coqui's trainer prints each metric): a line of one
    such pair is a record's part as a line of one number is."""

    @property
    def duration(self) -> int | None:
        """The first duration field; None when the template gives none."""
        return self.durations[0] if self.durations else None

    @property
    def timed(self) -> bool:
        """Whether the template says how long a step took or how fast it went."""
        return bool(self.durations) or self.throughput is not None

    @property
    def sure(self) -> int | None:
        """The number labelled a step (or else an iteration; the first of several: a line
        names its step before counting steps of a kind, Megatron's "number of skipped
        iterations"), in a template that is timed or reports a loss or a learning rate; or
        else a number labelled a batch or an update in one that reports a loss or a throughput
        (ESPnet's ``1-100batch: ... loss=54.6``, MXNet's ``Batch [20] Speed: 1375.76
        samples/sec``; with a time alone, "batch" may name a loader's); or else a count out of
        a total in one that reports a loss (``Epoch [1][50/7330] ... loss: 0.94``): a step line
        at first sight."""
        if self.bar is not None:
            described = any(rank < NO_COUNTER for rank in self.ranks[: self.bar])
            if described:
                return None
            return self.bar if self.run_counter is None else self.run_counter
        labelled = [rank for rank in self.ranks if rank <= 1]
        if (self.timed or self.loss or self.rate) and labelled:
            return self.ranks.index(min(labelled))
        if self.counted is not None and (self.loss or self.throughput is not None):
            return self.counted
        return self.fraction if self.loss else None


@dataclass
class Template:
    """What one process's lines of one template have shown."""

    lines: int = 0
    last: tuple[float | None, ...] = ()
    """The numbers of its newest line."""
    rises: list[int] = field(default_factory=list)
    """Per number: how often it grew from one line to the next."""
    counter: int | None = None


@dataclass
class LearnedProgress:
    """Learns, per job, the templates of its step lines; ``read`` gives the steps of a batch."""

    jobs: dict[str, dict[tuple[str, str], Template]] = field(default_factory=dict)
    """Per job, per (process, template): what its lines have shown."""
    fields: dict[str, Fields | None] = field(default_factory=dict)
    """Per template ever seen: its duration field (None: it has none, it is no step line). A
    template of one number, a duration, is a record's part."""
    totals: dict[tuple[str, str, str], float] = field(default_factory=dict)
    """Per (job, process, bar description): the largest total its bars showed, the training
    loop's."""
    leads: dict[tuple[str, str, str], bool] = field(default_factory=dict)
    """Per (job, process, part template): whether its records lead with the part."""
    timed: set[tuple[str, str]] = field(default_factory=set)
    """The processes (job, process) whose step lines say how long a step took: their
    counter-only lines (a labelled counter and no time) are no steps of their own."""
    last_step: dict[tuple[str, str], tuple[int, str, bool]] = field(default_factory=dict)
    """Per process (job, process): the last step its step lines named, their template, and
    whether they said how long it took."""
    tables: Tables = field(default_factory=Tables)
    """The tables' headers (``medic.parse.tables``): their rows are read by column."""
    candidates: pl.Expr = field(
        default_factory=lambda: pl.col("message").str.contains(
            f"{CANDIDATE}|{HEADER}|{REPORTS_LOSS}|{INDEXED}|{Tables.candidates}"
        )
    )
    """The lines worth learning from: those holding a duration or a rate, headers, losses,
    indexed lines, and the lines of tables."""

    def read(self, lines: pl.DataFrame) -> pl.DataFrame:
        """``lines`` (``_line``, ``job_id``, ``_who``: the process that printed it, ``message``;
        in time order; those ``candidates`` keeps) -> one row per step line: ``_line``,
        ``step`` (Int64), ``step_time_s`` (Float64), ``throughput`` (Float64) and
        ``throughput_unit``. Each process's lines are learned apart (every rank may print the
        same step)."""
        message = pl.col("message")
        tabled, held = self.tables.read(lines)
        if not held.is_empty():
            lines = lines.filter(~pl.col("_line").is_in(held.implode()))
        other_loop = message.str.extract(BAR_DESC, 1).str.contains(LOOKALIKE).fill_null(False)
        found = lines.filter(~_lookalike(message) & ~other_loop).select(
            "_line",
            "job_id",
            "_who",
            _plain_numbers(_per_second(message))
            .str.replace_all("#", NUMBER_SIGN, literal=True)
            .str.replace_all(CLOCK, "@")
            .str.replace_all(BAR, "~")
            .str.replace_all(PADDING, "${1}")
            .str.replace_all(r"\s+", " ")
            .str.strip_chars(" ")  # a line padded to the terminal's width is the same line
            .alias("_text"),
        )
        found = found.with_columns(
            _by_value(found.get_column("_text"), lambda t, p: t.str.replace_all(p, "#")).alias(
                "_template"
            )
        )
        self._classify(found)
        found, paces = self._records(found)
        self._classify(found)
        learnable = [t for t, f in self.fields.items() if f is not None and not _is_part(f)]
        found = found.filter(pl.col("_template").is_in(learnable))
        tabled = tabled.with_columns(*NO_THROUGHPUT)
        if found.is_empty():
            alone = [frame for frame in (tabled, paces) if not frame.is_empty()]
            return pl.concat(alone).sort("_line") if alone else _EMPTY
        found = found.with_columns(
            _by_value(found.get_column("_text"), lambda t, p: t.str.extract_all(p))
            .list.eval(
                _finite(pl.element().str.replace_all(",", "").cast(pl.Float64, strict=False))
            )
            .alias("_numbers")
        )
        groups = sorted(
            found.group_by("_template", maintain_order=True),
            key=lambda item: _untimed(self.fields[str(item[0][0])]),
        )
        steps = [self._steps(str(template), group) for (template,), group in groups]
        read = [s for s in steps if s is not None]
        if read:
            read = [self._once(pl.concat(read))]
        read += [frame for frame in (tabled, paces) if not frame.is_empty()]
        return pl.concat(read).sort("_line") if read else _EMPTY

    def _classify(self, found: pl.DataFrame) -> None:
        """Learn what the templates of ``found`` not seen before are."""
        for template in found.get_column("_template").unique().to_list():
            if template not in self.fields:
                self.fields[template] = _fields(template)

    def _records(self, found: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        """``found`` with each record's header and its parts joined into one line at the
        header's place, and the lone paces (``PACE``). A record leads with its header (its
        parts those after it from the same process, within ``RECORD_WINDOW`` lines) or
        with its part (the header the first after it: the part nearest a header is its), as
        the process's first lines of the part's template showed (``leads``). A header without
        a part stays a line of its own (a step that gives no time); a part without a header
        is dropped, or, leading its records, a pace that names no step."""
        parts = [t for t, f in self.fields.items() if _is_part(f)]
        headers_of = [
            t
            for t, f in self.fields.items()
            if f is not None and f.duration is None and f.bar is None and not _is_part(f)
        ]
        is_header = pl.col("_template").is_in(headers_of)
        is_part = pl.col("_template").is_in(parts)
        rest = found.filter(~is_header & ~is_part)
        headers, tails = found.filter(is_header), found.filter(is_part)
        if headers.is_empty() or tails.is_empty():
            alone = headers.filter(~_summary(pl.col("_text")))
            return pl.concat([rest, alone]).sort("_line"), self._paces(tails)
        tails = self._leading(headers, tails)
        owners = headers.select("_line", "job_id", "_who", pl.col("_line").alias("_owner"))
        after, before = (
            tails.filter(pl.col("_leads") == leads).join_asof(
                owners,
                on="_line",
                by=["job_id", "_who"],
                strategy="forward" if leads else "backward",
                tolerance=RECORD_WINDOW,
                check_sortedness=False,
            )
            for leads in (False, True)
        )
        nearest = pl.col("_line") == pl.col("_line").max().over("_owner")
        lone = before.filter(pl.col("_owner").is_null() | ~nearest)
        owned = (
            pl.concat([after, before.filter(pl.col("_owner").is_not_null() & nearest)])
            .filter(pl.col("_owner").is_not_null())
            .sort("_line")
            .group_by("_owner", maintain_order=True)
            .agg(pl.col("_text", "_template").str.join(JOINT).name.suffix("_part"))
        )
        alone = headers.join(owned, left_on="_line", right_on="_owner", how="anti").filter(
            ~_summary(pl.col("_text"))
        )
        records = headers.join(owned, left_on="_line", right_on="_owner", how="inner").select(
            "_line",
            "job_id",
            "_who",
            pl.concat_str("_text", pl.lit(JOINT), "_text_part").alias("_text"),
            pl.concat_str("_template", pl.lit(JOINT), "_template_part").alias("_template"),
        )
        return pl.concat([rest, alone, records]).sort("_line"), self._paces(lone)

    def _leading(self, headers: pl.DataFrame, tails: pl.DataFrame) -> pl.DataFrame:
        """``tails`` with ``_leads``: whether their template's records lead with the part,
        learned per process and template from the first batch that holds both, where the
        template's first line came before the first header."""
        firsts = (
            tails.group_by("job_id", "_who", "_template")
            .agg(pl.col("_line").min().alias("_first"))
            .join(
                headers.group_by("job_id", "_who").agg(pl.col("_line").min().alias("_header")),
                on=["job_id", "_who"],
            )
        )
        for job, who, template, first, header in firsts.iter_rows():
            self.leads.setdefault((job, who, template), first < header)
        leads = _per_process(
            [(*key, lead) for key, lead in self.leads.items()],
            _template=pl.String,
            _leads=pl.Boolean,
        )
        return tails.join(
            leads, on=["job_id", "_who", "_template"], how="left", maintain_order="left"
        ).with_columns(pl.col("_leads").fill_null(False))

    def _paces(self, lone: pl.DataFrame) -> pl.DataFrame:
        """The step rows of the lone parts whose records lead with them and whose one
        number is a rate of steps (``PACE``): a step that names no number, its time the
        rate's inverse."""
        if lone.is_empty() or "_leads" not in lone.columns:
            return _EMPTY
        paces = [t for t, f in self.fields.items() if f is not None and _is_part(f) and _pace(f)]
        lone = lone.filter(pl.col("_leads") & pl.col("_template").is_in(paces))
        rate = pl.col("_text").str.extract(f"({VALUE})", 1).str.replace_all(",", "")
        return lone.select(
            pl.col("_line").cast(pl.UInt32),
            pl.lit(None, pl.Int64).alias("step"),
            (1.0 / _finite(rate.cast(pl.Float64, strict=False))).alias("step_time_s"),
            *NO_THROUGHPUT,
        )

    def _largest_loops(self, template: str, total: int, numbers: pl.DataFrame) -> pl.DataFrame:
        """``numbers`` (a bar template's lines) without the bars of a process's other loops:
        under one description, a bar with a smaller total than the largest yet is another loop
        (an evaluation over a smaller set than the training's, Keras' ``evaluate()``)."""
        fields = self.fields[template]
        assert fields is not None
        loop = _loop(template, fields)
        name = f"n{total}"
        before = pl.DataFrame(
            [(job, who, most) for (job, who, desc), most in self.totals.items() if desc == loop],
            schema={"job_id": pl.String, "_who": pl.String, "_before": pl.Float64},
            orient="row",
        )
        numbers = numbers.join(before, on=["job_id", "_who"], how="left", maintain_order="left")
        largest = pl.max_horizontal("_before", pl.col(name).cum_max().over("job_id", "_who"))
        kept = numbers.filter(pl.col(name) >= largest).drop("_before")
        most = numbers.group_by("job_id", "_who").agg(pl.col(name).max())
        for job, who, value in most.iter_rows():
            if value is not None:
                key = (job, who, loop)
                self.totals[key] = max(value, self.totals.get(key, value))
        return kept

    def _once(self, steps: pl.DataFrame) -> pl.DataFrame:
        """``steps`` with a step that a process's next step line of another template names
        again, one of the two saying how long it took at most (a record of several lines:
        DeePMD-kit's "batch 14700: trn: rmse = ..." then "batch 14700: total wall time = 6.94
        s"; a bar's last redraw of a count, then its line with the time), as one row: its first
        line's, with the time and the throughput any of them gives. A template that names its
        last step again, or two timed lines naming one, counted it afresh (a batch counted
        within each epoch: Keras' last bar of each epoch). A process's first step of a batch is
        compared with its last of the one before (``last_step``)."""
        key = ["job_id", "_who"]
        before = _per_process(
            [(*process, *last) for process, last in self.last_step.items()],
            _before=pl.Int64,
            _before_template=pl.String,
            _before_timed=pl.Boolean,
        )
        steps = steps.sort("_line").join(before, on=key, how="left", maintain_order="left")
        timed = pl.col("step_time_s").is_not_null()
        previous = pl.coalesce(pl.col("step").shift(1).over(key), "_before")
        template = pl.coalesce(pl.col("_template").shift(1).over(key), "_before_template")
        was_timed = pl.coalesce(timed.shift(1).over(key), "_before_timed")
        again = (
            (pl.col("step") == previous) & (pl.col("_template") != template) & ~(timed & was_timed)
        )
        once = (
            steps.with_columns((~again.fill_null(False)).cum_sum().over(key).alias("_run"))
            .filter(pl.col("_run") > 0)  # the step the batch before ended with, named again
            .group_by(*key, "_run", maintain_order=True)
            .agg(
                pl.col("_line", "step").first(),
                *(
                    pl.col(c).drop_nulls().first()
                    for c in ("step_time_s", "throughput", "throughput_unit")
                ),
            )
        )
        last = steps.group_by(key).agg(pl.col("step", "_template").last(), timed.last())
        self.last_step.update(((j, w), (s, t, d)) for j, w, s, t, d in last.iter_rows())
        return once.select(_EMPTY.columns).sort("_line")

    def state_size(self) -> int:
        """Templates held, over every job."""
        return sum(len(templates) for templates in self.jobs.values())

    def forget(self, job: str) -> None:
        """Drop what was learned of a job (it ended)."""
        self.jobs.pop(job, None)
        self.last_step = {key: step for key, step in self.last_step.items() if key[0] != job}
        self.tables.forget(job)
        self.leads = {key: lead for key, lead in self.leads.items() if key[0] != job}
        self.totals = {key: most for key, most in self.totals.items() if key[0] != job}
        self.timed = {(j, who) for j, who in self.timed if j != job}

    def _steps(self, template: str, lines: pl.DataFrame) -> pl.DataFrame | None:
        """The steps among ``lines`` (of one template, from any job and process), learning
        from them: per process, how often each number rose from line to line (the last line of
        its previous batch first), and its counter once one keeps rising."""
        fields = self.fields[template]
        assert fields is not None
        names = [f"n{i}" for i in range(fields.width)]
        numbers = lines.with_columns(
            pl.col("_numbers").list.get(i, null_on_oob=True).alias(name)
            for i, name in enumerate(names)
        )
        seen = numbers.group_by("job_id", "_who", maintain_order=True).agg(
            pl.len().alias("_count"),
            *((pl.col(n).diff() > 0).sum().alias(f"rise_{n}") for n in names),
            *(pl.col(n).first().alias(f"first_{n}") for n in names),
            *(pl.col(n).last().alias(f"last_{n}") for n in names),
            *((pl.col(n) == pl.col(n).round(0)).all().alias(f"whole_{n}") for n in names),
        )
        counters: dict[tuple[str, str], tuple[int, tuple[bool, ...]]] = {}
        untimed = _untimed(fields)
        for row in seen.iter_rows(named=True):
            if untimed and (row["job_id"], row["_who"]) in self.timed:
                continue
            job = self.jobs.setdefault(row["job_id"], {})
            known = job.setdefault((row["_who"], template), Template())
            _observe(known, row, names, fields)
            taught = _learned_counter(job, template)
            if known.counter is None:
                known.counter = taught
            if known.counter is not None and (known.lines >= _needed(fields) or taught is not None):
                counters[(row["job_id"], row["_who"])] = (known.counter, _clocks(known, fields))
                if not untimed:
                    self.timed.add((row["job_id"], row["_who"]))
        if not counters:
            return None
        clocks = [f"_clock{k}" for k in range(len(fields.durations))]
        chosen = pl.DataFrame(
            {
                "job_id": [job for job, _ in counters],
                "_who": [who for _, who in counters],
                "_counter": [counter for counter, _ in counters.values()],
                **{
                    name: [flags[k] for _, flags in counters.values()]
                    for k, name in enumerate(clocks)
                },
            },
            schema={
                "job_id": pl.String,
                "_who": pl.String,
                "_counter": pl.Int64,
                **dict.fromkeys(clocks, pl.Boolean),
            },
        )
        times = [
            pl.when(~pl.col(clock)).then(
                1.0 / pl.col(f"n{field}") if scale < 0 else pl.col(f"n{field}") * scale
            )
            for field, scale, clock in zip(fields.durations, fields.scales, clocks, strict=True)
        ]
        if not times or fields.noted:
            step_time = pl.lit(None, pl.Float64)
        elif fields.rated:
            agreeing = [pl.when(((t / times[0]) - 1.0).abs() < AGREE).then(t) for t in times[1:]]
            step_time = pl.coalesce(*agreeing, times[0])
        else:
            step_time = (
                times[0] if len(times) == 1 else pl.max_horizontal(_not_totals(times, fields))
            )
        if fields.throughput is None:
            throughput = pl.lit(None, pl.Float64)
        else:
            throughput = pl.col(f"n{fields.throughput}")
        if fields.total is not None:
            numbers = self._largest_loops(template, fields.total, numbers)
        return numbers.join(chosen, on=["job_id", "_who"], how="inner").select(
            "_line",
            "job_id",
            "_who",
            pl.lit(template, pl.String).alias("_template"),
            pl.col("_numbers").list.get(pl.col("_counter")).cast(pl.Int64).alias("step"),
            pl.when(step_time.is_between(0.0, LONGEST_STEP_S, closed="right"))
            .then(step_time)
            .alias("step_time_s"),
            throughput.alias("throughput"),
            pl.lit(fields.unit, pl.String).alias("throughput_unit"),
        )


VALIDATION_LOSS = r"(?i)(?-u:\b)val_[0-9A-Za-z_]*loss"
"""A validation's loss by its field's name (``val_loss``)..."""
TRAINING_LOSS = r"(?i)(?:^|[^0-9A-Za-z_])(?:train[0-9A-Za-z]*[_ ])?loss(?-u:\b)"
"""... and a loss of the training's own (``loss``, ``train_loss``, ``lm loss``): a line with
the first and not the second reports a validation (modded-nanoGPT's ``step:125/1750
val_loss:4.33 train_time:...``); with both, a training step that also gives the last
validation's (Keras' last bar of an epoch)."""


def _lookalike(message: pl.Expr) -> pl.Expr:
    """True on the lines holding a word of ``LOOKALIKE_LINE`` outside their empty fields and
    error metrics (``ERROR_METRIC``), other loops' metrics beside a learning rate
    (``LOOP_METRIC``), and before the end of a tqdm meter (``AFTER_METER``), or a validation's
    loss without the training's (``VALIDATION_LOSS``)."""
    fields = message.str.replace_all(EMPTY_FIELD, "").str.replace_all(ERROR_METRIC, "")
    own = _without_loop_metrics(fields).str.replace(AFTER_METER, "${1}")
    validation = own.str.contains(VALIDATION_LOSS) & ~own.str.contains(TRAINING_LOSS)
    return own.str.contains(LOOKALIKE_LINE) | validation


def _per_process(rows: list[tuple[object, ...]], **columns: type[pl.DataType]) -> pl.DataFrame:
    """Rows of what was learned per process (job, process, then ``columns``) as a frame."""
    schema: dict[str, type[pl.DataType]] = {"job_id": pl.String, "_who": pl.String, **columns}
    return pl.DataFrame(rows, schema=schema, orient="row")


def _without_loop_metrics(text: pl.Expr) -> pl.Expr:
    """``text`` without other loops' metrics and times (``LOOP_METRIC``, ``SET_METRIC``,
    ``LOOP_TIME``) where it reports a learning rate, the training set's metric or the
    training's time (``TRAINED_WITH``): a training step's record that carries the last
    evaluation's."""
    trained = text.str.contains(TRAINED_WITH)
    others = (
        text.str.replace_all(LOOP_METRIC, " ")
        .str.replace_all(SET_METRIC, " ")
        .str.replace_all(LOOP_TIME, " ")
    )
    return pl.when(trained).then(others).otherwise(text)


def _summary(text: pl.Expr) -> pl.Expr:
    """True on the lines that report on a step (``SUMMARY_LINE``), other loops' metrics beside
    a learning rate and the training's own metrics (``TRAINING_METRICS``) aside."""
    own = _without_loop_metrics(text).str.replace_all(TRAINING_METRICS, " ")
    return own.str.contains(SUMMARY_LINE)


def metrics_records(lines: pl.DataFrame) -> pl.DataFrame:
    """``lines`` (``_line``, ``message``) -> the step rows of the metrics dicts among them (a
    training loss and the learning rate, no word of another loop), in the columns ``read``
    gives: their step where the dict has a step key, no step time."""
    message = pl.col("message")
    held = lines.filter(message.str.contains("{", literal=True)).filter(
        message.str.contains(METRICS_LOSS)
        & message.str.contains(METRICS_RATE)
        & ~_lookalike(message)
    )
    return held.select(
        "_line",
        message.str.extract(METRICS_STEP, 1).cast(pl.Int64, strict=False).alias("step"),
        pl.lit(None, pl.Float64).alias("step_time_s"),
        *NO_THROUGHPUT,
    )


def _loop(template: str, fields: Fields) -> str:
    """A bar's loop, as its template names it: the text before its counter (its
    description), the same whatever follows the bar."""
    assert fields.bar is not None
    return "#".join(template.split("#")[: fields.bar]).strip()


def _per_second(message: pl.Expr) -> pl.Expr:
    """``message`` with a bar's seconds per iteration written as iterations per second: tqdm
    switches from one to the other as the loop slows (``1.68it/s``, then ``1.84s/it``), and
    the line's template must not change with it."""
    seconds = message.str.extract(SECONDS_PER_IT, 1).cast(pl.Float64, strict=False)
    rate = (1.0 / seconds).cast(pl.String) + pl.lit("it/s")
    return pl.when(seconds > 0).then(message.str.replace(SECONDS_PER_IT, rate)).otherwise(message)


def _by_value(text: pl.Series, read: Callable[[pl.Series, str], pl.Series]) -> pl.Series:
    """``read(text, VALUE)`` where a line of ``text`` holds a non-finite word, else
    ``read(text, NUMBER)``: the same on every other line, and cheaper."""
    return read(text, VALUE if text.str.contains(NON_FINITE).any() else NUMBER)


def _finite(value: pl.Expr) -> pl.Expr:
    """``value``, null where it is NaN or infinite (a value's place, no number)."""
    return pl.when(value.is_finite()).then(value)


NAMED_WITH_DIGITS = r"([A-Za-z])[0-9]+([A-Za-z])"
"""Digits between a name's letters (``S2S``, ``mp3s``): part of the name, never a number."""


def _plain_numbers(message: pl.Expr) -> pl.Expr:
    """``message`` with its numbers written plainly: a scalar's repr unwrapped
    (``np.float64(1.5)``, ``tensor(2.3, device='cuda:0')``: the wrapper's digits are no
    number), a name's digits between its letters dropped (``S2S Loss``, ``x2y``: no number, and
    no "2 s" duration), a record's value unquoted (``"ups": "1.62"``), a magnitude suffix as its
    exponent (``24.5K``, ``1.05M``: nanotron's human_format, many a logger's; ``31.2k``), so
    that a line's template does not change with them and its labels are read."""
    plain = message.str.replace_all(SCALAR_REPR, "${1}")
    plain = plain.str.replace_all(NAMED_WITH_DIGITS, "${1}${2}")
    plain = plain.str.replace_all(QUOTED_NUMBER, "${1}${2}")
    for suffix, exponent in MAGNITUDES.items():
        plain = plain.str.replace_all(f"([0-9]){suffix}(?-u:\\b)", f"${{1}}{exponent}")
    return plain


def _learned_counter(job: dict[tuple[str, str], Template], template: str) -> int | None:
    """The counter another process of the job learned for ``template``: ranks print the same
    lines, so a rank that printed a few is read as the one that printed many."""
    return next(
        (
            known.counter
            for (_, other), known in job.items()
            if other == template and known.counter is not None and known.lines >= MIN_LINES
        ),
        None,
    )


def _not_totals(times: Sequence[pl.Expr], fields: Fields) -> list[pl.Expr]:
    """Each duration of a line, null where it is the total so far of an averaged one
    (``Fields.averaged``): the counter's number of steps times it, to ``TOTAL_AGREE``."""
    step = pl.col("_numbers").list.get(pl.col("_counter")).cast(pl.Float64)
    averages = [t for t, averaged in zip(times, fields.averaged, strict=True) if averaged]
    return [
        pl.when(
            ~pl.any_horizontal(
                pl.lit(False),
                *(((t / (step * a)) - 1.0).abs() < TOTAL_AGREE for a in averages if a is not t),
            ).fill_null(False)
        ).then(t)
        for t in times
    ]


def _clocks(known: Template, fields: Fields) -> tuple[bool, ...]:
    """Per duration field of a template, whether it has risen on every line so far: a clock
    (time since the start, the run's elapsed seconds), not how long a step took, once
    ``MIN_LINES`` lines have shown it. A rate is never one, nor a duration its words say is a
    step's."""
    return tuple(
        scale >= 0
        and not per_step
        and known.lines >= MIN_LINES
        and known.rises[field] >= known.lines - 1
        for field, scale, per_step in zip(
            fields.durations, fields.scales, fields.per_step, strict=True
        )
    )


def _observe(known: Template, seen: dict[str, object], names: list[str], fields: Fields) -> None:
    """Fold one batch's summary of a process's lines (``seen``: count, rises, first, last and
    whole-number flags per number) into what its template has shown, and pick the counter once
    one keeps rising: the first integer number, other than the duration, that rose in at least
    three lines of four (a counter restarting with each epoch allowed; one labelled step or
    iteration, in half of them: short epochs restart it often); of several, the one labelled
    likeliest a step. A count taken at first sight, not labelled a step or an iteration, that
    stays while the number after its slash rises gives way to that number; one not labelled a
    step that stays while another labelled counter rises, to that counter."""
    if not known.rises:
        known.rises = [0] * len(names)
    for i, name in enumerate(names):
        first = seen[f"first_{name}"]
        before = known.last[i] if known.last else None
        joined = int(isinstance(before, float) and isinstance(first, float) and first > before)
        known.rises[i] += int(seen[f"rise_{name}"]) + joined  # type: ignore[call-overload]
    count = int(seen["_count"])  # type: ignore[call-overload]
    pairs = known.lines + count - 1
    known.lines += count
    known.last = tuple(seen[f"last_{name}"] for name in names)  # type: ignore[misc]
    if known.counter is None and fields.sure is not None and seen[f"whole_{names[fields.sure]}"]:
        known.counter = fields.sure
    if pairs < MIN_LINES - 1:
        return
    counter = known.counter
    if counter is not None:
        after = counter + 1
        if (
            fields.ranks[counter] > 1  # not labelled a step or an iteration
            and after in fields.totals
            and not known.rises[counter]
            and known.rises[after] >= RISE * pairs
        ):
            known.counter = after  # a count that stays while its "total" rises: two counters
            return
        if fields.ranks[counter] == 0 or known.rises[counter]:
            return  # a step, or a counter that rises: kept (the usual case, decided cheaply)
    rising = [
        i
        for i, name in enumerate(names)
        if i not in fields.durations
        and fields.ranks[i] < NO_COUNTER
        and seen[f"whole_{name}"]
        and known.rises[i] >= _rise(fields, i) * pairs
    ]
    if counter is not None:
        inner = [i for i in rising if i != counter and fields.ranks[i] < UNLABELLED]
        if inner:
            # a counter not labelled a step that stays while another labelled one rises counts
            # an outer loop (old MXNet's "Iter[0] Batch [10]": the epoch, then the batch)
            known.counter = min(inner, key=lambda i: (fields.ranks[i], i))
        return
    described = [i for i in rising if fields.bar is not None and i < fields.bar]
    if described or rising:
        known.counter = min(described or rising, key=lambda i: (fields.ranks[i], i))


def _rise(fields: Fields, i: int) -> float:
    """The share of line pairs in which number ``i`` must grow to be the counter: every one
    for a line's index, half for a labelled counter, ``RISE`` for an unlabelled one."""
    if fields.index and i == 0:
        return 1.0
    return LABELLED_RISE if fields.ranks[i] < UNLABELLED else RISE


def _fields(template: str) -> Fields | None:
    """A template's duration (or rate) field, from the words before a number or the unit after
    it, its throughput field (never a counter), and the rank of each number's counter label.
    None when it has neither a duration nor a labelled counter. A duration with no other
    number (no counter beside it) is a record's part; a labelled counter without a duration,
    a step line that gives no time (or a record's header)."""
    parts = _PAIRED_NAMES.sub(r"\1\3# \2\3#", template).split("#")
    if len(parts) < 2:
        return None
    width = len(parts) - 1
    # a record's lines are joined (``JOINT``): a number's words are those of its own line
    befores = [part.rsplit(JOINT, 1)[-1] for part in parts[:-1]]
    afters = [part.split(JOINT, 1)[0] for part in parts[1:]]
    labels = [_LABEL.search(before) for before in befores]
    ranks = tuple(
        _number_rank(before, label.group(1) if label else "", after, _qualifier(before, label))
        for before, label, after in zip(befores, labels, afters, strict=True)
    )
    words = [_words(befores[index], afters[index], labels[index]) for index in range(width)]
    located = {index for index, before in enumerate(befores) if _SOURCE_LINE.search(before)}
    words = [("", "", "") if index in located else w for index, w in enumerate(words)]
    ranks = _uncounted(ranks, located)
    ranks = _range_ends(ranks, afters)
    meters = {index for index in range(width) if _counter_meter(parts, index, labels[index])}
    for index in meters:
        unit, label, phrase = words[index]
        words[index] = (unit, f"{label}_time", phrase)
    ranks = _uncounted(ranks, meters)
    durations, rated, noted = _durations(befores, words)
    # a step's time is never its counter, whatever its label names (``time/step=241ms``)
    ranks = _uncounted(ranks, durations)
    ranks = _per_counter(ranks, labels, words, durations)
    rates = [i for i, w in enumerate(words) if i not in durations and _is_throughput(*w)]
    ranks = _uncounted(ranks, rates)
    throughput = min(rates, key=lambda i: _rate_rank(words[i]), default=None)
    rate = None if throughput is None else _rate_name(*words[throughput])
    bar = BAR_COUNTER.search(template)
    counter = None if bar is None else template[: bar.end()].count("#") - 1 - ("/#" in bar[0])
    total = None if bar is None or "/#" not in bar.group(0) else counter + 1  # type: ignore[operator]
    loss = any(_LOSS.search(label) or _LOSS.search(phrase) for _, label, phrase in words)
    fraction, totals = _fraction(template, ranks, words)
    index = bool(_LEADING_INDEX.match(template)) and any(
        _NAMED_VALUE.search(before) for before in befores[1:]
    )
    if (
        not durations
        and min(ranks) >= UNLABELLED
        and counter is None
        and throughput is None
        and not (loss and fraction is not None)
        and not index
    ):
        return None
    per_step = (
        "/" in words[i][0] or bool(_PER_STEP.search(" ".join(words[i][1:]))) for i in durations
    )
    return Fields(
        width,
        durations,
        tuple(_scale(*words[i]) or 0.0 for i in durations),
        ranks,
        throughput,
        rate,
        counter,
        total,
        tuple(per_step),
        tuple(bool(_AVERAGED.search(words[i][1] or words[i][2])) for i in durations),
        rated,
        noted,
        loss,
        any(_LEARNING_RATE.match(label) for _, label, _ in words),
        _counted(ranks, words, totals | set(durations)),
        fraction,
        run_counter=None
        if counter is None
        else next((i for i in range(counter + 1, width) if _RUN_COUNTER.match(words[i][1])), None),
        totals=frozenset(totals),
        index=index,
        averaged_after=bool(_RUNNING_AVERAGE.search(template)),
    )


def _uncounted(ranks: tuple[int, ...], fields: Collection[int]) -> tuple[int, ...]:
    """``ranks`` with the numbers of ``fields`` (something other than a count) no counter."""
    return tuple(NO_COUNTER if i in fields else rank for i, rank in enumerate(ranks))


def _range_ends(ranks: tuple[int, ...], afters: list[str]) -> tuple[int, ...]:
    """``ranks`` with a labelled counter given as the range a report covers moved to the
    range's end: MXNet's ``Batch [200-300]``, CNTK's ``Minibatch[ 1- 500]``, the batches done
    being the second number."""
    moved = list(ranks)
    for index in range(len(ranks) - 1):
        if (
            _RANGE.fullmatch(afters[index])
            and moved[index] < UNLABELLED
            and moved[index + 1] == UNLABELLED
        ):
            moved[index], moved[index + 1] = NO_COUNTER, moved[index]
    return tuple(moved)


_RANGE = re.compile(r"\s?-\s?")
"""What lies between a range's two numbers (``200-300``, ``1- 500``)."""


def _counted(
    ranks: tuple[int, ...], words: list[tuple[str, str, str]], others: set[int]
) -> int | None:
    """The field labelled a counter (``Fields.counted``), the likeliest step of several;
    ``others``: the fields that are something else (a total, a duration: ``ms/batch``)."""
    counters = [
        i
        for i, rank in enumerate(ranks)
        if rank < UNLABELLED and i not in others and not _TALLY.match(words[i][1])
    ]
    return min(counters, key=lambda i: (ranks[i], i), default=None)


def _fraction(
    template: str, ranks: tuple[int, ...], words: list[tuple[str, str, str]]
) -> tuple[int | None, set[int]]:
    """The field counting out of a total (``Fields.fraction``): the last count whose label is
    none, a counter's or the training loop's name; and the fields of every count's total."""
    found = list(_FRACTION.finditer(template))
    counts = [template[: fraction.start()].count("#") for fraction in found]
    totals = {
        i + 1 for i, fraction in zip(counts, found, strict=True) if fraction[0].count("#") == 2
    }
    steps = [
        i
        for i in counts
        if ranks[i] < NO_COUNTER
        and (not words[i][1] or ranks[i] < UNLABELLED or _LOOP_NAME.match(words[i][1]))
    ]
    return (steps[-1] if steps else None), totals


def _durations(
    befores: list[str], words: list[tuple[str, str, str]]
) -> tuple[tuple[int, ...], bool, bool]:
    """The fields whose largest is the step's time (``Fields.durations``), whether the first is
    a rate to be checked against the others (``Fields.rated``) and whether the one duration is
    a note (``Fields.noted``). A rate of steps or a duration per step by its unit says so
    alone; of durations that labels name (an average of them by its unit: ``step_avg:60.06ms``),
    one labelled plainly (``time: 0.49``, beside ``last_time`` or ``data_time``: its
    variants), or else the largest (a step's time and its parts: forward, backward, optimizer
    ..., the whole the largest); a duration with a unit only is one when no label names
    another."""
    timings = [i for i, w in enumerate(words) if _scale(*w) is not None]
    labelled = [
        i for i in timings if _scale("", *words[i][1:]) is not None or _AVERAGED.search(words[i][1])
    ]
    strong = [i for i in timings if "/" in words[i][0] or (_scale(*words[i]) or 0.0) < 0]
    if strong:
        first = strong[0]
        rate = (_scale(*words[first]) or 0.0) < 0
        others = tuple(i for i in labelled if i != first) if rate else ()
        return (first, *others), bool(others), False
    plain = [i for i in labelled if _PLAIN.match(words[i][1])]
    if plain or labelled:
        return tuple(plain[:1] or labelled), False, False
    if not timings:
        return (), False, False
    return (timings[0],), False, bool(_NOTE.search(befores[timings[0]]))


_PAIRED_NAMES = re.compile(r"(?<![\w/])([A-Za-z_]+)/([A-Za-z_]+)(\s*[:=]\s*\[?)#/#(?![\w/])")
"""Two names joined by a slash before two numbers joined alike: each number is its name's
(fast-reid's ``epoch/iter: 53/13799``, ``epoch/iter: [3/500]``), not a count out of a total
labelled by both."""


_BRACKETED = re.compile(r"\s?[(\[]([A-Za-z/]+)[)\]](\W{0,3})$")
"""A unit in brackets between a label and its number (``time(s): 7.4``, ``speed(s/it)``,
``Time [ms]``): the number's unit where no word follows the number."""


_PAIRED = re.compile(r"\s?\(")
"""A number followed by a second one in brackets, as a label with a second in brackets before
them pairs them (BasicSR's ``time (data): 0.365 (0.002)``)."""


def _counter_meter(parts: list[str], index: int, label: re.Match[str] | None) -> bool:
    """Whether number ``index`` of a template is labelled with a counter's name and followed by
    its running average in brackets alone (``Batch 0.720 (3.896)``: an average meter named
    after what it times, as semseg-style loops print their ``batch_time``): a count has no
    running average, so that number is the counter's time."""
    if label is None or index + 2 >= len(parts) or not parts[index + 2].startswith(")"):
        return False
    return bool(_PAIRED.fullmatch(parts[index + 1])) and _counter_rank(label.group(1)) < UNLABELLED


def _names_a_value(bracketed: str) -> bool:
    """Whether a word in brackets names a value (``data``) rather than a unit (``ms``, ``s/it``)."""
    return "/" not in bracketed and bracketed.lower() not in _TIME_UNITS


def _words(before: str, after: str, label: re.Match[str] | None) -> tuple[str, str, str]:
    """A number's unit (the word after it, else one in brackets before it), label (the word
    before it, its words joined by underscores: ``tokens-per-second`` reads as
    ``tokens_per_second``) and phrase (the last words before it, a bracketed unit set apart from
    the label it follows), each empty where there is none."""
    unit = _UNIT_AFTER.match(after) or _STEPS_AFTER.match(after)
    since = _SINCE_START.match(after[unit.end() :]) if unit else None
    bracketed = _BRACKETED.search(before)
    if bracketed is not None and _PAIRED.fullmatch(after) and _names_a_value(bracketed.group(1)):
        # "time (data): 0.365 (0.002)": the bracket names the second number, not a unit
        before, bracketed = before[: bracketed.start()] + bracketed.group(2), None
        label = _LABEL.search(before)
    if bracketed is not None:
        before = f"{before[: bracketed.start()]} ({bracketed.group(1)}){bracketed.group(2)}"
    phrase = _PHRASE.search(before)
    return (
        unit.group(1) + (f" {since.group(1)}" if since else "")
        if unit
        else bracketed.group(1)
        if bracketed
        else "",
        label.group(1).replace("-", "_") if label else "",
        phrase.group(1) if phrase else "",
    )


_RATE = re.compile(
    r"(?i)/s(?:ec(?:ond)?)?(?:/|$)|_per_s(?:ec(?:ond)?)?(?:_|$)|per sec|[a-z]persec(?:ond)?$"
    r"|^(?:tps|wps|sps|ips|fps)$|flops$"
)
"""A throughput: so many samples, tokens, images or FLOPs a second (``samples/sec``,
``tokens_per_sec``, ``TFLOP/s/GPU``; tokens, words, samples, images or frames: ``tps``,
``wps``, ``sps``, ``ips``, ``fps``, as RL trainers count environment frames)."""
_RATE_LABEL = re.compile(r"(?i)(?:^|[/_])throughput$")
"""A label naming a throughput (``perf/throughput``); as a unit, the word is the next field's."""
_RATE_PHRASE = re.compile(r"(?i)(?:^|[\s(])([a-z]+ per sec(?:ond)?)$")
"""A phrase naming a rate in words (``samples per second``)."""
_STEP_RATE = re.compile(
    r"(?i)^(?:it|iters?|iterations?|steps?|batch(?:es)?|updates?)(?:/|_per_| per )s"
)
"""A rate of steps: a step time (``_scale``), never a throughput."""
_PER_DEVICE = re.compile(r"(?i)gpu|device|(?<![a-z])core")
"""A rate per device (a GPU, a TPU core): the step's throughput before the whole job's."""
_AVERAGED = re.compile(r"(?i)avg|average|mean|running|smooth")
"""A rate averaged over many steps, not the step's own."""
_LOSS = re.compile(r"(?i)(?:loss|\bppl|perplexity)(?: is)?$")
"""A loss's label or phrase (``loss``, ``total_loss``, ``lm loss``, ``loss is``; a language
model's perplexity, ``ppl``, ``lm loss PPL``)."""
_LEADING_INDEX = re.compile(r"^\[#\] ")
"""A template that opens with a bracketed number and nothing else (``[#] train-logloss:#``):
the line's index, unlabelled (XGBoost's and LightGBM's boosting round)."""
_NAMED_VALUE = re.compile(r"[A-Za-z][\w'.@-]*\s*[:=]\s*$")
"""A name and a colon or an equals sign right before a number: a metric's value."""
_PLAIN = re.compile(r"(?i)(?:time|dt|took|duration|timing|latency)$")
"""A duration's plain label: the step's time, not one of its variants or parts."""
_NOTE = re.compile(r"\(\s*$")
"""A number opening a parenthesis: a note on the line (an average, an interval's time)."""
_PER_STEP = re.compile(r"(?i)iter|step|batch|update|per ")
"""A duration's label or phrase naming it a step's (or its unit: ``ms/step``)."""
_EXCLUDED_RATE = re.compile(r"(?i)data|load|reader")
"""A loader's or reader's rate is not the step's."""


def _rate_rank(words: tuple[str, str, str]) -> tuple[bool, bool]:
    """Which of a line's throughputs is the step's (the lowest): the current one before a
    running average, the one per device before the whole job's."""
    text = " ".join(words)
    return bool(_AVERAGED.search(text)), not _PER_DEVICE.search(text)


def _rate_name(unit: str, label: str, phrase: str) -> str:
    """The words that name a number a rate: its unit (``samples/s``), its label
    (``tokens_per_sec``) or its phrase (``samples per second``); empty when none does."""
    if _RATE.search(unit):
        return unit
    if _RATE.search(label) or _RATE.search(label.rsplit("/", 1)[-1]) or _RATE_LABEL.search(label):
        return label
    worded = _RATE_PHRASE.search(phrase)
    return worded.group(1) if worded else ""


def _is_throughput(unit: str, label: str, phrase: str) -> bool:
    """Whether a number with this unit after it and this label before it is a throughput."""
    named = _rate_name(unit, label, phrase)
    return bool(named) and not _STEP_RATE.search(named) and not _EXCLUDED_RATE.search(label)


def _needed(fields: Fields) -> int:
    """Lines of a template before its lines are steps: one for a step line at first sight."""
    return 1 if fields.sure is not None else MIN_LINES


def _untimed(fields: Fields | None) -> bool:
    """A template with a labelled counter and no time (no bar's, a bar is a step whether it
    says how long it took or not): read after the timed ones, so that a process whose steps say
    how long they took is known before its counter-only lines."""
    return fields is not None and not fields.timed and fields.bar is None


def _pace(fields: Fields) -> bool:
    """A template whose first duration is a rate of steps."""
    return bool(fields.scales) and fields.scales[0] < 0


_RUNNING_AVERAGE = re.compile(r"#\s*\(#\)\s*$")
"""A template ending in a number and, in parentheses, its running average."""


def _is_part(fields: Fields | None) -> bool:
    """A template of one number (or one and its running average), a duration or a throughput:
    the later line of a record."""
    return (
        fields is not None
        and (fields.width == 1 or (fields.width == 2 and fields.averaged_after))
        and (fields.duration is not None or fields.throughput is not None)
    )


def _qualifier(before: str, label: re.Match[str] | None) -> str:
    """The word qualifying a counter's label as a word of its own (``global iter``, ``inner
    iter``), as ``global_step`` holds it; empty when none does."""
    if label is None:
        return ""
    word = _SPACED_QUALIFIER.search(before[: label.start(1)])
    return word.group(1).lower() if word else ""


def _number_rank(before: str, label: str, after: str, qualifier: str = "") -> int:
    """How likely a number is the step, by its label (``_counter_rank``) or the counter's name
    written right after it (``1-100batch``); a percentage, a loss, an epoch, or digits within a
    name (``gpu-a03``, ``node12``: a host's, a device's), are never the step."""
    if after.startswith("%") or _LOSS.search(label) or _EPOCH.match(label):
        return NO_COUNTER
    suffix = _COUNTER_AFTER.match(after)
    if suffix:
        return _counter_rank(suffix.group(1) or suffix.group(2))
    if _UNIT_BEFORE.search(before):
        return UNLABELLED
    if before[-1:].isalpha():
        rank = _counter_rank(label, qualifier)
        return NO_COUNTER if rank == UNLABELLED else rank
    return _counter_rank(label, qualifier)


def _per_counter(
    ranks: tuple[int, ...],
    labels: list[re.Match[str] | None],
    words: list[tuple[str, str, str]],
    durations: tuple[int, ...],
) -> tuple[int, ...]:
    """``ranks`` with the number that the step's time is per labelled a counter: a loop
    that times its steps per ``tick`` counts ticks (StyleGAN's ``tick 2 ... sec/tick 644.3``),
    whatever it calls them."""
    if not durations:
        return ranks
    unit, label, phrase = words[durations[0]]
    per = next((m.group(1).lower() for w in (label, phrase, unit) if (m := _PER.search(w))), None)
    if per is None:
        return ranks
    return tuple(
        _COUNTER_RANK["iter"]
        if rank == UNLABELLED
        and label is not None
        and label.group(1).lower().rstrip(".") in (per, f"{per}s")
        else rank
        for rank, label in zip(ranks, labels, strict=True)
    )


def _counter_rank(label: str, qualifier: str = "") -> int:
    """How likely a number with this label (its last name of a path: ``epoch=0/global_step=``)
    is the step: by ``_COUNTER_RANK``, unlabelled last; a global step before any other, a
    micro step (a micro-batch's) or an inner loop's as a batch. ``qualifier``: the word
    before the label, for a label that holds none."""
    match = _COUNTER_LABEL.match(re.split(r"[/.]", label.rstrip("."))[-1])
    if match is None:
        return UNLABELLED
    qualifier = (match.group(1) or qualifier).lower()
    if qualifier in _BOUNDS:
        return UNLABELLED
    name = (match.group(2) or _SHORT_COUNTER[match.group(3).lower()]).lower()
    rank = _COUNTER_RANK[name]
    if qualifier in _INNER:
        return _COUNTER_RANK["batch"]
    return rank - 1 if qualifier == "global" else rank


_PER_STEP_LABEL = re.compile(r"([mu]?)s(?:ec)?/(?:b|batch|it|iter|step)")
"""A label that is the unit of a step's time (HiFi-GAN's ``s/b : 1.131``, seconds a batch)."""
_TIME_COST = r"(?:batch|reader|data|step|iter|time)[_ ]?cost\b"
"""A cost that is a time: a batch's, its reading's (PaddlePaddle's ``batch_cost: 1.0371``,
``reader cost``). A cost alone is a loss (the ``avg_cost`` of PaddlePaddle's fluid examples)."""


def _scale(unit: str, label: str, phrase: str = "") -> float | None:
    """Seconds per unit of a number with this unit after it, this label (its last word) and
    this phrase (its last words) before it (-1: a rate of steps per second), or None when it is
    no step duration (a rate of samples or tokens is none)."""
    unit, label, phrase = unit.lower(), label.lower(), phrase.lower()
    if _EXCLUDED.search(phrase or label) or _EXCLUDED.search(unit) or _LOSS_NAME.search(label):
        return None
    if label in _COARSER or label in _INTERVAL:  # a clock's part, an interval of many steps
        return None
    if _SINCE_START.search(unit):  # a clock or an estimate
        return None
    if _COUNTED.match(unit) and "sec" not in unit and unit not in _COARSER:
        return None
    if unit == "ups" or _STEP_RATE.match(unit):
        return -1.0
    if unit.startswith(("ms/", "msec")) or unit in _MILLISECONDS:
        return 0.001
    if unit.startswith(("s/it", "s/step", "s/batch", "sec/")) or unit in _SECONDS:
        return 1.0
    if unit.startswith("us/") or unit in _MICROSECONDS:
        return 1e-6
    if re.search(r"steps?_per_s|batches_per_s|ups$|it_per_s|(?:^|/)bps$", label):
        return -1.0
    if re.search(r"(?:^|_)(?:it|steps?|iters?|batch(?:es)?|updates?)/s(?:ec)?$", label):
        return -1.0
    if (
        re.search(r"per_?s|ps$", label)
        or _RATE.search(label)
        or re.search(r"/s(?:ec)?$|per_s", unit)
    ):
        return None  # a rate a second (``tokens/gpu/second``), not a duration
    if re.search(r"(?:^| )(?:steps?|iter[a-z]*|batch[a-z]*|updates?) per sec", phrase):
        return -1.0
    if re.search(r" per sec", phrase):
        return None
    per_step = _PER_STEP_LABEL.fullmatch(label)
    if per_step:
        return {"": 1.0, "m": 0.001, "u": 1e-6}[per_step.group(1)]
    if re.search(r"(^|[^a-z])ms|_ms\b|ms/", label):
        return 0.001
    timed = re.search(r"time(?![a-z])|dt$|took|duration|timing|latency|_s/|_s$|sec", label)
    timed = timed or re.search(_TIME_COST, f"{phrase} {label}")
    if not timed and not re.search(r"(?:^|[^a-z])(?:time|timing|latency)\b|\(t\)$", phrase):
        return None  # "(t)": a label's time (OpenCLIP's "Batch (t): 0.559")
    if re.search(r"\(ms\)|\bin ms\b", phrase):
        return 0.001
    if re.search(r"\(us\)|\bin us\b", phrase):
        return 1e-6
    return 1.0


_EMPTY = pl.DataFrame(
    schema={
        "_line": pl.UInt32,
        "step": pl.Int64,
        "step_time_s": pl.Float64,
        "throughput": pl.Float64,
        "throughput_unit": pl.String,
    }
)
