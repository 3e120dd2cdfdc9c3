"""What each training framework prints: start-up, progress, evaluation, checkpoint and
completion lines, in the real formats of Megatron-LM, torchtitan, DeepSpeed, the Hugging Face
Trainer and PyTorch Lightning (each from the rank that framework prints on)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

import numpy as np

from medic.simulate.clock import Clock
from medic.simulate.plan import Pause, Run, TrainSpec
from medic.simulate.tqdm_meter import meter

Lines = list[tuple[float, str]]


def losses(spec: TrainSpec, steps: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A pre-training loss curve: fast early drop, slow decay, step-to-step noise."""
    decay = (spec.loss0 - spec.loss_floor) * np.exp(-steps / max(spec.total_steps / 6, 50))
    result: np.ndarray = spec.loss_floor + decay + rng.normal(0, 0.03, steps.size) * (1 + decay / 4)
    if spec.loss_curve is not None:
        result = spec.loss_curve(steps, result)
    return result


def learning_rates(spec: TrainSpec, steps: np.ndarray) -> np.ndarray:
    warm = np.minimum(1.0, steps / max(1, spec.total_steps // 50))
    cosine = 0.55 + 0.45 * np.cos(np.pi * np.minimum(steps / max(spec.total_steps, 1), 1.0))
    result: np.ndarray = spec.lr * warm * cosine
    return result


def spread(start: float, end: float, count: int) -> np.ndarray:
    """``count`` times spread over ``[start, end)`` (for start-up messages)."""
    result: np.ndarray = start + (end - start) * np.linspace(0.02, 0.97, count)
    return result


def logged(run: Run) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Steps that print a progress line, their end times and the mean step time since the
    previous printed one (pauses excluded, as the frameworks' timers do)."""
    sched = run.schedule
    every = run.job.spec.log_every
    mask = sched.steps % every == 0
    idx = np.flatnonzero(mask)
    csum = np.concatenate(([0.0], np.cumsum(sched.durations)))
    prev = np.concatenate(([0], idx[:-1] + 1))
    mean = (csum[idx + 1] - csum[prev]) / np.maximum(idx + 1 - prev, 1)
    return sched.steps[idx], sched.ends[idx], mean


class Framework(ABC):
    """What one framework prints, each method returning (plan time, line) pairs."""

    name: ClassVar[str]
    script: ClassVar[str]
    loop_frames: ClassVar[tuple[str, ...]]
    """Traceback frames of the training loop, outermost first (``{p}`` = rank prefix)."""

    def printer(self, world_size: int) -> int:
        """The global rank that prints progress."""
        return 0

    def loss_every(self, spec: TrainSpec) -> int:
        """Every how many steps a progress line carries the loss."""
        return spec.log_every

    @abstractmethod
    def startup(self, run: Run, clock: Clock) -> Lines:
        """Initialisation messages up to the first step."""

    @abstractmethod
    def progress(self, run: Run, clock: Clock, rng: np.random.Generator) -> Lines:
        """Progress lines of every logged step the run completes."""

    @abstractmethod
    def pause(self, run: Run, pause: Pause, clock: Clock, rng: np.random.Generator) -> Lines:
        """What an evaluation or a checkpoint save prints."""

    @abstractmethod
    def finish(self, run: Run, at: float, clock: Clock) -> Lines:
        """The last words of a run that completes."""


class Megatron(Framework):
    name = "megatron"
    script = "pretrain_gpt.py"
    loop_frames = (
        '{p}  File "/workspace/Megatron-LM/pretrain_gpt.py", line 285, in <module>',
        "{p}    pretrain(",
        '{p}  File "/workspace/Megatron-LM/megatron/training/training.py", line 386, in pretrain',
        "{p}    iteration, num_floating_point_operations_so_far = train(",
        '{p}  File "/workspace/Megatron-LM/megatron/training/training.py", line 1388, in train',
        "{p}    train_step(forward_step_func,",
        '{p}  File "/workspace/Megatron-LM/megatron/training/training.py", line 756, in train_step',
        "{p}    losses_reduced = forward_backward_func(",
    )

    def printer(self, world_size: int) -> int:
        return world_size - 1

    def startup(self, run: Run, clock: Clock) -> Lines:
        ws, tp = run.world_size, 8
        t = spread(run.start, run.train_start, 12)
        s = clock.stamps(t, "s")
        return list(
            zip(
                t,
                [
                    f"using world size: {ws}, data-parallel size: {ws // tp}, context-parallel "
                    f"size: 1, tensor-model-parallel size: {tp}, pipeline-model-parallel size: 1",
                    "> initializing torch distributed ...",
                    f"> initialized tensor model parallel with size {tp}",
                    "> compiling dataset index builder ...",
                    ">>> done with dataset index builder. Compilation time: 0.061 seconds",
                    f"time to initialize megatron (seconds): {t[5] - run.start:.3f}",
                    f"[after megatron is initialized] datetime: {s[6]} ",
                    "building GPT model ...",
                    f"[after model, optimizer, and learning rate scheduler are built] datetime: "
                    f"{s[8]} ",
                    "> building train, validation, and test datasets ...",
                    f"[after dataloaders are built] datetime: {s[10]} ",
                    "training ...",
                ],
                strict=True,
            )
        )

    def progress(self, run: Run, clock: Clock, rng: np.random.Generator) -> Lines:
        spec = run.job.spec
        steps, ends, mean = logged(run)
        loss = losses(spec, steps, rng)
        lr = learning_rates(spec, steps)
        tflops = spec.tflops * spec.step_s / mean
        grad = np.abs(rng.normal(0.9, 0.25, steps.size)) + 0.1
        out = []
        for i, stamp in enumerate(clock.stamps(ends, "s")):
            out.append(
                (
                    float(ends[i]),
                    f" [{stamp}] iteration {steps[i]:8d}/{spec.total_steps:8d} | consumed samples: "
                    f"{steps[i] * spec.global_batch:12d} | elapsed time per iteration (ms): "
                    f"{mean[i] * 1000:.1f} | throughput per GPU (TFLOP/s/GPU): {tflops[i]:.1f} | "
                    f"learning rate: {lr[i]:.6E} | global batch size: {spec.global_batch:5d} | "
                    f"lm loss: {loss[i]:.6E} | loss scale: 1.0 | grad norm: {grad[i]:.3f} | "
                    "number of skipped iterations:   0 | number of nan iterations:   0 |",
                )
            )
        return out

    def pause(self, run: Run, pause: Pause, clock: Clock, rng: np.random.Generator) -> Lines:
        if pause.kind == "eval":
            loss = float(losses(run.job.spec, np.array([pause.step]), rng)[0]) + 0.05
            rule = "-" * 100
            return [
                (pause.end, rule),
                (
                    pause.end,
                    f" validation loss at iteration {pause.step} | lm loss value: {loss:.6E} | "
                    f"lm loss PPL: {np.exp(loss):.6E} | ",
                ),
                (pause.end, rule),
            ]
        took = (pause.end - pause.start) * 1000
        return [
            (
                pause.start,
                f"saving checkpoint at iteration {pause.step:7d} to /lustre/ckpt/gpt in "
                "torch_dist format",
            ),
            (
                pause.end,
                f"  successfully saved checkpoint from iteration {pause.step:7d} to "
                "/lustre/ckpt/gpt [ t 1/8, p 1/1 ]",
            ),
            (pause.end, "(min, max) time across ranks (ms):"),
            (
                pause.end,
                f"    save-checkpoint ................................: ({took - 7.3:.2f}, "
                f"{took:.2f})",
            ),
        ]

    def finish(self, run: Run, at: float, clock: Clock) -> Lines:
        stamp = clock.stamps([at], "s")[0]
        return [(at, f"[after training is done] datetime: {stamp} ")]


class Torchtitan(Framework):
    name = "torchtitan"
    script = "torchtitan/train.py"
    loop_frames = (
        '{p}  File "/workspace/torchtitan/torchtitan/train.py", line 672, in <module>',
        "{p}    trainer.train()",
        '{p}  File "/workspace/torchtitan/torchtitan/train.py", line 569, in train',
        "{p}    self.train_step(data_iterator)",
        '{p}  File "/workspace/torchtitan/torchtitan/train.py", line 489, in train_step',
        "{p}    loss = self.forward_backward_step(input_dict, labels)",
    )

    def __init__(self, colour: bool) -> None:
        self.colour = colour

    def _line(self, stamp: str, text: str) -> str:
        return f"[rank0]:[titan] {stamp} - root - INFO - {text}"

    def startup(self, run: Run, clock: Clock) -> Lines:
        spec = run.job.spec
        texts = [
            "Starting job: Llama 3 8B training",
            f"Building 1-D device mesh with ['dp_shard'], [{run.world_size}]",
            "[GC] Initial GC collection. 0.00 seconds.",
            "Loading tokenizer from tokenizer.json",
            "Preparing c4 dataset from allenai/c4",
            "CUDA capacity: NVIDIA H100 80GB HBM3 with 79.11GiB memory",
            "Model llama3 8B size: 8,030,261,248 total parameters",
            "Applied selective activation checkpointing to the model",
            "Compiling each TransformerBlock with torch.compile",
            "Applied FSDP to the model",
            "Peak FLOPS used for computing MFU: 9.890e+14",
            f"Trainer is initialized with local batch size 2, global batch size "
            f"{spec.global_batch}, gradient accumulation steps 1, sequence length {spec.seq_len},"
            f" total steps {spec.total_steps} (warmup 200).",
            f"Training starts at step {run.first_step + 1}.",
        ]
        t = spread(run.start, run.train_start, len(texts))
        return [
            (float(ti), self._line(s, x))
            for ti, s, x in zip(t, clock.stamps(t, "ms"), texts, strict=True)
        ]

    def progress(self, run: Run, clock: Clock, rng: np.random.Generator) -> Lines:
        spec = run.job.spec
        steps, ends, mean = logged(run)
        loss = losses(spec, steps, rng)
        mem = spec.mem_mib / 1024 * 0.82 + rng.normal(0, 0.02, steps.size)
        tps = spec.global_batch * spec.seq_len / run.world_size / mean
        tflops = spec.tflops * spec.step_s / mean
        mfu = tflops / 989.0 * 100
        c = ("\x1b[31m", "\x1b[32m", "\x1b[33m", "\x1b[34m", "\x1b[36m", "\x1b[35m", "\x1b[39m")
        c = c if self.colour else ("",) * 7
        out = []
        for i, stamp in enumerate(clock.stamps(ends, "ms")):
            text = (
                f"{c[0]}step: {steps[i]:2d}  {c[1]}loss: {loss[i]:7.4f}  {c[2]}memory: "
                f"{mem[i]:5.2f}GiB({mem[i] / 79.11 * 100:.2f}%)  {c[3]}tps: {tps[i]:,.0f}  "
                f"{c[4]}tflops: {tflops[i]:,.2f}  {c[5]}mfu: {mfu[i]:.2f}%{c[6]}"
            )
            out.append((float(ends[i]), self._line(stamp, text)))
        return out

    def pause(self, run: Run, pause: Pause, clock: Clock, rng: np.random.Generator) -> Lines:
        a, b = clock.stamps([pause.start, pause.end], "ms")
        if pause.kind == "eval":
            loss = float(losses(run.job.spec, np.array([pause.step]), rng)[0]) + 0.05
            return [(pause.end, self._line(b, f"validate step: {pause.step}  loss: {loss:7.4f}"))]
        took = pause.end - pause.start
        return [
            (pause.start, self._line(a, "Saving the checkpoint (or staging if async is enabled).")),
            (
                pause.end,
                self._line(
                    b,
                    "Finished saving the checkpoint (or staging if async is enabled)in "
                    f"{took:.2f} seconds.",
                ),
            ),
        ]

    def finish(self, run: Run, at: float, clock: Clock) -> Lines:
        a, b = clock.stamps([at - 2, at], "ms")
        return [
            (at - 2, self._line(a, "Sleeping 2 seconds for other ranks to complete")),
            (at, self._line(b, "Training completed")),
        ]


class DeepSpeed(Framework):
    name = "deepspeed"
    script = "train.py"
    loop_frames = (
        '{p}  File "/workspace/train.py", line 212, in <module>',
        "{p}    main()",
        '{p}  File "/workspace/train.py", line 187, in main',
        "{p}    loss = engine(batch)",
        '{p}  File "/usr/local/lib/python3.10/dist-packages/deepspeed/utils/nvtx.py", line 18, in '
        "wrapped_fn",
        "{p}    ret_val = func(*args, **kwargs)",
    )

    def _line(self, stamp: str, where: str, text: str) -> str:
        return f"[{stamp}] [INFO] [{where}] {text}"

    def startup(self, run: Run, clock: Clock) -> Lines:
        items = [
            (
                "real_accelerator.py:219:get_accelerator",
                "Setting ds_accelerator to cuda (auto detect)",
            ),
            ("comm.py:652:init_distributed", "cdb=None"),
            (
                "comm.py:683:init_distributed",
                "Initializing TorchBackend in DeepSpeed with backend nccl",
            ),
            (
                "logging.py:96:log_dist",
                "[Rank 0] DeepSpeed info: version=0.14.4, git-hash=unknown, git-branch=unknown",
            ),
            ("logging.py:96:log_dist", "[Rank 0] DeepSpeed Flops Profiler Enabled: False"),
            ("logging.py:96:log_dist", "[Rank 0] Creating ZeRO stage 3 optimizer"),
            ("utils.py:781:see_memory_usage", "Stage 3 initialize beginning"),
            (
                "logging.py:96:log_dist",
                "[Rank 0] DeepSpeed Final Optimizer = DeepSpeedZeroOptimizer_Stage3",
            ),
        ]
        t = spread(run.start, run.train_start, len(items))
        return [
            (float(ti), self._line(s, w, x))
            for ti, s, (w, x) in zip(t, clock.stamps(t, "ms"), items, strict=True)
        ]

    def progress(self, run: Run, clock: Clock, rng: np.random.Generator) -> Lines:
        spec = run.job.spec
        steps, ends, mean = logged(run)
        lr = learning_rates(spec, steps)
        samples = spec.global_batch / mean
        current = samples * rng.normal(1.0, 0.03, steps.size)
        mem = spec.mem_mib / 1024 * 0.6
        out = []
        stamps = clock.stamps(ends, "ms")
        later = clock.stamps(ends + 0.001, "ms")
        for i in range(steps.size):
            t = float(ends[i])
            out.append(
                (
                    t,
                    self._line(
                        stamps[i],
                        "logging.py:96:log_dist",
                        f"[Rank 0] step={steps[i]}, skipped=0, lr=[{float(lr[i])!r}], "
                        "mom=[(0.9, 0.999)]",
                    ),
                )
            )
            out.append(
                (
                    t + 0.001,
                    self._line(
                        later[i],
                        "timer.py:260:stop",
                        f"epoch=0/micro_step={steps[i]}/global_step={steps[i]}, "
                        f"RunningAvgSamplesPerSec={samples[i]:.2f}, CurrSamplesPerSec="
                        f"{current[i]:.2f}, MemAllocated={mem:.1f}GB, MaxMemAllocated="
                        f"{mem * 1.18:.1f}GB",
                    ),
                )
            )
        return out

    def pause(self, run: Run, pause: Pause, clock: Clock, rng: np.random.Generator) -> Lines:
        if pause.kind == "eval":
            return []
        a, b = clock.stamps([pause.start, pause.end], "ms")
        tag = f"global_step{pause.step}"
        path = f"/lustre/ckpt/{tag}/mp_rank_00_model_states.pt"
        return [
            (
                pause.start,
                self._line(
                    a,
                    "logging.py:96:log_dist",
                    f"[Rank 0] [Torch] Checkpoint {tag} is about to be saved!",
                ),
            ),
            (
                pause.start,
                self._line(
                    a, "logging.py:96:log_dist", f"[Rank 0] Saving model checkpoint: {path}"
                ),
            ),
            (
                pause.start,
                self._line(a, "torch_checkpoint_engine.py:21:save", f"[Torch] Saving {path}..."),
            ),
            (
                pause.end,
                self._line(b, "torch_checkpoint_engine.py:23:save", f"[Torch] Saved {path}."),
            ),
            (
                pause.end,
                self._line(
                    b,
                    "torch_checkpoint_engine.py:33:commit",
                    f"[Torch] Checkpoint {tag} is ready now!",
                ),
            ),
        ]

    def finish(self, run: Run, at: float, clock: Clock) -> Lines:
        return []


class HFTrainer(Framework):
    name = "hf_trainer"
    script = "run_clm.py"
    loop_frames = (
        '{p}  File "/workspace/run_clm.py", line 641, in <module>',
        "{p}    main()",
        '{p}  File "/workspace/run_clm.py", line 589, in main',
        "{p}    train_result = trainer.train(resume_from_checkpoint=checkpoint)",
        '{p}  File "/usr/local/lib/python3.10/dist-packages/transformers/trainer.py", line 2123, '
        "in train",
        "{p}    return inner_training_loop(",
        '{p}  File "/usr/local/lib/python3.10/dist-packages/transformers/trainer.py", line 2481, '
        "in _inner_training_loop",
        "{p}    tr_loss_step = self.training_step(model, inputs, num_items_in_batch)",
    )

    def startup(self, run: Run, clock: Clock) -> Lines:
        spec = run.job.spec
        texts = [
            "***** Running training *****",
            f"  Num examples = {spec.total_steps * spec.global_batch:,}",
            "  Num Epochs = 1",
            "  Instantaneous batch size per device = "
            f"{max(1, spec.global_batch // run.world_size)}",
            f"  Total train batch size (w. parallel, distributed & accumulation) = "
            f"{spec.global_batch:,}",
            "  Gradient Accumulation steps = 1",
            f"  Total optimization steps = {spec.total_steps:,}",
            "  Number of trainable parameters = 7,241,732,096",
        ]
        t = np.full(len(texts), run.train_start - 0.5)
        first = meter(run.first_step, spec.total_steps, 0.0, None)
        return [*zip(t.tolist(), texts, strict=True), (run.train_start - 0.4, first)]

    def progress(self, run: Run, clock: Clock, rng: np.random.Generator) -> Lines:
        spec = run.job.spec
        sched = run.schedule
        out: Lines = []
        rate = 1.0 / spec.step_s
        start = run.train_start
        for n, end, took in zip(
            sched.steps.tolist(), sched.ends.tolist(), sched.durations.tolist(), strict=True
        ):
            rate = 0.7 * rate + 0.3 / took
            out.append((end, meter(n, spec.total_steps, end - start, rate)))
        steps, ends, _ = logged(run)
        loss = losses(spec, steps, rng)
        lr = learning_rates(spec, steps)
        grad = np.abs(rng.normal(1.0, 0.3, steps.size)) + 0.05
        for i in range(steps.size):
            epoch = round(float(steps[i]) / spec.total_steps, 4)
            out.append(
                (
                    float(ends[i]) + 0.002,
                    f"{{'loss': {round(float(loss[i]), 4)!r}, 'grad_norm': "
                    f"{round(float(grad[i]), 7)!r}, 'learning_rate': {float(f'{lr[i]:.4g}')!r}, "
                    f"'epoch': {epoch!r}}}",
                )
            )
        return out

    def pause(self, run: Run, pause: Pause, clock: Clock, rng: np.random.Generator) -> Lines:
        spec = run.job.spec
        if pause.kind == "eval":
            length = pause.end - pause.start
            batches = int(rng.integers(20, 80))
            times = pause.start + np.linspace(length / batches, length - 0.5, batches)
            out: Lines = [
                (
                    float(t),
                    meter(i + 1, batches, float(t) - pause.start, (i + 1) / (t - pause.start)),
                )
                for i, t in enumerate(times)
            ]
            loss = float(losses(spec, np.array([pause.step]), rng)[0]) + 0.05
            samples = batches * 8 / length
            out.append(
                (
                    pause.end,
                    f"{{'eval_loss': {round(loss, 4)!r}, 'eval_runtime': {round(length, 4)!r}, "
                    f"'eval_samples_per_second': {round(samples, 3)!r}, 'eval_steps_per_second': "
                    f"{round(batches / length, 3)!r}, 'epoch': "
                    f"{round(pause.step / spec.total_steps, 4)!r}}}",
                )
            )
            return out
        folder = f"/scratch/out/checkpoint-{pause.step}"
        return [
            (pause.start, f"Saving model checkpoint to {folder}"),
            (pause.start + 0.2, f"Configuration saved in {folder}/config.json"),
            (pause.start + 0.2, f"Configuration saved in {folder}/generation_config.json"),
            (
                pause.end,
                "The model is bigger than the maximum size per checkpoint (5GB) and is going to "
                "be split in 4 checkpoint shards. You can find where each parameters has been "
                f"saved in the index located at {folder}/model.safetensors.index.json.",
            ),
        ]

    def finish(self, run: Run, at: float, clock: Clock) -> Lines:
        spec = run.job.spec
        runtime = at - run.train_start
        return [
            (
                at - 1,
                "Training completed. Do not forget to share your model on huggingface.co/models =)",
            ),
            (
                at,
                f"{{'train_runtime': {round(runtime, 4)!r}, 'train_samples_per_second': "
                f"{round(spec.global_batch / spec.step_s, 3)!r}, 'train_steps_per_second': "
                f"{round(1 / spec.step_s, 3)!r}, 'train_loss': 2.2345, 'epoch': 1.0}}",
            ),
        ]


class Lightning(Framework):
    name = "lightning"
    script = "train_lightning.py"
    loop_frames = (
        '{p}  File "/workspace/train_lightning.py", line 98, in <module>',
        "{p}    trainer.fit(model, datamodule=dm)",
        '{p}  File "/usr/local/lib/python3.10/dist-packages/lightning/pytorch/trainer/trainer.py",'
        " line 538, in fit",
        "{p}    call._call_and_handle_interrupt(",
        '{p}  File "/usr/local/lib/python3.10/dist-packages/lightning/pytorch/loops/'
        'training_epoch_loop.py", line 250, in advance',
        "{p}    batch_output = self.automatic_optimization.run(trainer.optimizers[0], batch_idx, "
        "kwargs)",
    )

    def startup(self, run: Run, clock: Clock) -> Lines:
        ws = run.world_size
        texts = [
            "GPU available: True (cuda), used: True",
            "TPU available: False, using: 0 TPU cores",
            "HPU available: False, using: 0 HPUs",
            "-" * 100,
            "distributed_backend=nccl",
            f"All distributed processes registered. Starting with {ws} processes",
            "-" * 100,
            "",
            "  | Name  | Type | Params | Mode ",
            "-----------------------------------------",
            "0 | model | GPT  | 1.3 B  | train",
            "-----------------------------------------",
            "1.3 B     Trainable params",
            "0         Non-trainable params",
            "1.3 B     Total params",
            "5,260.321 Total estimated model params size (MB)",
        ]
        t = spread(run.start, run.train_start, len(texts))
        return list(zip(t.tolist(), texts, strict=True))

    def loss_every(self, spec: TrainSpec) -> int:
        return 1  # the meter's postfix shows the loss at every step

    def _epoch(self, spec: TrainSpec) -> int:
        return max(50, spec.total_steps // 4)

    def progress(self, run: Run, clock: Clock, rng: np.random.Generator) -> Lines:
        spec = run.job.spec
        sched = run.schedule
        per_epoch = self._epoch(spec)
        loss = losses(spec, sched.steps, rng)
        out: Lines = []
        rate = 1.0 / spec.step_s
        start = run.train_start
        for i, (n, end, took) in enumerate(
            zip(sched.steps.tolist(), sched.ends.tolist(), sched.durations.tolist(), strict=True)
        ):
            rate = 0.7 * rate + 0.3 / took
            epoch, within = divmod(n - 1, per_epoch)
            out.append(
                (
                    end,
                    meter(
                        within + 1,
                        per_epoch,
                        end - start,
                        rate,
                        prefix=f"Epoch {epoch}",
                        postfix=f"v_num={run.attempt}, train_loss={loss[i]:.3f}",
                        inverse=False,
                    ),
                )
            )
        return out

    def pause(self, run: Run, pause: Pause, clock: Clock, rng: np.random.Generator) -> Lines:
        spec = run.job.spec
        if pause.kind == "eval":
            length = pause.end - pause.start
            batches = int(rng.integers(10, 50))
            times = pause.start + np.linspace(length / batches, length - 0.5, batches)
            return [(pause.start, "Validation: |          | 0/? [00:00<?, ?it/s]")] + [
                (
                    float(t),
                    meter(
                        i + 1,
                        batches,
                        float(t) - pause.start,
                        (i + 1) / (t - pause.start),
                        prefix="Validation DataLoader 0",
                        inverse=False,
                    ),
                )
                for i, t in enumerate(times)
            ]
        loss = float(losses(spec, np.array([pause.step]), rng)[0]) + 0.05
        epoch = (pause.step - 1) // self._epoch(spec)
        return [
            (
                pause.end,
                f"Epoch {epoch}, global step {pause.step}: 'val_loss' reached {loss:.5f} (best "
                f"{loss:.5f}), saving model to '/scratch/ckpt/epoch={epoch}-step={pause.step}.ckpt'"
                " as top 1",
            )
        ]

    def finish(self, run: Run, at: float, clock: Clock) -> Lines:
        return [(at, f"`Trainer.fit` stopped: `max_steps={run.job.spec.total_steps}` reached.")]


FRAMEWORK_NAMES = ("megatron", "torchtitan", "deepspeed", "hf_trainer", "lightning")


def framework(name: str, colour: bool = False) -> Framework:
    """The formatter for framework ``name`` (torchtitan may colour its progress lines)."""
    if name == "megatron":
        return Megatron()
    if name == "torchtitan":
        return Torchtitan(colour)
    if name == "deepspeed":
        return DeepSpeed()
    if name == "hf_trainer":
        return HFTrainer()
    if name == "lightning":
        return Lightning()
    raise ValueError(f"unknown framework {name!r} (known: {', '.join(FRAMEWORK_NAMES)})")
