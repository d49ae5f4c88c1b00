"""The scripts of deploy/ (run there as programs, not a package) loaded as modules, for the
tests of their parts."""

import importlib.util
from pathlib import Path
from types import ModuleType

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"


def load(name: str) -> ModuleType:
    """deploy/<name>.py as the module ``name``."""
    spec = importlib.util.spec_from_file_location(name, DEPLOY / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
