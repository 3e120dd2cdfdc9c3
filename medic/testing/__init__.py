"""Public fakes for tests of code built on medic, as httpx ships ``MockTransport``.

``medic.testing.victorialogs.VictoriaLogsServer`` is a local VictoriaLogs over real sockets that
streams, compresses, delays, loses and withholds as the real server does.

``medic.testing.slurm.FakeSlurm`` is an in-memory Slurm behind the executor seam that counts
the commands that changed it.
"""
