"""Configuration: every key declared once (:mod:`.hyperparameters`, which every
layer reads its defaults from) and config files read, checked against the
table and each meta-learner's keys (:mod:`.loading`).

``python -m maml_rl.config --markdown`` prints the key reference of docs/training.md.
"""
