from medic.simulate.tqdm_meter import bar, interval, meter


def test_meter_reads_like_tqdm() -> None:
    assert meter(120, 1000, 120.0, 1.0) == " 12%|█▏        | 120/1000 [02:00<14:40,  1.00it/s]"
    assert meter(120, 1000, 240.0, 0.5) == " 12%|█▏        | 120/1000 [04:00<29:20,  2.00s/it]"
    assert meter(0, 10178, 0.0, None) == "  0%|          | 0/10178 [00:00<?, ?it/s]"


def test_lightning_style_prefix_postfix_and_no_inverse_rate() -> None:
    line = meter(
        120, 1000, 120.0, 1.0, prefix="Epoch 0", postfix="v_num=0, train_loss=2.340", inverse=False
    )
    expected = (
        "Epoch 0:  12%|█▏        | 120/1000 [02:00<14:40,  1.00it/s, v_num=0, train_loss=2.340]"
    )
    assert line == expected
    slow = meter(10, 20, 1.25, 0.5, prefix="Validation DataLoader 0", inverse=False)
    assert slow.endswith(" 0.50it/s]")


def test_bar_and_interval_edges() -> None:
    assert bar(0.0) == " " * 10
    assert bar(1.0) == "█" * 10
    assert bar(0.5) == "█████     "
    assert interval(59) == "00:59"
    assert interval(3600 + 61) == "1:01:01"
