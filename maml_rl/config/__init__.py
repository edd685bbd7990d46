"""Configuration keys: what a key is (:mod:`.declaration`) and the keys every algorithm shares
(:mod:`.hyperparameters`, whose defaults every layer reads). Each algorithm declares its own keys beside its
code; config files are read and checked against them by :mod:`maml_rl.app.config_files`.

``python -m maml_rl.app.config_files --markdown`` prints the key reference of docs/training.md.
"""
