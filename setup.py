"""The wheel carries the files the CLI runs with besides its code (`lifeguard_cli/resources.py`): they are
copied into `lifeguard_cli/_data` as the package is built. Everything else is in pyproject.toml."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


def _bundled_paths() -> tuple[str, ...]:
    """`lifeguard_cli.resources.BUNDLED_PATHS`, read from its file (the package is not importable here)."""
    spec = importlib.util.spec_from_file_location(
        "_resources", HERE / "src" / "lifeguard_cli" / "resources.py"
    )
    if spec is None or spec.loader is None:
        raise RuntimeError("cannot read src/lifeguard_cli/resources.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return tuple(module.BUNDLED_PATHS)


class BuildWithResources(build_py):
    """build_py, then the resources into the built `lifeguard_cli/_data`."""

    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / "lifeguard_cli" / "_data"
        shutil.rmtree(target, ignore_errors=True)  # nothing left over from an earlier build
        for name in _bundled_paths():
            source, copy = HERE / name, target / name
            copy.parent.mkdir(parents=True, exist_ok=True)
            if source.is_dir():
                shutil.copytree(
                    source, copy, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__")
                )
            else:
                shutil.copy2(source, copy)


setup(cmdclass={"build_py": BuildWithResources})
