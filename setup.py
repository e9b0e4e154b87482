"""The wheel carries the files the CLI runs with besides its code (`lifeguard_cli/resources.py`): they are
copied into `lifeguard_cli/_data` as the package is built. Everything else is in pyproject.toml."""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
BUNDLED_PATHS = ("events", "template.yaml", "functions/publish_bundle/app.py")  # as resources.py


class BuildWithResources(build_py):
    """build_py, then the resources into the built `lifeguard_cli/_data`."""

    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / "lifeguard_cli" / "_data"
        shutil.rmtree(target, ignore_errors=True)  # nothing left over from an earlier build
        for name in BUNDLED_PATHS:
            source, copy = HERE / name, target / name
            copy.parent.mkdir(parents=True, exist_ok=True)
            if source.is_dir():
                shutil.copytree(
                    source, copy, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__")
                )
            else:
                shutil.copy2(source, copy)


setup(cmdclass={"build_py": BuildWithResources})
