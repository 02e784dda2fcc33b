"""Semantic search with the real local model (fetched by ``make test``)."""

from __future__ import annotations

import pytest

import strata
from conftest import FACTS, embedding_assets_present

pytestmark = pytest.mark.skipif(not embedding_assets_present(), reason="run make test: it fetches the model")


def test_memory_search_finds_a_paraphrase(engine):
    session = engine.session("s", "coder")
    session.append_many([
        {"role": "user", "content": FACTS["secret"]},
        {"role": "assistant", "content": "Understood, I will read it from the environment."},
        {"role": "user", "content": "Let's rename the exporter module to reporting."},
        {"role": "assistant", "content": "Renamed, and the imports are updated."},
    ])
    assert engine.embed() >= 4
    answer = session.call_tool("memory_search", {"query": "how often do the credentials for the test environment change",
                                                 "limit": 2, "include_in_context": True})
    assert "error" not in answer, answer
    assert "45 days" in str(answer["results"][0])


def test_the_background_embedder_catches_up(engine):
    engine.start_embedding()
    session = engine.session("s", "coder")
    session.append({"role": "user", "content": "The office wifi password is on the fridge."})
    assert engine.wait_embedded(60)
    assert engine.stats()["embedding_backlog"] == 0


def test_without_the_model_search_says_so_and_the_rest_works(db_path):
    with strata.Engine(db_path, {"recall": {"embed_assets": "/nonexistent/strata-assets"}}) as engine:
        session = engine.session("s", "coder")
        session.append({"role": "user", "content": "hello"})
        answer = session.call_tool("memory_search", {"query": "hello", "include_in_context": True})
        assert answer["count"] == 1 and "semantic_rank" not in answer["results"][0]
        assert "semantic search unavailable" in answer["semantic_coverage"]["note"]
        assert "keywords only" in answer["semantic_coverage"]["note"]
        with pytest.raises(strata.EmbedderUnavailable):
            engine.embed()
        assert session.call_tool("memory_grep", {"query": "hello", "include_in_context": True})["count"] == 1
