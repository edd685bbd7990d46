"""``python -m maml_rl.references``: what it prints and writes, and that a seed fixes it."""

import json

import numpy as np
import pytest

from maml_rl.references import bandit_references, mdp_references
from maml_rl.references.__main__ import main


def test_bandit_command_prints_and_writes_the_summary_and_the_arrays(tmp_path, capsys):
    main(["bandit", "--arms", "3", "--pulls", "12", "--tasks", "4", "--seed", "7", "--output", str(tmp_path / "b")])
    printed = capsys.readouterr().out
    assert all(name in printed for name in ("random", "ucb1", "thompson", "oracle"))
    written = json.loads((tmp_path / "b.json").read_text())
    assert written["command"] == "python -m maml_rl.references bandit --arms 3 --pulls 12 --tasks 4 --seed 7 " \
                                 f"--output {tmp_path / 'b'}"
    assert (written["settings"], written["tasks"], written["seed"]) == ({"arms": 3, "pulls": 12}, 4, 7)
    arrays = np.load(tmp_path / "b.npz")
    expected = bandit_references(3, 12, 4, 7)
    assert np.array_equal(arrays["thompson_arms"], expected["thompson"]["arms"])
    regret = written["algorithms"]["ucb1"]["regret"]["mean"]
    assert regret == pytest.approx(expected["ucb1"]["regret"].sum(axis=1).mean())
    assert len(written["algorithms"]["ucb1"]["cumulative_regret"]) == 12


def test_mdp_command_writes_returns_per_episode(tmp_path, capsys):
    main(["mdp", "--states", "4", "--actions", "2", "--horizon", "3", "--episodes", "5", "--tasks", "3",
          "--seed", "1", "--algorithms", "psrl", "--output", str(tmp_path / "m")])
    assert "psrl" in capsys.readouterr().out
    written = json.loads((tmp_path / "m.json").read_text())
    assert set(written["algorithms"]) == {"psrl", "optimal"}
    returns = mdp_references(4, 2, 3, 5, 3, 1, ["psrl"])["psrl"]["returns"]
    assert written["algorithms"]["psrl"]["return_per_episode"] == pytest.approx(returns.mean(axis=0).tolist())
    assert np.array_equal(np.load(tmp_path / "m.npz")["psrl_returns"], returns)


def test_an_unknown_algorithm_is_refused(capsys):
    with pytest.raises(SystemExit):
        main(["bandit", "--algorithms", "gittins"])
    assert "invalid choice" in capsys.readouterr().err


def test_the_committed_bandit_references_are_reproduced_by_their_seed():
    """docs/runs/references: the first tasks of the committed 500 are drawn and played again alike
    (the bandits' tasks are rows of one uniform draw, so 5 tasks are the first 5 of 500)."""
    from helpers import ROOT

    committed = np.load(ROOT / "docs/runs/references/bandit-k5-n100.npz")
    header = json.loads((ROOT / "docs/runs/references/bandit-k5-n100.json").read_text())
    assert (header["settings"], header["tasks"], header["seed"]) == ({"arms": 5, "pulls": 100}, 500, 100)
    again = bandit_references(5, 100, 5, 100)
    for name in ("random", "ucb1", "thompson", "oracle"):
        assert np.array_equal(committed[f"{name}_arms"][:5], again[name]["arms"]), name
        assert np.array_equal(committed[f"{name}_rewards"][:5], again[name]["rewards"]), name
