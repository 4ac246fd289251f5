"""Read a file in a worker process under a wall-clock and a memory limit.

pypdf is pure Python and parses whatever a file says, within its own per-stream limits. A
50 KB PDF can still keep it busy for minutes (text extraction is quadratic in the text operators
of a page, so one page of 100,000 of them never ends), and a 4 MB one can hold gigabytes (forty
pages, each its own 70 MB content stream, every decoded stream cached). Neither raises: the
build would stall, or be killed with everything it held. So a PDF is read in a worker process
that has an address-space limit (``RLIMIT_AS``) and is killed when a file takes too long; the
file is reported with the reason and the build goes on with a fresh worker.

The worker is a plain ``python -c`` child, not a ``multiprocessing`` one: spawn re-imports the
parent's ``__main__`` (for ``scholarloop``, the whole CLI: 1.3 s and its memory inside the limit),
and fork copies a parent that may already hold torch and its threads. It lives for a whole build
and reads file after file, so a normal PDF costs one round trip through a pipe, not a process
start. Requests and results travel as pickles through two ``multiprocessing.connection``
pipes of its own (stdout stays free for whatever a library prints).

POSIX only; elsewhere (or with both limits off) files are read in-process.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent.core.models import ReadIssue
    from agent.core.settings import IndexSettings
    from corpus.metadata import ReadResult

__all__ = ["IsolatedReader", "pdf_reader"]

_PDF_READER = "corpus.pdf:read_pdf"
_STOP_GRACE_S = 2.0
# A worker's start-up (interpreter, pydantic, pypdf: ~0.5 s CPU) is not charged to the first
# file; it has this long to say it is ready.
_START_TIMEOUT_S = 120.0


def _issue(path: Path, reason: str) -> ReadIssue:
    from agent.core.models import ReadIssue
    from corpus.metadata import source_name

    return ReadIssue(source=source_name(path), reason=reason)


class IsolatedReader:
    """Calls ``read`` (a ``"module:function"`` taking a path) in a worker process.

    ``timeout_s`` bounds each file's wall-clock time, ``memory_mb`` the worker's whole address
    space (the interpreter and its libraries take ~56 MiB of it before a file is opened).
    ``None`` turns a limit off. One file is read at a time; calls from several threads wait
    their turn. Use as a context manager, or call :meth:`close`.
    """

    def __init__(
        self,
        read: str,
        *,
        timeout_s: float | None,
        memory_mb: int | None,
        timeout_setting: str = "index.file_timeout_s",
        memory_setting: str = "index.file_memory_mb",
    ) -> None:
        self.read = read
        self.timeout_s = timeout_s
        self.memory_mb = memory_mb
        self._settings = (timeout_setting, memory_setting)
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._inbox: Connection | None = None  # results from the worker
        self._outbox: Connection | None = None  # paths to the worker
        self.started = 0  # workers started (1 + one after each kill)

    def __enter__(self) -> IsolatedReader:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __call__(self, path: Path) -> ReadResult:
        with self._lock:
            return self._read(path)

    def _read(self, path: Path) -> ReadResult:
        try:
            inbox, outbox = self._ensure_worker()
            outbox.send(path)
        except OSError:  # the idle worker died (killed from outside): one fresh try
            self._stop(kill=True)
            try:
                inbox, outbox = self._ensure_worker()
                outbox.send(path)
            except OSError as exc:
                self._stop(kill=True)
                return _issue(path, f"the reading process did not start: {exc}")
        if not inbox.poll(self.timeout_s):
            self._stop(kill=True)
            return _issue(
                path, f"took longer than {self.timeout_s:g} s to read ({self._settings[0]}); skipped"
            )
        try:
            kind, value = inbox.recv()
        except (EOFError, OSError):
            return _issue(path, self._death_reason())
        if kind == "ok":
            result: ReadResult = value
            return result
        self._stop(kill=True)  # after a MemoryError the worker's heap is not worth keeping
        if kind == "memory":
            return _issue(
                path, f"exceeded the {self.memory_mb} MiB memory limit ({self._settings[1]}); skipped"
            )
        return _issue(path, str(value))

    def _ensure_worker(self) -> tuple[Connection, Connection]:
        if self._proc is not None and self._inbox is not None and self._outbox is not None:
            return self._inbox, self._outbox
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        env = dict(os.environ)
        # The reader's module (a test's too) must import in the worker as it does here.
        env["PYTHONPATH"] = os.pathsep.join(p or os.getcwd() for p in sys.path)
        try:
            self._proc = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    "from corpus.isolate import serve; serve()",
                    str(to_worker_r),
                    str(from_worker_w),
                    str(self.memory_mb or 0),
                    self.read,
                    str(os.getpid()),
                ],
                pass_fds=(to_worker_r, from_worker_w),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                env=env,
                close_fds=True,
            )
        finally:
            os.close(to_worker_r)
            os.close(from_worker_w)
        self._inbox = Connection(from_worker_r, writable=False)
        self._outbox = Connection(to_worker_w, readable=False)
        self.started += 1
        try:
            ready = self._inbox.poll(_START_TIMEOUT_S) and self._inbox.recv() == ("ready", None)
        except (EOFError, OSError):
            ready = False
        if not ready:
            raise OSError(f"no worker ready within {_START_TIMEOUT_S:g} s")
        return self._inbox, self._outbox

    def _death_reason(self) -> str:
        proc = self._proc
        self._stop(kill=True)
        code = proc.returncode if proc is not None else None
        if code is not None and code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
            hint = " (out of memory?)" if -code == signal.SIGKILL else ""
            return f"the reading process died of {name}{hint}; skipped"
        return f"the reading process exited (code {code}); skipped"

    def _stop(self, *, kill: bool) -> None:
        proc, self._proc = self._proc, None
        for conn in (self._outbox, self._inbox):
            if conn is not None:
                conn.close()
        self._inbox = self._outbox = None
        if proc is None:
            return
        if kill:
            proc.kill()
        try:
            proc.wait(_STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def close(self) -> None:
        """Stop the worker: closing its request pipe lets an idle one exit by itself."""
        with self._lock:
            self._stop(kill=False)


def pdf_reader(settings: IndexSettings) -> IsolatedReader | _InProcess:
    """The PDF reader a build uses: isolated under the settings' limits, or in-process when
    both limits are off or the platform has no ``RLIMIT_AS``/fd-passing (not POSIX)."""
    if os.name != "posix" or (settings.file_timeout_s is None and settings.file_memory_mb is None):
        return _InProcess()
    return IsolatedReader(_PDF_READER, timeout_s=settings.file_timeout_s, memory_mb=settings.file_memory_mb)


class _InProcess:
    """The same interface, reading in this process (no limits)."""

    def __enter__(self) -> _InProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def __call__(self, path: Path) -> ReadResult:
        from corpus.pdf import read_pdf

        return read_pdf(path)

    def close(self) -> None:
        return None


def _limit_memory(memory_mb: int) -> None:
    import resource

    limit = memory_mb * 1024 * 1024
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _die_with(parent: int) -> None:
    """A worker outlives a killed build only until its current file ends, which for a hostile
    file is never: on Linux the kernel kills it with its parent; Ctrl-C is the parent's to handle."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # it died before the line above took effect
        os._exit(1)


def serve() -> None:
    """The worker's loop: read each path sent, send back ``(kind, value)``; stop at EOF.

    ``kind`` is ``"ok"`` (value: the reader's result), ``"memory"`` (the limit was hit) or
    ``"error"`` (value: the reason).
    """
    inbox = Connection(int(sys.argv[1]), writable=False)
    outbox = Connection(int(sys.argv[2]), readable=False)
    memory_mb, spec = int(sys.argv[3]), sys.argv[4]
    _die_with(int(sys.argv[5]))
    if memory_mb:
        _limit_memory(memory_mb)  # before the reader's imports: they count too
    read: Callable[[Path], Any] | None = None
    broken = ""
    try:
        module, _, name = spec.partition(":")
        read = getattr(importlib.import_module(module), name)
    except MemoryError:
        broken = f"the reader does not start within {memory_mb} MiB; raise index.file_memory_mb"
    except Exception as exc:  # reported with every file, so the build says why nothing was read
        broken = f"the reader {spec} does not start: {type(exc).__name__}: {exc}"
    outbox.send(("ready", None))
    while True:
        try:
            path = inbox.recv()
        except (EOFError, OSError):
            return
        reply: tuple[str, Any]
        try:
            reply = ("ok", read(path)) if read is not None else ("error", broken)
        except MemoryError:
            reply = ("memory", None)
        except Exception as exc:  # a reader should not raise; if it does, the file says so
            reply = ("error", f"reader failed: {type(exc).__name__}: {exc}")
        try:
            outbox.send(reply)
        except MemoryError:  # pickling the result is one more copy of it
            reply = ("memory", None)
            outbox.send(reply)
        if reply[0] == "memory":
            return
