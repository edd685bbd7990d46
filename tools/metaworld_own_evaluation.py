"""A trained run scored by Meta-World's own ``metalearning_evaluation``, with both tallies of the same episodes.

Meta-World+ (rainx0r/metaworld-algorithms) scores its meta-learners with Meta-World 3.1.1's
``metaworld.evaluation.metalearning_evaluation``: per round, every env of the test vector env (ML10: 20 envs,
4 per test class, each on its own goal) adapts for ``--adaptation-episodes`` episodes, then ``evaluation()``
runs the adapted policy's mode, each episode ended at success, and counts for each class the first 3 episodes
to *end* across its envs (Meta-World PR #577). A goal solved in under a third of the horizon ends three
episodes before a failing goal ends one, so it fills its class's 3 slots alone.

This script runs that function itself on a run's ``policy.th`` (MAML-TRPO: the inner step of the run's
config on the adaptation episodes, then the adapted mean action; RL²: the trial in the GRU's state, then its
mean action from the state the trial reached), through a thin recorder of the vector env's steps. It prints
Meta-World's figure, the recorder's replay of Meta-World's tally (which must equal it), and the per-goal
figure of the same episodes: each goal's first evaluation episode (for MAML the mode is deterministic, so all its episodes are alike; a
goal whose first episode had not ended when Meta-World's loop stopped is not counted, and said so), the mean over
the goals of a class, then over the classes, which is how test.py counts.

    python tools/metaworld_own_evaluation.py docs/runs/metaworld-ml10/maml-trpo/seed-5 --seed 6
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gymnasium as gym  # noqa: E402

import maml_rl.envs.metaworld  # noqa: E402,F401  (its weld shim for MuJoCo >= 3.17)
from maml_rl.app.evaluation import read_policy  # noqa: E402
from maml_rl.app.config_files import build_env, load_config  # noqa: E402
from maml_rl.data.baseline import LinearFeatureBaseline, fit_advantages  # noqa: E402
from maml_rl.data.episodes import BatchEpisodes  # noqa: E402
from maml_rl.metalearners import make_policy  # noqa: E402
from maml_rl.metalearners.gradient.adaptation import InnerLoop  # noqa: E402
from maml_rl.policies.policy import expand_params, meta_parameters  # noqa: E402
from maml_rl.policies.recurrent import rl2_inputs  # noqa: E402
from maml_rl.samplers.rollout.noise import actions_from_noise  # noqa: E402

import metaworld.evaluation as mw_evaluation  # noqa: E402


class Recorder:
    """Meta-World's vector env as it is, recording the order in which evaluation episodes end and their success.

    ``rounds[r]`` lists ``(env, success)`` for every evaluation episode of round ``r`` that ended, in the order
    Meta-World's loop sees them (step by step, env index within a step)."""

    def __init__(self, envs, num_rounds: int | None = None) -> None:
        self.envs = envs
        self.num_rounds = num_rounds
        self.start = time.perf_counter()
        self.rounds: list[list[tuple[int, bool]]] = []
        self.evaluating = False
        self.last: tuple[np.ndarray, np.ndarray] | None = None  # the last step's rewards and episode ends

    def __getattr__(self, name):
        return getattr(self.envs, name)

    def call(self, name, *args, **kwargs):
        out = self.envs.call(name, *args, **kwargs)
        if name == "sample_tasks":
            if self.num_rounds is not None:  # progress: a round adapts for minutes
                print(f"round {len(self.rounds) + 1} of {self.num_rounds} "
                      f"({time.perf_counter() - self.start:.0f} s)", file=sys.stderr, flush=True)
            self.rounds.append([])
        elif name == "toggle_terminate_on_success":
            # evaluation() turns it on for its episodes; metalearning_evaluation turns it off to adapt.
            self.evaluating = bool(args[0])
        return out

    def step(self, actions):
        out = self.envs.step(actions)
        _, rewards, terminations, truncations, infos = out
        self.last = (np.asarray(rewards, dtype=np.float64), np.logical_or(terminations, truncations))
        if self.evaluating:
            for i in np.flatnonzero(np.logical_or(terminations, truncations)):
                self.rounds[-1].append((int(i), bool(infos["final_info"]["success"][i])))
        return out


def metaworld_tally(ends: list[tuple[int, bool]], task_names: list[str], episodes: int = 3) -> dict[str, float]:
    """Meta-World 3.1.1's ``evaluation()`` count for one round: per class, the successes among the first
    ``episodes`` episodes of its envs to end, over ``episodes``."""
    counted = {name: 0 for name in task_names}
    successes = {name: 0 for name in task_names}
    for env, success in ends:
        name = task_names[env]
        counted[name] += 1
        if counted[name] <= episodes:
            successes[name] += int(success)
    return {name: successes[name] / episodes for name in successes}


def per_goal_tally(ends: list[tuple[int, bool]], task_names: list[str]) -> tuple[dict[str, list[float]], list[int]]:
    """Per class, each of its envs' (goals') first evaluation episode: success 1.0 or 0.0; and the envs whose
    first evaluation episode had not ended when Meta-World's loop stopped (every class had its 3 episodes), which
    are not counted: success would have ended them, but they could still have succeeded later."""
    first: dict[int, bool] = {}
    for env, success in ends:
        first.setdefault(env, success)
    out: dict[str, list[float]] = {name: [] for name in task_names}
    for env, success in sorted(first.items()):
        out[task_names[env]].append(float(success))
    return out, sorted(set(range(len(task_names))) - set(first))


class MAMLAgent:
    """MAML-TRPO's evaluation in Meta-World's agent protocol: sampled actions of the meta-policy while
    adapting, the run's inner loop (baseline fit, GAE, one step per task) on each env's episodes, then the
    adapted policy's mean action."""

    def __init__(self, policy, config: dict, num_envs: int, generator: torch.Generator) -> None:
        self.policy = policy
        self.inner_loop = InnerLoop(config["fast-lr"], config["num-steps"], config["loss-averaging"])
        self.gamma, self.gae_lambda = config["gamma"], config["gae-lambda"]
        self.num_envs = num_envs
        self.generator = generator
        self.own = {name: p.detach() for name, p in meta_parameters(policy)}

    def init(self) -> None:
        self.params = expand_params(self.own, self.num_envs)
        self.steps: list[list[tuple]] = [[] for _ in range(self.num_envs)]  # the open episode of each env
        self.episodes: list[list[list[tuple]]] = [[] for _ in range(self.num_envs)]

    def _distribution(self, observations: np.ndarray):
        obs = torch.tensor(observations, dtype=torch.float32).view(self.num_envs, 1, -1)
        with torch.no_grad():
            return self.policy(obs, params=self.params)

    def adapt_action(self, observations: np.ndarray):
        distribution = self._distribution(observations)
        noise = torch.randn(distribution.batch_shape + distribution.event_shape, generator=self.generator)
        return actions_from_noise(distribution, noise, None, "sample").numpy().astype(np.float64), {}

    def step(self, timestep) -> None:
        for i in range(self.num_envs):
            self.steps[i].append((timestep.observation[i], timestep.action[i], float(timestep.reward[i])))
            if timestep.terminated[i] or timestep.truncated[i]:
                self.episodes[i].append(self.steps[i])
                self.steps[i] = []

    def adapt(self) -> None:
        batches = []
        for i in range(self.num_envs):
            episodes = self.episodes[i]
            horizon = max(len(e) for e in episodes)
            obs = np.zeros((horizon, len(episodes), len(episodes[0][0][0])))
            act = np.zeros((horizon, len(episodes), len(episodes[0][0][1])))
            rew = np.zeros((horizon, len(episodes)))
            for b, episode in enumerate(episodes):
                for t, (o, a, r) in enumerate(episode):
                    obs[t, b], act[t, b], rew[t, b] = o, a, r
            batches.append(BatchEpisodes(obs, act, rew, [len(e) for e in episodes], gamma=self.gamma))
        fit_advantages(batches, LinearFeatureBaseline(batches[0].observations.shape[-1]),
                       gae_lambda=self.gae_lambda, averaging=self.inner_loop.averaging)
        self.params = self.inner_loop.sampling_step(self.policy, batches, None)

    def eval_action(self, observations: np.ndarray) -> np.ndarray:
        distribution = self._distribution(observations)
        return actions_from_noise(distribution, torch.zeros(1), None, "mean").numpy().astype(np.float64)

    def reset(self, env_mask: np.ndarray) -> None:
        pass


class RL2Agent:
    """RL²'s evaluation in Meta-World's agent protocol: one trial of sampled actions in the GRU's state, then
    the mean action from the state the trial reached. The policy's input is test.py's: the previous action,
    ``reward-scale`` times the previous reward and the done flag (zero at the trial's start; with
    ``trial-inputs: rl2-autoreset`` zero after every episode's end), read from the recorder, since Meta-World
    gives the agent only observations while it evaluates."""

    def __init__(self, policy, config: dict, recorder: Recorder, generator: torch.Generator) -> None:
        self.policy = policy
        self.recorder = recorder
        self.num_envs = recorder.num_envs
        self.reward_scale = config["reward-scale"]
        self.zero_after_done = config.get("trial-inputs", "rl2") == "rl2-autoreset"
        self.generator = generator

    def init(self) -> None:
        with torch.no_grad():
            self.state = self.policy.initial_state(self.num_envs).to(torch.float32)
        self.previous_actions: np.ndarray | None = None  # the trial's start: no previous step

    def _act(self, observations: np.ndarray, mode: str) -> np.ndarray:
        obs = torch.tensor(observations, dtype=torch.float32)
        if self.previous_actions is None:
            actions = torch.zeros(self.num_envs, self.policy.output_size)
            rewards, dones = torch.zeros(self.num_envs), torch.zeros(self.num_envs)
        else:
            rewards, dones = (torch.tensor(v, dtype=torch.float32) for v in self.recorder.last)
            actions = torch.tensor(self.previous_actions, dtype=torch.float32)
        inputs = rl2_inputs(obs, actions, rewards, dones, None, self.reward_scale, self.zero_after_done)
        with torch.no_grad():
            distribution, self.state = self.policy.step(inputs, self.state)
            noise = (torch.randn(distribution.batch_shape + distribution.event_shape, generator=self.generator)
                     if mode == "sample" else torch.zeros(1))
            acted = actions_from_noise(distribution, noise, None, mode).numpy()
        self.previous_actions = acted
        return acted.astype(np.float64)

    def adapt_action(self, observations: np.ndarray):
        return self._act(observations, "sample"), {}

    def step(self, timestep) -> None:
        pass  # the recorder holds the step's reward and done flag

    def adapt(self) -> None:
        pass  # the trial's state is the adaptation

    def eval_action(self, observations: np.ndarray) -> np.ndarray:
        return self._act(observations, "mean")

    def reset(self, env_mask: np.ndarray) -> None:
        pass  # the state carries on from the trial, as in test.py


def make_agent(config: dict, policy, recorder: Recorder, seed: int):
    generator = torch.Generator().manual_seed(seed)
    if config["algorithm"] in ("maml-trpo", "promp"):
        return MAMLAgent(policy, config, recorder.num_envs, generator)
    if config["algorithm"] == "rl2-ppo":
        return RL2Agent(policy, config, recorder, generator)
    raise SystemExit(f"{config['algorithm']}: this script evaluates maml-trpo, promp and rl2-ppo runs")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", help="run folder (config.json, policy.th)")
    parser.add_argument("--seed", type=int, default=1, help="seed of Meta-World's test envs and of the actions")
    parser.add_argument("--num-evals", type=int, default=None,
                        help="rounds (default: Meta-World+'s, classes x 40 goals / meta-batch)")
    parser.add_argument("--meta-batch-size", type=int, default=20, help="envs, a multiple of the test classes")
    parser.add_argument("--adaptation-episodes", type=int, default=10)
    parser.add_argument("--evaluation-episodes", type=int, default=3)
    args = parser.parse_args(argv)

    run = Path(args.run)
    config = load_config(run / "config.json")
    kwargs = config["env-kwargs"]
    env = build_env(config)
    benchmark = env.unwrapped.benchmark
    policy = make_policy(config, env)
    env.close()
    policy.load_state_dict(read_policy(str(run / "policy.th")))
    policy.eval()
    make_kwargs = dict(seed=args.seed, vector_strategy="sync", meta_batch_size=args.meta_batch_size,
                       total_tasks_per_cls=40, terminate_on_success=True,
                       reward_function_version=kwargs.get("reward_function_version", "v2"))
    if benchmark == "ML1":
        make_kwargs["env_name"] = env.unwrapped.env_name
    envs = Recorder(gym.make_vec(f"Meta-World/{benchmark}-test", **make_kwargs))
    task_names = mw_evaluation._get_task_names(envs)
    classes = sorted(set(task_names))
    num_evals = args.num_evals or len(classes) * 40 // args.meta_batch_size
    envs.num_rounds = num_evals
    agent = make_agent(config, policy, envs, args.seed)
    start = time.perf_counter()
    theirs, _, per_class = mw_evaluation.metalearning_evaluation(
        agent, envs, num_evals=num_evals, adaptation_episodes=args.adaptation_episodes,
        evaluation_episodes=args.evaluation_episodes)
    envs.close()

    replay = [metaworld_tally(ends, task_names, args.evaluation_episodes) for ends in envs.rounds]
    replayed = float(np.mean([np.mean(list(r.values())) for r in replay]))
    goals = {c: [] for c in classes}
    unfinished = 0
    for ends in envs.rounds:
        counted, left = per_goal_tally(ends, task_names)
        unfinished += len(left)
        for c, values in counted.items():
            goals[c].extend(values)
    print(f"{run}: Meta-World {benchmark} test, seed {args.seed}, {num_evals} rounds x {envs.num_envs} envs, "
          f"{args.adaptation_episodes} adaptation + {args.evaluation_episodes} evaluation episodes "
          f"({time.perf_counter() - start:.0f} s)")
    print(f"{'class':<18}| goals | Meta-World's tally | per goal")
    for c in classes:
        mine = float(np.mean([r[c] for r in replay]))
        print(f"{c:<18}| {len(goals[c]):5d} | {per_class[c]:17.1%} | {np.mean(goals[c]) if goals[c] else np.nan:7.1%}"
              + ("" if np.isclose(mine, per_class[c]) else f"  (replay {mine:.1%})"))
    print(f"{'mean over classes':<18}|       | {theirs:17.1%} | {np.mean([np.mean(goals[c]) for c in classes]):7.1%}")
    if unfinished:
        print(f"{unfinished} goal(s) not counted per goal: their first evaluation episode had not ended when "
              "Meta-World's loop stopped")
    print(f"replay of Meta-World's tally: {replayed:.1%} ({'equal' if np.isclose(replayed, theirs) else 'DIFFERS'})")


if __name__ == "__main__":
    main()
