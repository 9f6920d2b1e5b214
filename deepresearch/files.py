"""Files and folders the workspace writes: private folders and all-or-nothing output files."""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import tempfile
from pathlib import Path
from typing import Iterator

from deepresearch.errors import InputError


def private_dir(path: Path, what: str) -> Path:
    """`path` as a folder only its owner can use: created 0700, or an existing one checked.

    An existing real folder of ours is tightened to 0700. A symbolic link is never chmod'ed
    (its target may be a shared folder such as /tmp, whose mode is not ours to change): its
    target must already be ours and private, else this refuses with the fix. A folder owned
    by another user is refused too.
    """
    try:
        path.mkdir(mode=0o700, parents=True)
        return path
    except FileExistsError:
        pass
    info = path.stat()
    if not stat.S_ISDIR(info.st_mode):
        raise InputError(f"{what} {path} is a file, not a folder — move it aside")
    linked = path.is_symlink()
    target = f"{path} (→ {path.resolve()})" if linked else str(path)
    if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
        raise InputError(
            f"{what} {target} belongs to another user (uid {info.st_uid}) — remove it, or point --home at"
            " a workspace of your own"
        )
    if stat.S_IMODE(info.st_mode) & 0o077:
        if linked:
            raise InputError(
                f"{what} {target} is a link to a folder other users can reach (mode"
                f" {stat.S_IMODE(info.st_mode):o}) — link it to a private folder (chmod 700) or remove the link"
            )
        path.chmod(0o700)
    return path


def _kind(mode: int) -> str | None:
    """What a non-regular file is, in words (None for a regular file)."""
    for test, name in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a named pipe (FIFO)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return None if stat.S_ISREG(mode) else "not a regular file"


def check_output(path: Path, *, overwrite: bool = False) -> None:
    """Refuse (InputError) an output path the tool must not write: anything but a new name or a
    regular file (a symbolic link, FIFO, socket, device or folder), a missing parent folder, or an
    existing file unless `overwrite`."""
    path = Path(path)
    try:
        info = path.lstat()
    except FileNotFoundError:
        info = None
    kind = None if info is None else _kind(info.st_mode)
    if kind == "a folder":
        raise InputError(f"{path} is a folder — give a file path, e.g. {path / 'facts.jsonl'}")
    if kind == "a symbolic link":
        raise InputError(
            f"{path} is a symbolic link (→ {os.readlink(path)}) — give the real file's path, or remove the link"
        )
    if kind is not None:
        raise InputError(
            f"{path} is {kind}, not a regular file — only regular files are written (print to stdout"
            " and redirect, or choose another name)"
        )
    if not path.parent.is_dir():
        raise InputError(f"folder {path.parent} does not exist — create it first (mkdir -p {path.parent})")
    if info is not None and not overwrite:
        raise InputError(f"{path} already exists — pass --force to overwrite it, or choose another name")


@contextlib.contextmanager
def atomic_output(path: Path, *, overwrite: bool = False, private: bool = False) -> Iterator[Path]:
    """A temporary path next to `path` that replaces it only when the block succeeds.

    Only a new name or an existing regular file is ever replaced: a symbolic link, FIFO, socket,
    device or folder at `path` is refused (InputError, see `check_output`) — never replaced,
    never written through — as are a missing parent folder and an existing file unless
    `overwrite`. `private` makes the file 0600 (the workspace's `workspace.private`); else it
    follows the umask. On any failure (full disk, …) the temporary file is removed and an
    existing file is left as it was.
    """
    path = Path(path)
    check_output(path, overwrite=overwrite)
    # A private scratch folder next to the target: writers such as DuckDB's COPY create the file
    # themselves, and the final rename stays on one file system.
    scratch = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        tmp = scratch / path.name
        yield tmp
        if private:
            tmp.chmod(0o600)
        check_output(path, overwrite=overwrite)  # again: something may have appeared there meanwhile
        os.replace(tmp, path)
    finally:
        for leftover in scratch.iterdir():
            leftover.unlink()
        scratch.rmdir()


def write_output(path: Path, text: str, *, overwrite: bool = False, private: bool = False) -> None:
    """Write `text` (UTF-8) to the user-named `path` all at once, by the rules of `atomic_output`."""
    with atomic_output(path, overwrite=overwrite, private=private) as tmp:
        tmp.write_text(text, encoding="utf-8")


# --- cache files trusted by content, not by name (the model caches: ONNX copy, assembled GGUF) ---
def stat_record(info: os.stat_result) -> dict[str, int]:
    """The stat fields a verified cache file is recorded with: size, mtime, ctime, inode, device.
    ctime cannot be set back (`touch` cannot fake it): any write, chmod or rename after the check
    changes the record, and the file is hashed again."""
    return {
        "size": info.st_size,
        "mtime_ns": info.st_mtime_ns,
        "ctime_ns": info.st_ctime_ns,
        "ino": info.st_ino,
        "dev": info.st_dev,
    }


def not_private(info: os.stat_result) -> str | None:
    """Why an entry with this (l)stat is not ours alone to write (phrased after "it"), or None."""
    if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
        return f"is owned by another user (uid {info.st_uid})"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"can be written by other users (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file, read in 4 MiB blocks (≈2 GB/s here with SHA-NI)."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()
