"""A LangGraph graph compiled with ``StrataStore``: its nodes keep and find facts in strata's
memories; the model is the local OpenAI-compatible server (``fake_chat``)."""

from __future__ import annotations

import asyncio
from typing import TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore, InvalidNamespaceError
from openai import OpenAI

import strata
from conftest import embedding_assets_present
from fake_chat import ChatModel, chat_server  # noqa: F401 - chat_server is a fixture
from strata.integrations.langgraph import StrataStore


class State(TypedDict, total=False):
    user: str
    question: str
    answer: str


def graph_on(url: str, store: StrataStore):
    client = OpenAI(base_url=url, api_key="local-test")

    def respond(state: State, *, store: BaseStore) -> State:
        namespace = (state["user"], "memo")
        question = state["question"]
        if question.endswith("?"):
            found = store.search((state["user"],), query=question, limit=3)
            facts = " ".join(item.value["fact"] for item in found)
            messages = [{"role": "system", "content": f"Known facts: {facts}"}]
        else:
            store.put(namespace, "staging-port", {"fact": question})
            messages = []
        messages.append({"role": "user", "content": question})
        reply = client.chat.completions.create(model="local", messages=messages)
        return {"answer": reply.choices[0].message.content}

    builder = StateGraph(State)
    builder.add_node("respond", respond)
    builder.add_edge(START, "respond")
    builder.add_edge("respond", END)
    return builder.compile(store=store)


def test_a_graph_keeps_and_finds_a_fact_through_the_store(db_path, chat_server):
    with strata.Engine(db_path) as engine:
        graph = graph_on(chat_server, StrataStore(engine))
        first = graph.invoke({"user": "alice", "question": "Please remember: staging listens on port 6543."})
        assert first["answer"] == "Noted."
        second = graph.invoke({"user": "alice", "question": "Which port does staging use?"})
        assert second["answer"] == "Staging listens on port 6543."
        memory = engine.memory("alice", "memo", "staging_port")
        assert memory["title"] == "staging-port" and "6543" in memory["content"]
    assert "6543" in ChatModel.requests[1]["messages"][0]["content"]


def test_get_put_delete_namespaces_and_filters(db_path):
    with strata.Engine(db_path) as engine:
        store = StrataStore(engine)
        engine.session("s", "alice")  # a persona the store lists
        store.put(("alice", "memo"), "db", {"fact": "postgres 16", "kind": "infra"})
        store.put(("alice", "progress"), "task", {"fact": "migrating invoices", "kind": "work"})
        item = store.get(("alice", "memo"), "db")
        assert item.value == {"fact": "postgres 16", "kind": "infra"} and item.namespace == ("alice", "memo")
        store.put(("alice", "memo"), "db", {"fact": "postgres 17", "kind": "infra"})
        again = store.get(("alice", "memo"), "db")
        assert again.value["fact"] == "postgres 17" and again.created_at == item.created_at
        assert [i.key for i in store.search(("alice",), filter={"kind": "work"})] == ["task"]
        assert store.list_namespaces() == [("alice", "memo"), ("alice", "progress")]
        assert store.list_namespaces(prefix=("alice",), max_depth=1) == [("alice",)]
        # A key of the same snake_case form as another is refused, and so is a namespace strata
        # has no place for, or a value too long for a memory; none of them writes anything.
        with pytest.raises(strata.BadInput):
            store.put(("alice", "memo"), "DB", {"fact": "other"})
        with pytest.raises(InvalidNamespaceError):
            store.put(("alice", "notes"), "x", {"fact": "y"})
        with pytest.raises(InvalidNamespaceError):
            store.get(("alice",), "db")
        with pytest.raises(strata.BadInput):
            store.put(("alice", "memo"), "long", {"fact": "x" * 600})
        assert store.get(("alice", "memo"), "long") is None
        assert store.get(("alice", "memo"), "db").value["fact"] == "postgres 17"
        assert asyncio.run(store.aget(("alice", "memo"), "db")).value["fact"] == "postgres 17"
        store.delete(("alice", "memo"), "db")
        assert store.get(("alice", "memo"), "db") is None and engine.memory("alice", "memo", "db") is None


def test_ttls_expire_items_and_reads_refresh_them(db_path):
    with strata.Engine(db_path) as engine:
        store = StrataStore(engine)
        store.put(("alice", "memo"), "fleeting", {"fact": "gone at once"}, ttl=1e-9)
        assert store.get(("alice", "memo"), "fleeting") is None
        assert engine.memory("alice", "memo", "fleeting") is None  # deleted when met
        store.put(("alice", "memo"), "kept", {"fact": "an hour"}, ttl=60)
        before = engine.memory("alice", "memo", "kept")["content"]
        assert store.get(("alice", "memo"), "kept", refresh_ttl=False).value == {"fact": "an hour"}
        assert engine.memory("alice", "memo", "kept")["content"] == before
        assert store.get(("alice", "memo"), "kept").value == {"fact": "an hour"}
        assert '"ttl":60' in engine.memory("alice", "memo", "kept")["content"]


@pytest.mark.skipif(not embedding_assets_present(), reason="run make test: it fetches the model")
def test_search_finds_a_memory_by_meaning(db_path):
    with strata.Engine(db_path) as engine:
        store = StrataStore(engine)
        store.put(("alice", "memo"), "rotation", {"fact": "The staging password rotates every 45 days."})
        store.put(("alice", "memo"), "lunch", {"fact": "The team eats lunch at noon on Fridays."})
        engine.embed()
        found = store.search(("alice", "memo"), query="how often do credentials change")
        assert found[0].key == "rotation" and found[0].score is not None
