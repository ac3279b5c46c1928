"""Writing files and directories without losing anything the user did not ask to replace.

The ground floor of the package (it imports nothing from it): every output directory is built
in a temporary sibling and renamed into place, carries a marker naming the command that wrote
it, and replaces an existing directory only if that same command wrote it (or `force`).
Output files are replaced atomically when regular and written through when they are devices,
pipes or symlinks. A write the system refuses (a full disk, a file size limit, a name too long)
is a `WriteError` naming the output, with what was there before left as it was. New files get
the permissions the umask gives, whichever library writes them.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import stat
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

MARKER = ".transduce-output.json"
TEMPORARY = re.compile(r"^\.(?P<name>.+)\.(?:tmp|old)-(?P<pid>\d+)$")
OS_ERROR = re.compile(r"\(os error (\d+)\)")  # how safetensors' errors quote the OS's


class OutputError(ValueError):
    """An output that would replace or damage something the user did not ask to replace."""


class WriteError(OutputError):
    """An output the system would not let us write (a full disk, a file size limit, a name longer
    than the file system takes, no permission), naming the output; the writes are atomic, so what
    was there before is left as it was."""


def write_failure(path: Path, exc: OSError) -> WriteError:
    """The WriteError for an OSError met while writing `path`: the OS's reason, one line."""
    return WriteError(f"cannot write {path}: {exc.strerror or exc}")


def temporary(path: Path) -> Path:
    """Where `path` is written before it is renamed into place: `.NAME.tmp-PID` beside it."""
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def check_path(path: Path, renamed: bool = True) -> None:
    """A WriteError if the system cannot even look up `path`, or (`renamed`: it is written under
    a temporary name and renamed) that name: a name or a path longer than it takes, a loop of
    links, a folder it may not search. Said before any work, instead of an OSError from wherever
    the path is first used."""
    path = Path(path)
    for candidate in (path, temporary(path)) if renamed and path.name else (path,):
        try:
            os.lstat(candidate)
        except (FileNotFoundError, NotADirectoryError):
            pass
        except OSError as exc:
            raise write_failure(path, exc) from None


def _umask() -> int:
    """The process's umask, read from /proc where Linux shows it (os.umask can only read it by
    setting it, for a moment, for every thread)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def new_file_mode() -> int:
    """The permissions that open() gives a new file: 0o666 less the umask."""
    return 0o666 & ~_umask()


def write_safetensors(path: Path, tensors: dict[str, Any], metadata: dict[str, str] | None = None) -> None:
    """safetensors' save_file, with the file's permissions following the umask as every other
    file's do (save_file writes through a temporary file of mode 0o600), and its failures as
    OSError, whose errno the SafetensorError only quotes in its text."""
    from safetensors import SafetensorError
    from safetensors.torch import save_file

    try:
        save_file(tensors, str(path), metadata=metadata)
    except SafetensorError as exc:
        found = OS_ERROR.search(str(exc))
        code = int(found.group(1)) if found else errno.EIO
        raise OSError(code, os.strerror(code) if found else str(exc), str(path)) from exc
    os.chmod(path, new_file_mode())


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
    if out.name in ("", ".."):  # '', '.', '/', 'a/..': the folder itself would be replaced, or its parent
        raise OutputError(f"-o {str(out)!r}: give the output a name of its own (not '.', '..' or '/')")
    check_path(out)
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
    of the same name are removed. An OSError in the block or in the renames (a full disk) is a
    WriteError naming `final`, which is left as it was."""
    final = Path(final)
    check_output_dir(final, command, inputs, force)
    tmp = temporary(final)
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(final.parent, final.name)
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
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
    except OSError as exc:
        raise write_failure(final, exc) from exc
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def atomic_file(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside `path` (`.NAME.tmp-PID`) that replaces it, in one rename, if
    the block completes. An OSError (a full disk) is a WriteError naming `path`, which is left as
    it was, and the temporary file is removed."""
    path = Path(path)
    tmp = temporary(path)
    try:
        yield tmp
        tmp.replace(path)
    except OSError as exc:
        raise write_failure(path, exc) from exc
    finally:
        with contextlib.suppress(OSError):  # a name too long to create is too long to remove
            tmp.unlink(missing_ok=True)


def write_text_atomic(path: Path, text: str) -> None:
    """Replace the regular file `path` with `text` in one rename (readers see old or new)."""
    with atomic_file(path) as tmp, tmp.open("w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


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
    check_path(path)
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
