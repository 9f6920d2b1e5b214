"""Errors meant for the user: each message says what went wrong and how to fix it.

The CLI converts any `DeepResearchError` into `Error: <message>` on stderr and exit
code 1, in exactly one place (`deepresearch.cli.main`).
"""


class DeepResearchError(Exception):
    """Base class; `str(err)` is shown to the user as is."""


class ConfigError(DeepResearchError):
    """A configuration file, key or value is invalid."""


class ModelNotFound(DeepResearchError):
    """A model file or package could not be found."""


class ModelError(DeepResearchError):
    """A model failed to load or to answer."""


class DimensionMismatch(DeepResearchError):
    """The embedding model or dimension differs from the one the DB was built with."""


class KnowledgeBaseLocked(DeepResearchError):
    """The database stayed locked by another writer past the busy timeout."""


class DatabaseCorrupt(DeepResearchError):
    """The database file is not a readable SQLite database."""


class InputError(DeepResearchError):
    """A file or value given by the user cannot be used."""


class SearchError(DeepResearchError):
    """A search backend failed (network down, bad response, missing index)."""


class NotFound(DeepResearchError):
    """A requested record (fact, run, document) does not exist."""
