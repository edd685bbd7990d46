"""The meta-learner seam: a new algorithm is a subclass of ``MetaLearner`` in one table entry,
and ``train.py`` runs it and checkpoints its state with no change (that it resumes exactly, as every
learner of the registry: test_learner_contract.py)."""

from __future__ import annotations

import pytest

from maml_rl.app.config_files import ConfigError
from maml_rl.metalearners import METALEARNERS, GradientMetaLearner, MAMLTRPO, MetaLearner, ProMP, RL2PPO

from helpers import learners
from helpers.learners import RandomSearch
from helpers.runs import read_learner_state
from helpers.scripts import evaluate


def test_every_shipped_learner_is_a_metalearner():
    assert all(issubclass(learner, MetaLearner) for learner in METALEARNERS.values())
    assert issubclass(MAMLTRPO, GradientMetaLearner) and issubclass(ProMP, GradientMetaLearner)
    assert not issubclass(RL2PPO, GradientMetaLearner) and RL2PPO.recurrent and not MAMLTRPO.recurrent


def test_a_new_learner_trains_and_checkpoints_its_own_state_through_train_py(monkeypatch, reference_runs):
    learners.register(monkeypatch)
    assert read_learner_state(reference_runs(learners.NAME)) == {"updates": reference_runs.num_batches(learners.NAME)}


def test_a_learner_without_state_refuses_one():
    learner = MAMLTRPO.__new__(MAMLTRPO)
    assert learner.state_dict() == {}
    with pytest.raises(ValueError, match="keeps no state"):
        learner.load_state_dict({"moments": 1})


class Unevaluated(RandomSearch):
    """The same learner without an evaluation protocol."""

    evaluate = MetaLearner.evaluate


def test_test_py_evaluates_through_the_learner_and_refuses_one_without_a_protocol(monkeypatch, tmp_path,
                                                                                  reference_runs):
    learners.register(monkeypatch)
    run = reference_runs(learners.NAME)
    argv = ["--config", str(run / "config.json"), "--num-batches", "2", "--meta-batch-size", "3",
            "--num-workers", "0", "--output", str(tmp_path / "results.npz")]
    learners.register(monkeypatch, Unevaluated)
    with pytest.raises(ConfigError, match="Unevaluated .*defines no evaluate"):
        evaluate.main(argv)
    assert not (tmp_path / "results.npz").exists()
    learners.register(monkeypatch)
    results = evaluate.main(argv)
    assert results["returns_per_step"].shape[:2] == (1, 6)  # one stage, 2 batches x 3 tasks
