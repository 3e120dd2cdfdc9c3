"""Tables: a header naming the columns, then rows of numbers read by column."""

from __future__ import annotations

import polars as pl

from medic.parse.tables import Tables


def frame(*messages: str, who: str = "n1/0") -> pl.DataFrame:
    return pl.DataFrame(
        {
            "_line": pl.Series(range(len(messages)), dtype=pl.UInt32),
            "job_id": ["7"] * len(messages),
            "_who": [who] * len(messages),
            "message": list(messages),
        }
    )


def read(tables: Tables, *messages: str, who: str = "n1/0") -> list[tuple]:
    steps, _ = tables.read(frame(*messages, who=who))
    return list(steps.select("step", "step_time_s").iter_rows())


def test_rows_are_read_by_the_columns_of_their_header() -> None:
    tables = Tables()
    found = read(
        tables,
        "epoch     train_loss  valid_loss  accuracy  time    ",
        "0         0.927637    0.962176    0.941825  1:07:28   ",
        "1         0.783255    #na#        0.877236  00:43     ",
    )
    assert found == [(0, 4048.0), (1, 43.0)]
    # The header is remembered: a later batch's rows are read by it.
    assert read(tables, "2         0.630955    0.643342    0.828430  01:13     ") == [(2, 73.0)]
    # Another process printed no header: its rows are no table's.
    assert read(tables, "3  0.5  0.6  0.7  01:13", who="n2/1") == []


def test_a_row_that_does_not_fit_its_header_is_none_of_its_steps() -> None:
    tables = Tables()
    steps, held = tables.read(
        frame("step  loss  time_ms", "10  2.5  310", "0  0.5", "   1048576  262144  4.77  0")
    )
    assert list(steps.select("step", "step_time_s").iter_rows()) == [(10, 0.31)]
    assert held.to_list() == [0, 1]


def test_a_line_of_words_naming_no_counter_is_no_header() -> None:
    tables = Tables()
    assert read(tables, "size  count  type  time", "1024  256  4  0.5") == []
    assert read(tables, "Saving step checkpoint", "1 2 3") == []
    tables.forget("7")
    assert tables.headers == {}


def test_a_learning_curve_s_header_after_a_comment_sign_or_apart_by_single_spaces() -> None:
    # our values, in the layout of DeePMD-kit's lcurve.out
    commented = "#  step      rmse_val    rmse_trn         lr"
    row = "    100      2.57e+01    2.56e+01    1.0e-03"
    assert read(Tables(), commented, row) == [(100, None)]
    plain = "step rmse_trn rmse_e_trn lr"
    assert read(Tables(), plain, "2000 4.1e-01 2.2e-02 9.5e-04") == [(2000, None)]
    # a counter's word and one more apart by a single space is a sentence, no header
    assert read(Tables(), "Step forward", "3 4") == []
