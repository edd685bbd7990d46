"""PEARL's configuration keys, beside its code; ``DEFAULTS`` holds them and the shared ones."""

from __future__ import annotations

from maml_rl.config.declaration import _hidden_sizes
from maml_rl.config.hyperparameters import (BOOLEAN, POSITIVE_INT, SHARED_KEYS, Check, Hyperparameter, defaults_of,
                                             integer, number)

__all__ = ["DEFAULTS", "PEARL_KEYS"]

#: The keys of PEARL (:class:`~maml_rl.metalearners.PEARL`). Defaults are oyster's (katerakelly/oyster
#: 44e20fd, configs/default.py); docs/training.md, "PEARL", lists where this package departs from it.
PEARL_KEYS: tuple[Hyperparameter, ...] = (
    Hyperparameter("latent-size", int, 5, POSITIVE_INT, "Size of the task latent z."),
    Hyperparameter("context-hidden-sizes", list, [200, 200, 200],
                   Check(_hidden_sizes, "a list of integers >= 1, e.g. [200, 200, 200]"),
                   "Widths of the context encoder's hidden layers."),
    Hyperparameter("num-train-tasks", int, 100, POSITIVE_INT,
                   "Training tasks, drawn once from the run seed; every iteration collects meta-batch-size of them "
                   "and trains on all.", argument="num_train_tasks"),
    Hyperparameter("num-initial-steps", int, 2000, integer(0),
                   "Transitions collected for every training task before training, with z from the prior.",
                   argument="num_initial_steps"),
    Hyperparameter("num-steps-prior", int, 400, integer(0),
                   "Transitions collected per sampled task and iteration with z from the prior (both replays).",
                   argument="num_steps_prior"),
    Hyperparameter("num-steps-posterior", int, 0, integer(0),
                   "Transitions collected per sampled task and iteration with z from the posterior (both replays).",
                   argument="num_steps_posterior"),
    Hyperparameter("num-extra-rl-steps-posterior", int, 400, integer(0),
                   "Transitions collected per sampled task and iteration with z from the posterior, for the "
                   "actor-critic's replay only.", argument="num_extra_rl_steps_posterior"),
    Hyperparameter("num-train-steps-per-itr", int, 2000, POSITIVE_INT, "Gradient steps per iteration.",
                   argument="num_train_steps"),
    Hyperparameter("tasks-per-update", int, 16, POSITIVE_INT,
                   "Training tasks in each gradient step (oyster's meta_batch), drawn with replacement.",
                   argument="tasks_per_update"),
    Hyperparameter("sac-batch-size", int, 256, POSITIVE_INT, "Transitions per task in each actor-critic batch.",
                   argument="sac_batch_size"),
    Hyperparameter("embedding-batch-size", int, 64, POSITIVE_INT,
                   "Transitions per task in each context batch.", argument="embedding_batch_size"),
    Hyperparameter("replay-capacity", int, 1_000_000, POSITIVE_INT,
                   "Most transitions each training task's replay keeps (the oldest go first).",
                   argument="replay_capacity"),
    Hyperparameter("policy-lr", float, 3.0e-4, number(0.0, open_low=True), "Adam's step of the actor.",
                   argument="policy_lr"),
    Hyperparameter("qf-lr", float, 3.0e-4, number(0.0, open_low=True), "Adam's step of the two Q networks.",
                   argument="qf_lr"),
    Hyperparameter("vf-lr", float, 3.0e-4, number(0.0, open_low=True), "Adam's step of the value network.",
                   argument="vf_lr"),
    Hyperparameter("context-lr", float, 3.0e-4, number(0.0, open_low=True), "Adam's step of the encoder.",
                   argument="context_lr"),
    Hyperparameter("kl-lambda", float, 0.1, number(0.0), "Weight of the KL of q(z|c) to the prior.",
                   argument="kl_lambda"),
    Hyperparameter("sac-reward-scale", float, 5.0, number(0.0, open_low=True),
                   "Factor of the rewards in the Bellman targets (the entropy's weight is its inverse).",
                   argument="sac_reward_scale"),
    Hyperparameter("soft-target-tau", float, 0.005, number(0.0, 1.0, open_low=True),
                   "Polyak step of the target value network.", argument="soft_target_tau"),
    Hyperparameter("policy-mean-reg", float, 1.0e-3, number(0.0), "Weight of the actor's mean^2 penalty.",
                   argument="policy_mean_reg"),
    Hyperparameter("policy-std-reg", float, 1.0e-3, number(0.0), "Weight of the actor's log-std^2 penalty.",
                   argument="policy_std_reg"),
    Hyperparameter("use-information-bottleneck", bool, True, BOOLEAN,
                   "A probabilistic z (product of Gaussians, KL to the prior); false: a deterministic one.",
                   ),
    Hyperparameter("use-next-obs-in-context", bool, False, BOOLEAN,
                   "Context transitions carry the next observation (for tasks that differ in dynamics).",
                   ),
    Hyperparameter("num-exp-traj-eval", int, 1, POSITIVE_INT,
                   "Evaluation: trajectories collected before z comes from the posterior of what they saw.",
                   argument="num_exp_traj_eval"),
    Hyperparameter("eval-trajectories", int, 3, POSITIVE_INT,
                   "Evaluation: trajectories per task, the posterior updated after each (oyster: "
                   "num_steps_per_eval / max_path_length).", argument="eval_trajectories"),
)

#: Every default of PEARL's keys and the shared ones (``DEFAULTS.num_train_tasks``).
DEFAULTS = defaults_of(SHARED_KEYS, PEARL_KEYS, name="PEARLDefaults", module=__name__)
