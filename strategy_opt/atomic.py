"""Atomic file writes and output-path checks.

Every file strategy_opt writes (strategies, answers, releases) goes through
`atomic_path`: a temporary file in the target directory, renamed over the
target when complete, so a failed or interrupted run leaves no partial file.
The ``check_*`` functions refuse unusable output paths before any work is done.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from .exceptions import InputError

__all__ = ["answers_sidecar", "atomic_path", "atomic_paths", "check_writable", "check_not_input", "strategy_files"]


def _anonymous_file(directory: Path) -> int | None:
    """An unnamed file in ``directory`` (Linux ``O_TMPFILE``), or None where the OS or filesystem has none.

    It has no name until `_publish` links it in, so a process killed at any
    point of the write (SIGKILL included) leaves nothing behind.
    """
    flag = getattr(os, "O_TMPFILE", None)
    if flag is None or not Path("/proc/self/fd").is_dir():
        return None
    try:
        return os.open(directory, flag | os.O_RDWR, 0o666)  # open(2) applies the umask
    except OSError:  # EOPNOTSUPP, EISDIR, EINVAL ... : fall back to a named temporary file
        return None


def _publish(fd: int, directory: Path, path: Path) -> None:
    """Give the unnamed file ``fd`` the name ``path`` (replacing it): link under a fresh hidden name, then rename."""
    staged = directory / f".{path.name}.{os.urandom(8).hex()}.tmp"  # fresh: linkat refuses an existing name
    fds = os.open("/proc/self/fd", os.O_RDONLY | os.O_DIRECTORY)
    try:  # src_dir_fd makes os.link call linkat(AT_SYMLINK_FOLLOW), which links the file the /proc entry stands for
        os.link(str(fd), staged, src_dir_fd=fds, follow_symlinks=True)
    except OSError:  # a filesystem that makes unnamed files but cannot link them: copy into a named one
        _copy_to_named(fd, staged)
    finally:
        os.close(fds)
    try:
        os.replace(staged, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(staged)
        raise


def _copy_to_named(fd: int, staged: Path) -> None:
    """Copy the unnamed file ``fd`` into the new file ``staged`` (removed again if the copy fails)."""
    out = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        offset = 0
        while block := os.pread(fd, 1 << 20, offset):
            offset += len(block)
            view = memoryview(block)
            while view:  # os.write may take part of a block
                view = view[os.write(out, view):]
    except BaseException:
        os.close(out)
        with contextlib.suppress(OSError):
            os.unlink(staged)
        raise
    os.close(out)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike):
    """Yield a temporary path beside ``path``; rename it over ``path`` on success.

    Where the filesystem allows (Linux ``O_TMPFILE``) the temporary file has
    no name until it is complete, so even a process killed outright (SIGKILL)
    leaves no file behind; elsewhere it is a hidden ``.NAME.*.tmp`` file, which
    any exception (``KeyboardInterrupt`` and the CLI's SIGTERM handler
    included) removes, and which only SIGKILL can leave. Either way ``path`` is
    never partial: it is untouched or complete.

    Parameters
    ----------
    path : str or os.PathLike
        The file to write; its directory must exist.

    Yields
    ------
    Path
        Where to write: open it (``open(tmp, "wb")``) and write through the handle. It may be a
        ``/proc/self/fd/N`` path, so a function that adds a suffix to a name (``np.save`` given a name) would
        write elsewhere.

    Raises
    ------
    InputError
        When the directory does not exist, ``path`` is a directory, or the file cannot be written.

    Examples
    --------
    >>> tmp = tempfile.TemporaryDirectory()
    >>> target = Path(tmp.name) / "a.txt"
    >>> with atomic_path(target) as t:
    ...     _ = t.write_text("hello")
    ...     target.exists()  # not before the block ends
    False
    >>> target.read_text()
    'hello'
    >>> try:
    ...     with atomic_path(Path(tmp.name) / "b.txt") as t:
    ...         _ = t.write_text("partial")
    ...         raise KeyboardInterrupt
    ... except KeyboardInterrupt:
    ...     pass
    >>> sorted(os.listdir(tmp.name))  # no b.txt, and no temporary file
    ['a.txt']
    >>> tmp.cleanup()
    """
    with atomic_paths(path) as (tmp,):
        yield tmp


@contextlib.contextmanager
def atomic_paths(*paths: str | os.PathLike):
    """`atomic_path` for files written together (a file and its ``.json`` record): yield one temporary path each.

    On success all are renamed over their targets while this process holds an
    exclusive lock (``flock``) on the first target's directory, so two
    strategy_opt processes writing the same pair never leave one's file beside
    the other's record (an outside audit: 2 of 12 concurrent ``run``s to one
    ``--out`` did).

    Parameters
    ----------
    *paths : str or os.PathLike
        The files to write.

    Yields
    ------
    list of Path
        One temporary path per target, in order.

    Examples
    --------
    >>> tmp = tempfile.TemporaryDirectory()
    >>> out = Path(tmp.name) / "o.npy"
    >>> with atomic_paths(out, answers_sidecar(out)) as (data, record):
    ...     _ = data.write_bytes(b"...")
    ...     _ = record.write_text("{}")
    >>> sorted(os.listdir(tmp.name))
    ['o.npy', 'o.npy.json']
    >>> tmp.cleanup()
    """
    paths = [Path(p) for p in paths]
    staged = []  # (fd or None, tmp path, directory, target)
    try:
        for path in paths:
            staged.append(_stage(path))
        try:
            yield [Path(tmp) for _, tmp, _, _ in staged]
        except OSError as exc:  # writing the staged files (a full disk): nothing was published
            names = " and ".join(str(p) for p in paths)
            raise InputError(f"cannot write {names}: {exc.strerror or exc} (nothing was written)") from None
        with _directory_lock(staged[0][2]):
            for fd, tmp, directory, path in staged:
                try:
                    if fd is None:
                        os.replace(tmp, path)
                    else:
                        _publish(fd, directory, path)
                except OSError as exc:  # e.g. the target is a directory
                    raise InputError(f"cannot write {path}: {exc.strerror}") from None
    except BaseException:
        for fd, tmp, _, _ in staged:
            if fd is None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
        raise
    finally:
        for fd, _, _, _ in staged:
            if fd is not None:
                os.close(fd)


def _output_directory(path: Path) -> Path:
    """The directory ``path`` would be written in; `InputError` if it is missing or a file."""
    directory = path.parent if str(path.parent) else Path(".")
    if directory.exists() and not directory.is_dir():
        raise InputError(f"output directory {directory} is not a directory (it is a file)")
    if not directory.is_dir():
        raise InputError(f"output directory does not exist: {directory}")
    return directory


def _stage(path: Path):
    """A temporary file beside ``path``: ``(fd of an unnamed file or None, its path, directory, path)``."""
    directory = _output_directory(path)
    if path.is_dir():  # refused before anything is written: a file and its sidecar are written together or not at all
        raise InputError(f"cannot write {path}: Is a directory")
    fd = _anonymous_file(directory)
    if fd is not None:
        return fd, f"/proc/self/fd/{fd}", directory, path
    try:
        named, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise InputError(f"cannot write in {directory}: {exc.strerror}") from None
    os.close(named)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it private (0600); the output gets the usual permissions
    return None, tmp, directory, path


@contextlib.contextmanager
def _directory_lock(directory: Path):
    """An exclusive ``flock`` on ``directory`` (nothing where the platform or filesystem has none)."""
    try:
        import fcntl

        fd = os.open(directory, os.O_RDONLY)
    except (ImportError, OSError):
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            pass
        yield
    finally:
        os.close(fd)  # closing releases the lock


def check_writable(path: str | os.PathLike) -> None:
    """Refuse an output path that cannot be written (missing or read-only directory, a directory), before any work is done.

    The path is checked as typed: ``o.npy/`` or ``o.npy/.`` names a directory,
    not a file, although `pathlib.Path` drops the trailing separator.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    None

    Raises
    ------
    InputError
        Naming the problem (as the ``--out`` flag).

    Examples
    --------
    >>> check_writable("o.npy")
    >>> check_writable("o.npy/")
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.InputError: --out 'o.npy/' names a directory (it ends in '/'), not a file; give a file name
    >>> check_writable("no/such/dir/o.npy")
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.InputError: output directory does not exist: no/such/dir
    """
    text = os.fspath(path)
    seps = (os.sep, os.altsep) if os.altsep else (os.sep,)
    last = text
    for sep in seps:
        last = last.rsplit(sep, 1)[-1]
    if text.endswith(seps) or last in (".", ".."):
        raise InputError(f"--out {text!r} names a directory (it ends in {text[-1] if text.endswith(seps) else last!r}), not a file; give a file name")
    out = Path(path)
    parent = _output_directory(out)
    if out.is_dir():
        raise InputError(f"--out {str(path)!r} is a directory; give a file name")
    try:  # a trial file, as the output itself will be staged: a read-only filesystem or directory is refused now, not after the work
        fd, trial = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".check", dir=parent)
    except OSError as exc:
        raise InputError(f"cannot write in {parent}: {exc.strerror}") from None
    os.close(fd)
    os.unlink(trial)


def answers_sidecar(path: str | os.PathLike) -> Path:
    """The ``.json`` record written beside an answers file: its name with ``.json`` appended.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    Path

    Examples
    --------
    >>> str(answers_sidecar("out/answers.csv"))
    'out/answers.csv.json'
    """
    path = Path(path)
    return path.with_name(path.name + ".json")


def strategy_files(path: str | os.PathLike) -> list[Path]:
    """The files a strategy path stands for: itself and, for a ``.csv``, the ``.json`` metadata beside it.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    list of Path

    Examples
    --------
    >>> [str(p) for p in strategy_files("s.csv")], [str(p) for p in strategy_files("s.npz")]
    (['s.csv', 's.json'], ['s.npz'])
    """
    path = Path(path)
    return [path, path.with_suffix(".json")] if path.suffix.lower() == ".csv" else [path]


def check_not_input(path: str | os.PathLike, inputs=(), writes=None, strategies=()) -> None:
    """Refuse an output that would overwrite one of the command's input files (``None`` entries ignored).

    ``writes`` are the files the output occupies (default: ``path`` alone);
    ``inputs`` stand for themselves, ``strategies`` (strategy files read) also
    for the ``.json`` metadata a ``.csv`` strategy keeps beside it. An answers
    file ``o.csv`` (record ``o.csv.json``) read from a strategy ``o.csv.csv``
    (metadata ``o.csv.json``) would otherwise destroy the strategy's metadata
    and exit 0.

    Parameters
    ----------
    path : str or os.PathLike
        The output, as named in messages.
    inputs : iterable of path or None
    writes : list of path, optional
    strategies : iterable of path or None

    Returns
    -------
    None

    Raises
    ------
    InputError

    Examples
    --------
    Paths are compared after resolving, so ``./data.npy`` is ``data.npy``:

    >>> check_not_input("out.npy", inputs=["data.npy", None])
    >>> check_not_input("data.npy", inputs=["./data.npy"])
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.InputError: --out 'data.npy' is one of the input files; choose another name
    >>> check_not_input("s.json", strategies=["s.csv"])
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.InputError: --out 's.json' would write 's.json', the metadata of the input 's.csv'; choose another name
    """
    written = {Path(w).resolve(): Path(w) for w in (writes if writes is not None else [path])}
    read = [(p, [Path(p)]) for p in inputs if p is not None] + [(p, strategy_files(p)) for p in strategies if p is not None]
    for p, files in read:
        for f in files:
            hit = written.get(f.resolve())
            if hit is None:
                continue
            if f == Path(p):
                raise InputError(f"--out {str(path)!r} is one of the input files; choose another name")
            raise InputError(f"--out {str(path)!r} would write {str(hit)!r}, the metadata of the input {str(p)!r}; choose another name")
