"""The workspace: one folder holding the SQLite file, the search cache and saved reports.

Chosen by `--home DIR` > `$DEEPRESEARCH_HOME` > `./memory`. With `workspace.private: true`
(the default) the folders it creates are 0700 and the database 0600; the search cache
folder is always private (see `files.private_dir`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping

from deepresearch.config import Config, load_config
from deepresearch.errors import InputError, NotFound
from deepresearch.files import private_dir

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
        create: bool = True,
    ) -> Workspace:
        """Resolve the folder, create it if needed (`create=False`: it must exist), and load the config."""
        path = resolve_home(home, env)
        if path.exists() and not path.is_dir():
            raise InputError(f"workspace {path} is a file, not a folder — pass --home DIR")
        if not create and not path.is_dir():
            # e.g. a cron sweep with a wrong or missing DEEPRESEARCH_HOME must fail, not start an empty KB
            raise NotFound(f"no workspace at {path} (knowledge base {path / DB_NAME}) — pass --home or set {HOME_ENV}")
        config = load_config(home=path, config_file=config_file, env=env, overrides=overrides)
        path.mkdir(mode=0o700 if config.workspace.private else 0o777, parents=True, exist_ok=True)
        return cls(home=path, config=config)

    @property
    def db_path(self) -> Path:
        """The single SQLite file: facts, vectors, corpus, runs."""
        return self.home / DB_NAME

    @property
    def cache_dir(self) -> Path:
        """The search cache folder, always private (mode 0700; see `files.private_dir`)."""
        return private_dir(self.home / "cache", "search cache folder")

    @property
    def reports_dir(self) -> Path:
        """Saved Markdown reports of research runs (created 0700 when workspace.private)."""
        path = self.home / "reports"
        path.mkdir(mode=0o700 if self.config.workspace.private else 0o777, exist_ok=True)
        return path

    @cached_property
    def db(self) -> Any:
        """The workspace connection (sqlite-vec loaded when possible, migrations applied)."""
        from deepresearch.db import connect

        return connect(self.db_path, private=self.config.workspace.private)

    def close(self) -> None:
        """Close the database connection if it was opened."""
        conn = self.__dict__.pop("db", None)
        if conn is not None:
            conn.close()
