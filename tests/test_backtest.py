from dataclasses import replace
from pathlib import Path

from medic import schema
from medic.backtest import backtest_path, backtest_recording
from medic.recording import TableFile, open_recording, read_recording, write_recording
from medic.simulate import simulate


def test_a_backtest_streaming_gpu_telemetry_from_disk_matches_one_holding_it(
    tmp_path: Path,
) -> None:
    rec = simulate("xid79_cascade", 3, duration_min=15.0, cluster_nodes=4, job_nodes=2, jobs=1)
    path = write_recording(tmp_path / rec.name, rec)
    held = backtest_recording(read_recording(path))
    gpu = TableFile(path / "gpu.parquet", schema.GPU, batch_rows=1000)
    streamed = backtest_recording(replace(open_recording(path), gpu=gpu))
    as_the_cli_does = backtest_path(path)

    assert held.detections.num_rows > 0 and held.actions.num_rows > 0
    assert held.rows == rec.logs.num_rows + rec.gpu.num_rows + rec.scheduler.num_rows
    for result in (streamed, as_the_cli_does):
        assert result.detections.equals(held.detections)
        assert result.actions.equals(held.actions)
        assert result.rows == held.rows
