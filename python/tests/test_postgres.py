"""The package on PostgreSQL: the same ``strata.Engine`` over a ``postgres://`` url, on the
server ``make test`` starts (``scripts/postgres.sh``; its url in ``STRATA_TEST_POSTGRES``).
Each run writes under personas and keys of its own, so runs never see each other's rows."""

from __future__ import annotations

import os
import uuid

import pytest

import strata
from conftest import FACTS, SMALL_WINDOW, transcript


@pytest.fixture
def url() -> str:
    url = os.environ.get("STRATA_TEST_POSTGRES")
    assert url, "STRATA_TEST_POSTGRES names the test server: run make test, which starts it"
    return url


def test_an_engine_on_postgresql_stores_folds_and_brings_back(url, tmp_path):
    persona = "py-" + uuid.uuid4().hex[:12]
    with strata.Engine(url, SMALL_WINDOW) as engine:
        assert "postgres:postgres" not in repr(engine), "the password is shown"
        session = engine.session(persona + "-week", persona=persona)
        messages = transcript(600)
        assert len(session.append_many(messages)) == len(messages)
        done = session.compact()
        assert done["compaction"]["nodes_created"] > 0, done
        context = session.prepare_context()
        assert context.tokens["total"] <= context.tokens["budget"]
        # The planted port was folded away; the tools bring it back, as on SQLite.
        found = session.call_tool("memory_grep", {"query": "6543"})
        assert "error" not in found, found
        assert any("6543" in str(hit) for hit in found["results"]), found
        assert engine.save_memory(persona, "user_preferences", "tone", "terse answers")["created"] is True
        assert engine.memory(persona, "user_preferences", "tone")["content"] == "terse answers"
        refused = session.call_tool("save_memory", {"category": "user_preferences", "key": "tone",
                                                    "title": "Tone", "content": "chatty"})
        assert refused["error"]["kind"] == "forbidden"
        assert engine.doctor()["healthy"] is True
        # A backup of the fleet's database is a new SQLite file holding the same rows.
        backup = tmp_path / "fleet-backup.db"
        engine.backup(str(backup))
        with strata.Engine(str(backup)) as copy:
            again = copy.session(session.key, persona=persona).call_tool("memory_grep", {"query": "6543"})
            assert any("6543" in str(hit) for hit in again["results"]), again
            assert copy.memory(persona, "user_preferences", "tone")["content"] == "terse answers"
            assert copy.doctor()["healthy"] is True
        with pytest.raises(strata.BadInput, match="exists"):
            engine.backup(str(backup))


def test_two_engines_on_one_database_share_one_memory(url):
    persona = "py-" + uuid.uuid4().hex[:12]
    with strata.Engine(url) as first, strata.Engine(url) as second:
        first.session(persona + "-chat", persona=persona).append({"role": "user", "content": FACTS["secret"]})
        seen = second.session(persona + "-chat", persona=persona)
        answer = seen.call_tool("memory_grep", {"query": "45 days", "include_in_context": True})
        assert answer["count"] == 1, answer
