"""Writing files and directories without losing anything the user did not ask to replace.

The ground floor of the package (it imports nothing from it): every output directory is built
in a temporary sibling and renamed into place, carries a marker naming the command that wrote
it, and replaces an existing directory only if that same command wrote it (or `force`).
Output files are replaced atomically when regular and written through when they are devices,
pipes or symlinks. A run directory is held by one training process at a time (`RunLock`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import socket
import stat
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

MARKER = ".transduce-output.json"
TEMPORARY = re.compile(r"^\.(?P<name>.+)\.(?:tmp|old)-(?P<pid>\d+)$")


class OutputError(ValueError):
    """An output that would replace or damage something the user did not ask to replace."""


def written_by(directory: Path) -> str | None:
    """The command whose output `directory` is, from its marker; None if it has none."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        return json.loads((directory / MARKER).read_text(encoding="utf-8")).get("command")
    return None


def within(path: Path, folder: Path) -> bool:
    """Whether `path` is `folder` or lies inside it, links resolved."""
    path, folder = Path(path).resolve(), Path(folder).resolve()
    return path == folder or folder in path.parents


def _overlaps(out: Path, inputs: Iterable[Path]) -> Path | None:
    """The first input that `out` equals, contains or lies inside."""
    for given in inputs:
        if within(out, given) or within(given, out):
            return Path(given)
    return None


def enclosing_output(path: Path) -> tuple[Path, str] | None:
    """The nearest directory at or above `path` that a command wrote (it has the marker), and that
    command: such a directory is replaced whole when written again, so nothing else may live in it."""
    resolved = Path(path).resolve()
    for folder in (resolved, *resolved.parents):
        command = written_by(folder)
        if command is not None:
            return folder, command
    return None


def check_output_dir(out: Path, command: str, inputs: Iterable[Path] = (), force: bool = False) -> None:
    """Refuse to write the directory `out` where that would lose data.

    Allowed: a new path, an empty directory, or a directory that `command` wrote before (it is
    replaced atomically). Anything else needs `force`; an output overlapping an input is always
    refused, since writing it would destroy what is being read."""
    out = Path(out)
    clash = _overlaps(out, inputs)
    if clash is not None:
        raise OutputError(
            f"{out}: the output would contain or lie inside the input {clash}; choose another -o"
        )
    if out.is_symlink():
        if force:
            return
        raise OutputError(
            f"{out} is a symbolic link; give the real path, or pass --force to replace the link"
        )
    if not out.exists() or force:
        return
    if not out.is_dir():
        raise OutputError(
            f"{out} exists and is not a directory; choose another -o or pass --force to replace it"
        )
    if any(out.iterdir()) and written_by(out) != command:
        raise OutputError(
            f"{out} is a non-empty directory that `transduce {command}` did not write; "
            "choose another -o or pass --force to replace it"
        )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temporaries(directory: Path, name: str | None = None) -> list[Path]:
    """Delete `.NAME.tmp-PID` / `.NAME.old-PID` leftovers of dead processes (all names, or one)."""
    removed: list[Path] = []
    if not Path(directory).is_dir():
        return removed
    for path in Path(directory).iterdir():
        match = TEMPORARY.match(path.name)
        if match is None or (name is not None and match["name"] != name) or _alive(int(match["pid"])):
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        removed.append(path)
    return removed


@contextlib.contextmanager
def atomic_directory(
    final: Path, command: str, inputs: Iterable[Path] = (), force: bool = False
) -> Iterator[Path]:
    """Yield a temporary directory that replaces `final` only if the block completes.

    `final` is checked first (`check_output_dir`), and leftovers of earlier interrupted writes
    of the same name are removed."""
    final = Path(final)
    check_output_dir(final, command, inputs, force)
    final.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(final.parent, final.name)
    tmp = final.parent / f".{final.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        yield tmp
        (tmp / MARKER).write_text(json.dumps({"command": command}), encoding="utf-8")
        old = final.parent / f".{final.name}.old-{os.getpid()}"
        if final.is_symlink() or final.exists():
            final.rename(old)
        tmp.rename(final)
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink(missing_ok=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_text_atomic(path: Path, text: str) -> None:
    """Replace the regular file `path` with `text` in one rename (readers see old or new)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with tmp.open("w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def _hard_linked(path: Path, inputs: Iterable[Path]) -> Path | None:
    """The input file, or file inside an input folder, that `path` is another name of (a hard
    link: the same inode on the same device), which replacing `path` would split from it."""
    try:
        info = path.stat()
    except OSError:
        return None
    if info.st_nlink < 2 or not stat.S_ISREG(info.st_mode):
        return None
    for given in map(Path, inputs):
        for candidate in (given, *(given.rglob("*") if given.is_dir() else ())):
            with contextlib.suppress(OSError):
                other = candidate.stat()
                if (other.st_ino, other.st_dev) == (info.st_ino, info.st_dev):
                    return candidate
    return None


def check_output_file(path: Path, inputs: Iterable[Path] = ()) -> None:
    """Refuse an output file path that cannot be written (a directory, a missing folder, `-` when
    standard output is closed) or that is, links to (symbolically or hard), or lies inside one of
    the command's inputs."""
    path = Path(path)
    if str(path) == "-":
        _standard_output()
        return
    if path.is_dir():
        raise OutputError(f"{path} is a directory; -o takes a file path")
    if not path.parent.is_dir():
        raise OutputError(f"{path}: folder {path.parent} does not exist")
    inputs = [Path(i) for i in inputs if str(i) != "-"]
    clash = _overlaps(path, inputs)
    if clash is not None:
        raise OutputError(f"{path}: the output would overwrite the input {clash}; choose another -o")
    linked = _hard_linked(path, inputs)
    if linked is not None:
        raise OutputError(
            f"{path}: the output would overwrite the input {linked} (a hard link to it); choose another -o"
        )


def _standard_output() -> IO[str]:
    """sys.stdout, which is None when the process started with its standard output closed
    (`cmd >&-`): refused like any other output that cannot be written."""
    if sys.stdout is None:
        raise OutputError("standard output is closed; give -o FILE or redirect it")
    return sys.stdout


# Names of a process's open file descriptors; /dev/stdout links to /proc/self/fd/1
_DESCRIPTOR = re.compile(r"/dev/(stdin|stdout|stderr|fd/\d+)|/proc/(self|thread-self|\d+)/fd/\d+")


def _names_a_descriptor(path: Path) -> bool:
    """Whether `path` is, or links through, the name of an open file descriptor (/dev/stdout,
    /dev/fd/N, /proc/self/fd/N). What is behind it (a pipe, a terminal, a file the shell opened,
    maybe to append to) is the descriptor's, written through, never replaced by another file."""
    for _ in range(40):  # the kernel's own limit on links followed
        if _DESCRIPTOR.fullmatch(os.path.abspath(path)):
            return True
        if not path.is_symlink():
            return False
        path = path.parent / os.readlink(path)
    return False


def write_output_file(path: Path | None, text: str) -> None:
    """Write a command's text output.

    None or '-' is standard output. A regular file (new or existing) is replaced atomically,
    keeping its permissions; a symbolic link is followed, so the link stays and its target gets
    the text; devices and pipes (/dev/null, a FIFO) are written through, never replaced, and so
    is whatever a descriptor's name (/dev/stdout, /proc/self/fd/1) stands for, appended to."""
    if path is None or str(path) == "-":
        out = _standard_output()
        out.write(text)
        out.flush()
        return
    check_output_file(path)
    if _names_a_descriptor(Path(path)):
        with Path(path).open("a", encoding="utf-8") as f:
            f.write(text)
        return
    target = Path(path).resolve() if Path(path).is_symlink() else Path(path)
    mode = None
    if target.exists():
        info = target.stat()
        if not stat.S_ISREG(info.st_mode):
            with target.open("w", encoding="utf-8") as f:
                f.write(text)
            return
        mode = stat.S_IMODE(info.st_mode)
    write_text_atomic(target, text)
    if mode is not None:
        os.chmod(target, mode)


class RunLock:
    """An exclusive lock on a run directory, held while one process trains into it.

    The kernel drops an `flock` when its process dies, so a lock left by a killed run is
    taken over at once; the lock file names the holder for the error message."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / ".lock"
        self.file: IO[str] | None = None

    def __enter__(self) -> RunLock:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            file = self.path.open("a+", encoding="utf-8")
        except OSError as exc:
            raise OutputError(f"{self.path}: cannot take the run directory's lock: {exc.strerror}") from None
        try:
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            file.seek(0)
            holder = file.read().strip() or "another process"
            file.close()
            raise OutputError(
                f"{self.path.parent} is in use by {holder}; wait for it to finish or use another --run-dir"
            ) from None
        file.seek(0)
        file.truncate()
        started = time.strftime("%Y-%m-%d %H:%M:%S")
        file.write(f"process {os.getpid()} on {socket.gethostname()} (transduce train, since {started})\n")
        file.flush()
        self.file = file
        return self

    def __exit__(self, *exc: object) -> None:
        if self.file is not None:
            fcntl.flock(self.file, fcntl.LOCK_UN)
            self.file.close()
            self.file = None
