"""Which llama.cpp CPU kernels a model may be loaded with, decided once per machine.

llama.cpp puts weights into "extra" buffer types when the CPU offers them: AMX tiles on recent
Intel Xeons, and repacked (interleaved) layouts. A llama-cpp-python wheel built from source with
``-march=native`` on a CPU that reports AMX compiles the AMX kernels in and uses them for every
matrix they support. Under some hypervisors the CPU reports AMX and the kernel grants the
permission to use it (``arch_prctl(ARCH_REQ_XCOMP_PERM)`` succeeds), yet the first ``ldtilecfg``
raises a general-protection fault: the process dies of SIGSEGV on its first prompt, with no Python
traceback, in the middle of a batch. That was measured on a 2-core Xeon VM (benchmarks/README.md,
"Weight layouts on a machine whose AMX faults"); the same build loaded without the extra buffers
evaluated prompts at 131 tok/s.

So when the build has AMX, a child process loads the model with the extra buffers and runs one
prompt. If the child dies, the parent loads the model with llama.cpp's plain CPU kernels. The
verdict is stored per (llama.cpp build, CPU, model file) in the models directory, so the probe
(a few seconds, the model file being in the page cache) runs once per machine, not once per
process. Builds without AMX are never probed: their extra buffers are the repacked layouts, which
run on every CPU the build runs on.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import platform
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = [
    "ExtraBuffers",
    "KernelChoice",
    "build_has_amx",
    "choose_kernels",
    "model_params_with",
    "probe_extra_buffers",
]

log = logging.getLogger(__name__)

ExtraBuffers = Literal["auto", "on", "off"]
VERDICTS = "llama-kernels.json"
PROBE_TIMEOUT_S = 180.0

# Runs in a child: a fault there kills the child, not the caller. 64 tokens is a batch, so the
# matrix-matrix kernels (the AMX ones) run, not only the one-token path.
_PROBE = (
    "import sys\n"
    "from llama_cpp import Llama\n"
    "m = Llama(model_path=sys.argv[1], n_ctx=256, verbose=False)\n"
    "m.eval(m.tokenize(b'probe ' * 64))\n"
)


@dataclass(frozen=True)
class KernelChoice:
    """Whether to load with llama.cpp's extra buffer types, and why (shown by ``doctor``)."""

    extra_buffers: bool
    reason: str


def build_has_amx() -> bool:
    """Does the installed llama.cpp carry AMX kernels (it says so in its system info)?"""
    import llama_cpp

    info = llama_cpp.llama_print_system_info()
    text = info.decode(errors="replace") if isinstance(info, bytes) else str(info)
    return "AMX_INT8 = 1" in text


def _cpu_identity() -> str:
    """The CPU's model name and feature flags: what decides which kernels can run."""
    try:
        lines = Path("/proc/cpuinfo").read_text(errors="replace").splitlines()
    except OSError:
        return f"{platform.machine()} {platform.processor()}"
    wanted = [ln for ln in lines if ln.startswith(("model name", "flags"))]
    return "\n".join(dict.fromkeys(wanted))  # one copy per distinct line, in order


def _build_identity() -> str:
    import llama_cpp

    lib = Path(llama_cpp.__file__).parent / "lib"
    parts = [getattr(llama_cpp, "__version__", "?")]
    for so in sorted(lib.glob("libggml-cpu*")):
        st = so.stat()
        parts.append(f"{so.name}:{st.st_size}:{st.st_mtime_ns}")
    return "|".join(parts)


def _verdict_key(model_path: Path) -> str:
    st = model_path.stat()
    raw = f"{_build_identity()}\n{_cpu_identity()}\n{model_path.name}:{st.st_size}"
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


def probe_extra_buffers(model_path: Path, *, timeout_s: float = PROBE_TIMEOUT_S) -> tuple[bool | None, str]:
    """Load ``model_path`` with the extra buffers in a child process and run one prompt.

    Returns (True, …) when the child finished, (False, …) when it died of a signal, and
    (None, …) when the probe itself could not run (a timeout, an import error): no verdict.
    """
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _PROBE, str(model_path)],
            capture_output=True,
            timeout=timeout_s,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"probe did not finish: {type(exc).__name__}"
    if proc.returncode == 0:
        return True, "a prompt ran with llama.cpp's AMX kernels"
    if proc.returncode < 0:
        return False, f"llama.cpp's AMX kernels faulted in a probe (signal {-proc.returncode})"
    tail = proc.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
    return None, f"probe exited with status {proc.returncode}: {tail[0][:200]}"


_LOCK = threading.Lock()


def _read_verdicts(path: Path) -> dict[str, dict[str, object]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_verdicts(path: Path, verdicts: dict[str, dict[str, object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(verdicts, fh, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def choose_kernels(
    model_path: Path,
    cache_dir: Path,
    setting: ExtraBuffers = "auto",
    *,
    has_amx: Callable[[], bool] = build_has_amx,
    probe: Callable[[Path], tuple[bool | None, str]] = probe_extra_buffers,
) -> KernelChoice:
    """The kernels to load ``model_path`` with under ``setting`` ("auto" probes AMX builds once)."""
    if setting == "on":
        return KernelChoice(True, "llm.local.extra_buffers = on")
    if setting == "off":
        return KernelChoice(False, "llm.local.extra_buffers = off")
    if not has_amx():
        return KernelChoice(True, "llama.cpp build has no AMX kernels")
    path = cache_dir / VERDICTS
    key = _verdict_key(model_path)
    with _LOCK:
        known = _read_verdicts(path).get(key)
        if isinstance(known, dict) and isinstance(known.get("extra_buffers"), bool):
            return KernelChoice(bool(known["extra_buffers"]), str(known.get("reason", "")))
        ok, reason = probe(model_path)
        if ok is not None:  # no verdict (a timeout) is not stored: the next load probes again
            # read again: another process may have stored a verdict while this one probed
            verdicts = _read_verdicts(path)
            verdicts[key] = {"extra_buffers": ok, "reason": reason, "model": model_path.name}
            try:
                _write_verdicts(path, verdicts)
            except OSError as exc:  # a read-only cache only means the probe runs again next time
                log.warning("could not store the kernel probe's verdict in %s: %s", path, exc)
    if not ok:
        log.warning("%s; loading %s with plain CPU kernels", reason, model_path.name)
    return KernelChoice(bool(ok), reason)


@contextlib.contextmanager
def model_params_with(*, extra_buffers: bool) -> Iterator[None]:
    """``Llama(...)`` built inside this block loads with or without the extra buffer types.

    llama-cpp-python's constructor takes no argument for llama.cpp's ``use_extra_bufts``; it
    starts from ``llama_model_default_params()``, so that one call is wrapped for the duration.
    Only one load may run inside it: ``load_model`` holds its lock, and the paper-qa server's
    child process loads one model.
    """
    import llama_cpp.llama as llama_module

    lib = llama_module.llama_cpp
    original = lib.llama_model_default_params
    if extra_buffers:
        yield
        return

    def without_extra() -> object:
        params = original()
        params.use_extra_bufts = False
        return params

    lib.llama_model_default_params = without_extra
    try:
        yield
    finally:
        lib.llama_model_default_params = original
