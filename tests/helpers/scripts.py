"""train.py and test.py loaded as modules, for tests that call their ``main(argv)``."""

import importlib.util

from helpers import ROOT


def load_script(name, folder=ROOT):
    # Not imported as "test": that is the name of the standard library's test package.
    spec = importlib.util.spec_from_file_location(f"maml_rl_script_{name}", folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


train = load_script("train")
evaluate = load_script("test")


def load_tool(name):
    """A script of tools/ as a module (they import one another by file name)."""
    import sys

    tools = ROOT / "tools"
    if str(tools) not in sys.path:
        sys.path.insert(0, str(tools))
    return load_script(name, tools)
