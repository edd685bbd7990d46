"""``python -m maml_rl.config --markdown``: the key reference of docs/training.md."""

from maml_rl.config.loading import main

main()
