"""data.concatenate: a share of the batches trains on pairs joined two by two (Kondo et al. 2021),
so the model writes past data.max_len."""

import numpy as np

from nmt.data.batches import Example
from nmt.training.run_data import concatenated


def test_neighbours_are_joined_with_one_eos_and_their_links_moved():
    eos = 2
    first = Example([10, 11, eos], [20, eos], np.array([[0, 0], [1, 0]]))
    second = Example([12, eos], [21, 22, eos], np.array([[0, 1]]))
    third = Example([13, eos], [23, eos], np.array([[0, 0]]))
    joined = concatenated([first, second, third], frozenset())
    assert [(ex.src, ex.tgt) for ex in joined] == [([10, 11, 12, eos], [20, 21, 22, eos]), ([13, eos], [23, eos])]
    assert joined[0].links.tolist() == [[0, 0], [1, 0], [2, 2]]  # the second pair's link moved past the first's


def test_a_pair_with_a_placeholder_stays_alone():
    eos, placeholder = 2, 4
    numbered = Example([placeholder, eos], [placeholder, eos])
    plain = [Example([10, eos], [20, eos]), Example([11, eos], [21, eos])]
    joined = concatenated([plain[0], numbered, plain[1]], frozenset({placeholder}))
    assert [ex.src for ex in joined] == [[placeholder, eos], [10, 11, eos]]


def test_a_run_trains_with_concatenated_batches(tiny_config, toy_zip, tmp_path):
    from typer.testing import CliRunner

    from nmt.cli import app

    result = CliRunner().invoke(app, ["train", str(tiny_config), "--data", str(toy_zip), "--out", str(tmp_path / "r"),
                                      "--set", "data.concatenate=1.0", "--set", "train.epochs=1", "--quiet"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "r" / "best.pt").is_file()
