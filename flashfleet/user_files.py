"""Writing a file the user keeps (a stack file, a lock, a report): whole or not at all.

A file written in place is truncated first: a full disk, a read-only folder or a Ctrl-C half
way leaves a stack file cut mid-line, after a purchase that cannot be undone. So the new text
goes to a temporary file in the same folder (the same file system: the rename is atomic), is
flushed to disk, and replaces the old file in one rename. A link at the path is replaced, never
written through: the file lands where the user named it.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path


class UserFileError(OSError):
    """The file could not be written; it is as it was. The message is one line naming it."""


def _mode_for(path: Path) -> int:
    """The old file's permissions, else what a new file gets under the umask."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
    return stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else 0o644


def write_text_atomically(path: Path, text: str) -> None:
    """`path` holds `text` afterwards, or (UserFileError) exactly what it held before."""
    data = text.encode("utf-8")
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as err:
        raise UserFileError(f"{path}: not written ({err.strerror or err}); it is as it was") from None
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, _mode_for(path))
        os.replace(tmp, path)
    except BaseException as err:  # a Ctrl-C too: no temporary file is left behind
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(err, OSError):
            raise UserFileError(f"{path}: not written ({err.strerror or err}); it is as it was") from None
        raise
