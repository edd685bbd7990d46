"""The collapse flag of train.py (maml_rl.app.runs.decline) on hand-computed curves, and through a resumed run."""

from __future__ import annotations

import pytest

from maml_rl.app.runs.decline import DeclineMonitor


def feed(monitor, values):
    return [monitor.update(value) for value in values]


def test_share_of_the_gain_lost_by_hand():
    monitor = DeclineMonitor(window=1, alert=0.25)
    out = feed(monitor, [0.0, 4.0, 10.0, 9.0, 7.5, 6.0, 9.9, 2.0])
    lost = [metrics["gain_lost"] for metrics, _ in out]
    assert lost == pytest.approx([0, 0, 0, 0.1, 0.25, 0.4, 0.01, 0.8])
    warnings = [i for i, (_, warning) in enumerate(out) if warning]
    assert warnings == [4, 7]  # at 25%, and again after recovering below 12.5%
    assert "given back 25% of the run's gain since its best, 10.00 at iteration 2" in out[4][1]


def test_moving_mean_and_negative_returns():
    monitor = DeclineMonitor(window=3, alert=0.5)
    out = feed(monitor, [-40.0, -40.0, -40.0, -10.0, -10.0, -10.0, -25.0, -25.0, -25.0])
    means = [metrics["return_after_mean3"] for metrics, _ in out]
    assert means == pytest.approx([-40, -40, -40, -30, -20, -10, -15, -20, -25])
    # first = -40 (the first full window), best = -10: a gain of 30; -25 has given back half of it.
    assert [metrics["gain_lost"] for metrics, _ in out][-1] == pytest.approx(0.5)
    assert [i for i, (_, w) in enumerate(out) if w] == [8]
    assert all(metrics["gain_lost"] == 0 for metrics, _ in out[:3])  # no full window yet


def test_no_gain_nothing_to_lose_and_a_rising_run_is_quiet():
    assert all(m["gain_lost"] == 0 and w is None for m, w in feed(DeclineMonitor(window=2), [5.0, 4.0, 3.0, 2.0]))
    assert all(w is None for _, w in feed(DeclineMonitor(window=2), range(50)))


def test_a_gain_within_the_noise_is_not_a_collapse():
    # window 2: first mean 0.5, best 0.65 ([1, 0.3]); at the end the mean is 0, so gain_lost = 0.65 / 0.15.
    out = feed(DeclineMonitor(window=2, alert=0.25, z=3.0), [0.0, 1.0, 0.0, 1.0, 0.3, 1.0, 0.0, 0.0])
    assert out[-1][0]["gain_lost"] == pytest.approx(0.65 / 0.15)
    # Pooled sd of [1, 0.3] and [0, 0] about their means: sqrt(2 * 0.35**2 / 2) = 0.35, so a window mean's
    # standard error is 0.35 / sqrt(2); the gain 0.15 is far below 3 * sqrt(2) of it.
    assert all(warning is None for _, warning in out)
    # With z = 0 the same curve warns, as every monitor did before the noise test.
    assert [i for i, (_, w) in enumerate(feed(DeclineMonitor(window=2, z=0.0), [0.0, 1.0, 0.0, 1.0, 0.3, 1.0, 0.0, 0.0])) if w] == [6]


def test_a_real_gain_warns_once_the_drop_is_beyond_the_noise():
    out = feed(DeclineMonitor(window=2, alert=0.25, z=3.0), [0.0, 1.0, 0.0, 1.0, 10.0, 11.0, 0.0, 0.0])
    # Iteration 6: mean 5.5 of [11, 0], half the gain of 10 lost, but the pooled sd is sqrt((0.5 + 60.5) / 2):
    # a standard error of 3.9, and 3 * sqrt(2) * 3.9 > 10. Iteration 7: [0, 0], error sqrt(0.5 / 2 / 2) = 0.35.
    assert out[6][0]["gain_lost"] == pytest.approx(0.5) and out[6][1] is None
    assert out[7][0]["gain_lost"] == pytest.approx(1.05) and "given back 105%" in out[7][1]


def test_replay_continues_as_an_uninterrupted_monitor():
    values = [0.0, 3.0, 8.0, 9.0, 5.0, 4.0, 9.5, 1.0, 2.0]
    for cut in range(len(values) + 1):
        whole, resumed = DeclineMonitor(window=2, alert=0.3), DeclineMonitor.replay(values[:cut], window=2, alert=0.3)
        assert feed(whole, values)[cut:] == feed(resumed, values[cut:])


def test_bad_settings():
    with pytest.raises(ValueError):
        DeclineMonitor(window=0)
    with pytest.raises(ValueError):
        DeclineMonitor(alert=0)
    with pytest.raises(ValueError):
        DeclineMonitor(z=-1)
