"""Files and folders the workspace writes: private folders and all-or-nothing output files."""

from __future__ import annotations

import contextlib
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


@contextlib.contextmanager
def atomic_output(path: Path, *, overwrite: bool = False) -> Iterator[Path]:
    """A temporary path next to `path` that replaces it only when the block succeeds.

    Refuses (InputError) a folder, a missing parent folder, or an existing file unless
    `overwrite`; on any failure (full disk, …) the temporary file is removed and an existing
    file is left as it was.
    """
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{path} is a folder — give a file path, e.g. {path / 'facts.jsonl'}")
    if not path.parent.is_dir():
        raise InputError(f"folder {path.parent} does not exist — create it first (mkdir -p {path.parent})")
    if path.exists() and not overwrite:
        raise InputError(f"{path} already exists — pass --force to overwrite it, or choose another name")
    # A private scratch folder next to the target: writers such as DuckDB's COPY create the file
    # themselves, and the final rename stays on one file system.
    scratch = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        tmp = scratch / path.name
        yield tmp
        os.replace(tmp, path)
    finally:
        for leftover in scratch.iterdir():
            leftover.unlink()
        scratch.rmdir()
