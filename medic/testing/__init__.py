"""Public fakes for tests of medic and of what a site builds on it (rules, signatures,
detectors), as httpx ships ``MockTransport``; docs/testing.md shows them at work.

* ``medic.testing.builders``: small hand-made rows, batches and recordings in event time;
* ``medic.testing.clock``: clocks a test moves by hand (``FakeClock``, ``TickingClock``);
* ``medic.testing.slurm``: Slurm as an executor (``FakeSlurm``), as Slurm 22.05's commands
  (``SlurmCommands``, ``SlurmJson``, ``ScriptedRunner``) and as slurmrestd
  (``FakeSlurmrestd``);
* ``medic.testing.nvml``: a fake ``pynvml`` over in-memory GPUs (``FakeNvml``);
* ``medic.testing.dcgm``: dcgm-exporter's pages behind an httpx transport (``DcgmExporter``);
* ``medic.testing.victorialogs``: a local VictoriaLogs over real sockets that streams,
  compresses, delays, loses and withholds as the real server does.
"""
