"""Errors meant for the user: each message says what went wrong and how to fix it.

The CLI converts any `DeepResearchError` into `Error: <message>` on stderr and exit
code 1, in exactly one place (`deepresearch.cli.main`); `user_message` gives that place one
line for the errors of the layers below us (OS, SQLite, YAML, Unicode, DuckDB) too.
"""

from __future__ import annotations

import errno


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


class NotIndexed(InputError):
    """An HTML page that asks not to be indexed (`<meta name="robots" content="noindex">`): skipped, not failed."""


class SearchError(DeepResearchError):
    """A search backend failed (network down, bad response, missing index)."""


class NotFound(DeepResearchError):
    """A requested record (fact, run, document) does not exist."""


# --- errors from below the project (OS, SQLite, YAML, Unicode, DuckDB) as user messages ---------

_OS_HINTS = {
    errno.EACCES: "permission denied — make it readable and writable for you (chmod u+rw) or choose another path",
    errno.EPERM: "operation not permitted — check its owner and mode, or choose another path",
    errno.EROFS: "read-only file system — choose a writable location (e.g. --home DIR)",
    errno.ENOSPC: "no space left on the device — free some space and retry",
    errno.EDQUOT: "disk quota exceeded — free some space and retry",
    errno.EFBIG: "file too large for this file system or limit — free space or choose another location",
    errno.ENOENT: "no such file or folder — check the path (create the folder first)",
    errno.EISDIR: "is a folder — give a file path",
    errno.ENOTDIR: "part of the path is a file, not a folder — check the path",
    errno.ENAMETOOLONG: "file name too long — choose a shorter path",
    errno.ELOOP: "too many symbolic links — check the path",
}

_SQLITE_HINTS = (
    ("readonly", "the database is read-only — make the workspace folder and deepresearch.db writable (chmod u+w)"),
    ("unable to open database", "cannot open the database — check that the workspace folder exists and is writable"),
    ("database or disk is full", "the disk is full — free some space and retry (committed data is kept)"),
    ("disk i/o error", "the disk failed to read or write — check the device and free space, then retry"),
    ("locked", "the database stayed locked by another process — wait for it to finish and retry"),
    ("busy", "the database stayed locked by another process — wait for it to finish and retry"),
    ("malformed", "the database file is damaged — run `sqlite3 deepresearch.db '.recover'` or restore a backup"),
    ("not a database", "the file is not a SQLite database — move it aside and rerun, or restore a backup"),
)


def _module_root(exc: BaseException) -> str:
    return type(exc).__module__.split(".")[0].lstrip("_")


def _os_message(exc: OSError) -> str:
    names = [str(n) for n in (exc.filename, exc.filename2) if n is not None]
    where = " → ".join(names)
    hint = _OS_HINTS.get(exc.errno or -1)
    problem = exc.strerror or str(exc) or type(exc).__name__
    if hint is None:
        return f"{where + ': ' if where else ''}{problem} — check the path and retry"
    return f"{where}: {hint}" if where else f"{problem}: {hint}"


def user_message(exc: BaseException) -> str | None:
    """One line for an OS, SQLite, YAML, Unicode or DuckDB error; None for anything else (a bug)."""
    if isinstance(exc, DeepResearchError):
        return str(exc)
    root = _module_root(exc)
    if isinstance(exc, OSError):
        return _os_message(exc)
    if root in ("sqlite3", "sqlean", "pysqlite3") and isinstance(exc, Exception):
        text = str(exc) or type(exc).__name__
        for needle, hint in _SQLITE_HINTS:
            if needle in text.lower():
                return f"SQLite: {text}: {hint}"
        return f"SQLite: {text} — rerun; if it repeats, run `deepresearch kb check`"
    if root == "yaml":
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        return f"invalid YAML: {problem} — fix the YAML text (quote values that start with @, *, [ or {{)"
    if isinstance(exc, UnicodeDecodeError):
        return (
            f"text is not UTF-8 ({exc.reason} at byte {exc.start}) — save the file as UTF-8"
            " (e.g. `iconv -f latin1 -t utf-8`)"
        )
    if isinstance(exc, UnicodeError):
        return f"text cannot be encoded ({exc}) — remove the unusual characters"
    if root == "duckdb":
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        return f"DuckDB: {first} — check the path, its folder and free disk space"
    return None
