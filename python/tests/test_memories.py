"""Memories: the user's side (every category), the agent's (never user_preferences), and the
preferences summaries propose for the user to accept or reject."""

from __future__ import annotations

import pytest

import strata
from conftest import SMALL_WINDOW, transcript


def test_save_get_list_and_delete_a_memory(engine):
    saved = engine.save_memory("coder", "user_preferences", "Indentation", "Tabs, never spaces.")
    assert saved["created"] is True and saved["memory"]["key"] == "indentation"
    assert engine.save_memory("coder", "user_preferences", "indentation", "Tabs.")["created"] is False
    assert engine.memory("coder", "user_preferences", "indentation")["content"] == "Tabs."
    assert [m["key"] for m in engine.memories("coder")] == ["indentation"]
    assert engine.delete_memory("coder", "user_preferences", "indentation") is True
    assert engine.memory("coder", "user_preferences", "indentation") is None


def test_preferences_ride_on_every_turn(engine):
    engine.save_memory("coder", "user_preferences", "language", "Answer in British English.")
    session = engine.session("s", "coder")
    session.append({"role": "user", "content": "Hi there"})
    assert "Answer in British English." in session.prepare_context().messages[-1]["content"]


def test_the_agent_saves_progress_but_not_a_preference(engine):
    session = engine.session("s", "coder")
    saved = session.call_tool("save_memory", {"category": "progress", "key": "migration", "title": "Migration",
                                              "content": "invoices moved, payments next"})
    assert "error" not in saved
    refused = session.call_tool("save_memory", {"category": "user_preferences", "key": "x", "title": "X",
                                                "content": "y"})
    assert "error" in refused
    assert engine.memory("coder", "user_preferences", "x") is None
    listed = session.call_tool("memory_list", {})
    assert "migration" in str(listed)


def said_british_english(engine: strata.Engine) -> None:
    """A chat in which the user states a preference, compacted so that it is proposed."""
    session = engine.session("s", "coder")
    messages = transcript(400)
    messages.insert(5, {"role": "user", "content": "From now on, answer in British English."})
    session.append_many(messages)
    session.compact()


def test_a_proposed_preference_waits_for_the_user(db_path):
    with strata.Engine(db_path, SMALL_WINDOW) as engine:
        said_british_english(engine)
        proposals = engine.proposals("coder")
        assert proposals, "the extractive summarizer proposes what is said in so many words"
        key = proposals[0]["key"]
        assert engine.memory("coder", "user_preferences", key) is None
        accepted = engine.accept_proposal("coder", key)
        assert accepted["category"] == "user_preferences"
        assert engine.memory("coder", "user_preferences", key) is not None
        with pytest.raises(strata.NotFound):
            engine.reject_proposal("coder", key)


def test_rejecting_a_proposal_deletes_it(db_path):
    with strata.Engine(db_path, SMALL_WINDOW) as engine:
        said_british_english(engine)
        key = engine.proposals("coder")[0]["key"]
        engine.reject_proposal("coder", key)
        assert all(p["key"] != key for p in engine.proposals("coder"))
        assert engine.memory("coder", "user_preferences", key) is None
