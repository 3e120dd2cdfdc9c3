#!/usr/bin/env bash
# A stand-in for a training job, to watch medic work on a real Slurm without GPUs (see
# docs/quickstart.md). It prints a Megatron-LM style progress line every second, then fails the
# way FAULT says:
#   FAULT=hang  stops printing and waits for ever, as a rank stuck in a collective does (default)
#   FAULT=oom   dies of a CUDA out-of-memory error, as PyTorch reports it
#   FAULT=none  finishes normally
# Submit it with sbatch --output=<dir>/slurm-%j.out examples/jobs/demo-training.sh.
#SBATCH --job-name=medic-demo
#SBATCH --nodes=1
set -u
steps=${STEPS:-30}
for ((i = 1; i <= steps; i++)); do
  printf ' [%s] iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (ms): %.1f | throughput per GPU (TFLOP/s/GPU): %.1f | learning rate: 3.000000E-04 | global batch size:   256 | lm loss: %.6E | loss scale: 1.0 | grad norm: 0.812 | number of skipped iterations:   0 | number of nan iterations:   0 |\n' \
    "$(date '+%Y-%m-%d %H:%M:%S')" "$i" 100000 $((i * 256)) 1003.7 181.9 "$(awk "BEGIN { print 7.5 / (1 + $i / 50) }")"
  sleep 1
done
case "${FAULT:-hang}" in
  hang)
    sleep infinity
    ;;
  oom)
    echo "[rank0]: Traceback (most recent call last):"
    echo '[rank0]:   File "/opt/train/pretrain_gpt.py", line 221, in forward_step'
    echo "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which 2.31 GiB is free. Of the allocated memory 71.20 GiB is allocated by PyTorch, and 3.02 GiB is reserved by PyTorch but unallocated."
    exit 1
    ;;
esac
echo " [after training is done] datetime: $(date '+%Y-%m-%d %H:%M:%S')"
