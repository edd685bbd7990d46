"""The diagnostic scripts of tools/ on small real runs: they must see what the run saw."""

from __future__ import annotations

import json
import re

import pytest

from helpers.runs import read_metrics
from helpers.scripts import load_tool, train


def test_outer_steps_trace_replays_the_runs_next_iteration(tmp_path, capsys, small_config):
    config = small_config(tmp_path, **{"algorithm": "promp", "num-batches": 3, "outer-steps": 3})
    for name, batches in (("whole", "3"), ("two", "2")):
        train.main(["--config", str(config), "--output-folder", str(tmp_path / name), "--num-workers", "0",
                    "--seed", "5", "--num-batches", batches])
    capsys.readouterr()
    load_tool("outer_steps_trace").main([str(tmp_path / "two" / "checkpoint.pt"), "--outer-kl-limit", "1e-12"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("iteration 2") and len(lines) == 1 + 3 + 1
    logged = {m[0]: float(m[1]) for m in re.findall(r"(\w+) (\S+)", lines[3].split(": ", 1)[1])}
    row = read_metrics(tmp_path / "whole")[2]
    # Three Adam steps from the checkpoint are the run's third iteration (printed to 4 digits).
    for key in ("loss_before", "loss_after", "inner_kl", "outer_kl", "clip_fraction"):
        assert f"{logged[key]:.4g}" == f"{row[key]:.4g}", key
    assert logged["outer_steps"] == 3 == row["outer_steps"]
    kls = [float(re.search(r"outer_kl (\S+)", line).group(1)) for line in lines[1:4]]
    assert 0 < kls[0] and kls[0] != kls[2]
    assert lines[4].startswith("3 Adam step(s), outer-kl-limit 1e-12") and lines[4].endswith("outer_steps 0")


def test_step_audit_measures_updates_on_a_fixed_evaluation_set(tmp_path, capsys, small_config):
    config = small_config(tmp_path, **{"num-batches": 1})
    train.main(["--config", str(config), "--output-folder", str(tmp_path / "run"), "--num-workers", "0",
                "--seed", "5"])
    audit = load_tool("step_audit")
    capsys.readouterr()
    for _ in range(2):  # the same seed gives the same figures
        audit.main([str(tmp_path / "run" / "checkpoint.pt"), "--updates", "2", "--meta-batch-size", "2", "3",
                    "--eval-tasks", "2"])
    out = capsys.readouterr().out.splitlines()
    first, second = out[:len(out) // 2], out[len(out) // 2:]
    strip = [re.sub(r"\(\d+ s\)", "", line) for line in first]
    assert strip == [re.sub(r"\(\d+ s\)", "", line) for line in second]
    assert sum(line.startswith("batch    2 update") for line in first) == 2
    assert sum(line.startswith("batch    3 update") for line in first) == 2
    assert re.match(r"meta-batch 3: mean evaluated change [+-]\d", first[-1])
    # Each update starts from the checkpoint, whose evaluated return is printed once.
    assert sum("at the checkpoint" in line for line in first) == 1


def test_step_audit_set_changes_the_meta_update_only(tmp_path, capsys, small_config):
    config = small_config(tmp_path, **{"num-batches": 1})
    train.main(["--config", str(config), "--output-folder", str(tmp_path / "run"), "--num-workers", "0",
                "--seed", "5"])
    audit = load_tool("step_audit")
    checkpoint = tmp_path / "run" / "checkpoint.pt"
    _, config, _, _, learner = audit.load_run(checkpoint, [("max-kl", 0.005)])
    assert config["max-kl"] == 0.005 and learner.max_kl == 0.005
    own = json.loads((tmp_path / "run" / "config.json").read_text())["max-kl"]
    assert own != 0.005
    capsys.readouterr()
    # Setting the checkpoint's own value changes nothing but the header; a smaller step changes the figures.
    runs = []
    for extra in ([], ["--set", f"max-kl={own}"], ["--set", "max-kl=0.0001"]):
        audit.main([str(checkpoint), "--updates", "2", "--meta-batch-size", "2", "--eval-tasks", "2", *extra])
        runs.append(capsys.readouterr().out.splitlines())
    plain, same, small = runs
    assert same[0] == plain[0] + f", max-kl={own}" and small[0].endswith(", max-kl=0.0001")
    strip = lambda lines: [re.sub(r"\(\d+ s\)", "", line) for line in lines[1:]]  # noqa: E731
    assert strip(same) == strip(plain)
    assert strip(small)[0] == strip(plain)[0]  # the evaluation at the checkpoint does not depend on the step
    assert strip(small)[1:] != strip(plain)[1:]
    with pytest.raises(ValueError, match="max-kll"):
        audit.main([str(checkpoint), "--set", "max-kll=0.1"])
