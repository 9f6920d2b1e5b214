"""The workspace: one folder holding the SQLite file, the search cache and saved reports.

Chosen by `--home DIR` > `$DEEPRESEARCH_HOME` > `./memory`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping

from deepresearch.config import Config, load_config
from deepresearch.errors import InputError

HOME_ENV = "DEEPRESEARCH_HOME"
DEFAULT_HOME = Path("memory")
DB_NAME = "deepresearch.db"


def resolve_home(home: Path | str | None = None, env: Mapping[str, str] | None = None) -> Path:
    """The workspace folder: explicit argument > $DEEPRESEARCH_HOME > ./memory."""
    env = os.environ if env is None else env
    chosen = Path(home) if home else Path(env[HOME_ENV]) if env.get(HOME_ENV) else DEFAULT_HOME
    return chosen.expanduser().absolute()


@dataclass
class Workspace:
    """Paths of one workspace plus its effective config; opens the database lazily."""

    home: Path
    config: Config

    @classmethod
    def open(
        cls,
        home: Path | str | None = None,
        *,
        config_file: Path | None = None,
        overrides: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Workspace:
        """Resolve the folder, create it if needed, and load the effective config."""
        path = resolve_home(home, env)
        if path.exists() and not path.is_dir():
            raise InputError(f"workspace {path} is a file, not a folder — pass --home DIR")
        path.mkdir(parents=True, exist_ok=True)
        config = load_config(home=path, config_file=config_file, env=env, overrides=overrides)
        return cls(home=path, config=config)

    @property
    def db_path(self) -> Path:
        """The single SQLite file: facts, vectors, corpus, runs."""
        return self.home / DB_NAME

    @property
    def cache_dir(self) -> Path:
        """The search cache folder, created with mode 0700 (only the owner may read or write)."""
        path = self.home / "cache"
        path.mkdir(mode=0o700, exist_ok=True)
        path.chmod(0o700)
        return path

    @property
    def reports_dir(self) -> Path:
        """Saved Markdown reports of research runs."""
        path = self.home / "reports"
        path.mkdir(exist_ok=True)
        return path

    @cached_property
    def db(self) -> Any:
        """The workspace connection (sqlite-vec loaded when possible, migrations applied)."""
        from deepresearch.db import connect

        return connect(self.db_path)

    def close(self) -> None:
        """Close the database connection if it was opened."""
        conn = self.__dict__.pop("db", None)
        if conn is not None:
            conn.close()
