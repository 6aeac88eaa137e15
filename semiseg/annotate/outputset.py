"""Output sets written as a whole: all of a run's PREFIX.* files appear together, or none.

    with OutputSet("out/sample", legacy=ANNOTATION_FILES) as staged:
        write(staged.prefix + ".bed") ...   # any files named staged.prefix + ".SUFFIX"
    staged.files                            # the final paths, once the block has ended

- A lock file, PREFIX.lock (created with O_EXCL, holding "PID HOST"), refuses a second
  run on the same prefix while the first one runs. A lock left by a dead process on this
  host is taken over; one of another host, or of a live process, is not (the error says
  which run holds it and that the file may be removed if that run is gone).
- The writers write into a staging folder next to the prefix (.NAME.staging.XXXXXXXX, on
  the same file system, so the final moves are renames). Whatever files they create
  there are the new set; no list of names is fixed here.
- When the block ends without an error, the previous set of the prefix is moved aside,
  the new files are moved into place and the set's list is recorded in .NAME.outputs
  (which says what the next run replaces); the previous set is deleted only then. If a
  move fails, what was moved is moved back: the previous set stays as it was. Signals are
  held back during these renames (runtime.deferred).
- On any error or interrupt the staging folder is removed: no temporary files remain, the
  previous set is untouched. An OSError (disk full, permission, ...) becomes one line,
  SemisegError (exit code 2).

The previous set is what .NAME.outputs lists; for a prefix written before that file
existed, the files matching `legacy` (patterns of suffixes, e.g. "posterior.*.bw").
Files of the prefix that belong to neither (an input named like PREFIX.fa) are never
touched.

`check_space` and `SpaceGuard` (genome/diskspace.py) guard libBigWig, which on a full
disk aborts the process (a double free) or loops forever instead of reporting the error
(measured with pyBigWig on a 1 MiB tmpfs): the writer asks for the room an addEntries or
close may need first.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import re
import shutil
import tempfile

from ..errors import SemisegError
from ..runtime import Lock, deferred
from ..runtime import read_small as _read

# the files `semiseg annotate` wrote before .NAME.outputs recorded each set
ANNOTATION_FILES = ("bed", "browser.bed", "stranded.bed", "gff3", "summary.tsv",
                    "samples.bed", "posterior.*.bw", "boundary.bw", "entropy.bw",
                    "boundary_entropy.bw", "cds.fa", "proteins.fa", "json")

def check_inputs_kept(prefix: str | os.PathLike, legacy: tuple[str, ...],
                      inputs: list[tuple[str, str | None]]) -> None:
    """Refuse (SemisegError, one line) an output prefix whose set would replace one of
    the run's input files: `inputs` holds (option, path) pairs, e.g. ("--regions",
    "out/sample.bed") with prefix "out/sample" (the set's PREFIX.bed would be it). Run
    before any work, so the error comes at once and no input is lost."""
    final = os.fspath(prefix)
    folder = os.path.realpath(os.path.dirname(os.path.abspath(final)))
    name = os.path.basename(final)
    for flag, path in inputs:
        if not path:
            continue
        base = os.path.basename(path)
        if (os.path.realpath(os.path.dirname(os.path.abspath(path))) == folder
                and base.startswith(name + ".")
                and any(fnmatch.fnmatchcase(base[len(name) + 1:], pat) for pat in legacy)):
            raise SemisegError(f"--out {final}: the run would replace its input {flag} "
                               f"{path}; choose another output prefix")


@contextlib.contextmanager
def output_folder(path: str | os.PathLike):
    """Make the folder `path` and its missing parents for a run's outputs; when the block
    ends with an error or an interrupt, remove the folders it made that are still empty
    (innermost first), so that a run that wrote nothing leaves no new folder behind."""
    path = os.path.abspath(os.fspath(path))
    made = []
    p = path
    while not os.path.isdir(p):
        made.append(p)
        p = os.path.dirname(p)
    os.makedirs(path, exist_ok=True)
    try:
        yield
    except BaseException:
        for d in made:
            try:
                os.rmdir(d)  # only an empty folder goes
            except OSError:
                break
        raise


class OutputSet:
    """Stage, lock and replace the set of files PREFIX.* (see the module docstring).

    Args:
        prefix: the final prefix (``out/sample`` -> ``out/sample.bed`` ...).
        legacy: suffix patterns (fnmatch) of the files a previous run wrote, for a prefix
            with no .NAME.outputs list.
    """

    def __init__(self, prefix: str | os.PathLike, legacy: tuple[str, ...] = ()):
        self.final = os.fspath(prefix)
        self.folder = os.path.dirname(os.path.abspath(self.final))
        self.name = os.path.basename(self.final)
        self.legacy = tuple(legacy)
        self.lock = os.path.join(self.folder, f"{self.name}.lock")
        self.manifest = os.path.join(self.folder, f".{self.name}.outputs")
        self.staging: str | None = None
        self.prefix: str | None = None  # where the writers write: STAGING/NAME
        self.files: list[str] = []  # the final paths, once committed
        self._lock = Lock(self.lock, self.final)

    # ---------------------------------------------------------------- staging
    def _stale_staging(self) -> list[str]:
        """Staging folders of this prefix left by killed runs (we hold the lock, so no
        live run writes this prefix)."""
        pat = re.compile(rf"\.{re.escape(self.name)}\.staging\.[A-Za-z0-9_]+")
        return [os.path.join(self.folder, n) for n in os.listdir(self.folder)
                if pat.fullmatch(n)]

    def __enter__(self) -> OutputSet:
        if not self.name or self.name in (".", ".."):
            raise SemisegError(f"--out {self.final!r}: expected a prefix (e.g. out/sample), "
                               "not a folder")
        if not os.path.isdir(self.folder):
            raise SemisegError(f"output folder {self.folder} does not exist")
        self._lock.__enter__()
        try:
            for path in self._stale_staging():
                shutil.rmtree(path, ignore_errors=True)
            self.staging = tempfile.mkdtemp(prefix=f".{self.name}.staging.", dir=self.folder)
        except BaseException as err:
            self._lock.release()
            if isinstance(err, OSError):
                raise SemisegError(f"cannot write outputs at {self.final}: "
                                   f"{err.strerror}") from None
            raise
        self.prefix = os.path.join(self.staging, self.name)
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        error = exc if isinstance(exc, OSError) else None
        try:
            if exc_type is None:
                self._commit()
        except OSError as err:
            error = err
        finally:
            if self.staging is not None:
                shutil.rmtree(self.staging, ignore_errors=True)
            self._lock.release()
        if error is not None:
            raise SemisegError(self._message(error)) from None
        if isinstance(exc, SemisegError) and self.prefix and self.prefix in str(exc):
            # a writer's own message: name the outputs, not their staging place
            raise type(exc)(str(exc).replace(self.prefix, self.final)) from None
        return False

    def _message(self, err: OSError) -> str:
        where = os.fspath(err.filename) if err.filename else ""
        why = err.strerror or str(err)
        if where and not os.path.abspath(where).startswith(self.folder + os.sep):
            return f"{where}: {why}"  # not an output (an input that could not be read)
        return (f"cannot write the outputs {self.final}.*: {why}; nothing was written "
                "(the previous files of this prefix, if any, are unchanged)")

    # ---------------------------------------------------------------- commit
    def _previous(self) -> list[str]:
        """Names (in the folder) of the previous set of this prefix."""
        listed = _read(self.manifest)  # one name per line
        if listed is not None:
            names = [n for n in listed.splitlines() if n and "/" not in n and n != ".."]
        else:
            head = f"{self.name}."
            names = [n for n in os.listdir(self.folder) if n.startswith(head) and
                     any(fnmatch.fnmatchcase(n[len(head):], p) for p in self.legacy)]
        return [n for n in names if os.path.isfile(os.path.join(self.folder, n))]

    def _staged(self) -> list[str]:
        return sorted(n for n in os.listdir(self.staging) if not n.startswith(".")
                      and os.path.isfile(os.path.join(self.staging, n)))

    def staged_files(self) -> list[str]:
        """The final paths of the files staged so far (what the set will hold)."""
        return [os.path.join(os.path.dirname(self.final), n) for n in self._staged()]

    def _commit(self) -> None:
        new = self._staged()
        listing = os.path.join(self.staging, f".{self.name}.outputs")
        with open(listing, "w") as fh:  # written before anything moves (disk full: fail here)
            fh.write("".join(f"{n}\n" for n in new))
        with deferred():
            old = sorted(set(self._previous())
                         | {n for n in new if os.path.lexists(os.path.join(self.folder, n))})
            aside = tempfile.mkdtemp(prefix=f".{self.name}.previous.", dir=self.folder)
            moved_old: list[str] = []
            moved_new: list[str] = []
            try:
                for n in old:
                    os.rename(os.path.join(self.folder, n), os.path.join(aside, n))
                    moved_old.append(n)
                for n in new:
                    os.rename(os.path.join(self.staging, n), os.path.join(self.folder, n))
                    moved_new.append(n)
                os.replace(listing, self.manifest)
            except OSError:
                for n in moved_new:
                    os.rename(os.path.join(self.folder, n), os.path.join(self.staging, n))
                for n in moved_old:
                    os.rename(os.path.join(aside, n), os.path.join(self.folder, n))
                os.rmdir(aside)
                raise
            shutil.rmtree(aside, ignore_errors=True)
        self.files = [os.path.join(os.path.dirname(self.final), n) for n in new]
