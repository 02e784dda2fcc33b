"""strata's memories as a LangGraph store::

    from langgraph.graph import StateGraph
    from strata.integrations.langgraph import StrataStore

    graph = builder.compile(store=StrataStore(engine))
    # in a node: store.put(("alice", "memo"), "staging", {"port": 6543})
    #            store.search(("alice",), query="which port does staging use?")

A namespace is ``(persona, category)``: the persona whose memories these are, and one of
strata's categories (``progress``, ``user_preferences``, ``memo``). An item is one memory of
``agent_memories``: its key is the memory's key (strata keys are snake_case: ``"Staging-DB"``
is stored as ``staging_db`` and two keys alike in that form are one memory, so a second one is
refused), its title the key as given, its content the JSON of the value with the item's
timestamps and TTL (at most 500 characters in all: memories are facts, not documents). The same
memories are in the persona's conversations: the injection shows them and ``memory_search``
finds them.

``search`` with a ``query`` ranks by meaning fused with keywords, as ``memory_search`` does (by
keywords alone without the embedding model). TTLs are per item, in minutes, refreshed on reads
unless told otherwise (``TTLConfig``); an expired item is not returned and is deleted when met.
strata's own time-to-live per category (``[memory_ttl]``) applies as well.
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, Iterable, List, Optional, Tuple

import strata

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        InvalidNamespaceError,
        Item,
        ListNamespacesOp,
        PutOp,
        SearchItem,
        SearchOp,
        TTLConfig,
    )
except ImportError as error:  # pragma: no cover - the message is the point
    raise ImportError("strata.integrations.langgraph needs langgraph: "
                      "pip install 'strata-memory[langgraph]'") from error

__all__ = ["StrataStore"]

CATEGORIES = ("progress", "user_preferences", "memo")


def _namespace(namespace: Tuple[str, ...]) -> Tuple[str, str]:
    if len(namespace) != 2 or namespace[1] not in CATEGORIES:
        raise InvalidNamespaceError(
            f"a StrataStore namespace is (persona, category) with a category of {', '.join(CATEGORIES)}; "
            f"got {namespace!r}")
    return namespace[0], namespace[1]


def _now() -> datetime:
    return datetime.now(timezone.utc)


class StrataStore(BaseStore):
    """A LangGraph ``BaseStore`` over the memories of ``engine``."""

    supports_ttl = True

    def __init__(self, engine: strata.Engine, *, ttl: Optional[TTLConfig] = None):
        self._engine = engine
        self.ttl_config = ttl

    # What each operation does.

    def batch(self, ops: Iterable[Any]) -> List[Any]:
        """Runs each operation in order; a bad one raises and the ones after it do not run."""
        results: List[Any] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op))
            elif isinstance(op, PutOp):
                results.append(self._put(op))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            else:
                raise TypeError(f"StrataStore cannot run {type(op).__name__}")
        return results

    async def abatch(self, ops: Iterable[Any]) -> List[Any]:
        """:meth:`batch` in a worker thread (strata's calls block, with the GIL released)."""
        return await asyncio.to_thread(self.batch, list(ops))

    def _refresh(self, refresh: Optional[bool]) -> bool:
        if refresh is not None:
            return refresh
        return (self.ttl_config or {}).get("refresh_on_read", True)

    def _item(self, memory: Dict[str, Any], refresh: bool, score: Optional[float] = None) -> Optional[Item]:
        """The item a memory holds, or ``None`` when it is not one of this store's or expired
        (then it is deleted)."""
        try:
            envelope = json.loads(memory["content"])
            value = envelope["value"]
        except (ValueError, KeyError, TypeError):
            return None  # a memory the agent or a person wrote, not a store item
        persona, category = memory["persona"], memory["category"]
        expires = envelope.get("expires_at")
        if expires is not None and datetime.fromisoformat(expires) <= _now():
            self._engine.delete_memory(persona, category, memory["key"])
            return None
        updated = datetime.fromisoformat(memory["updated_at"].replace("Z", "+00:00"))
        created = datetime.fromisoformat(envelope.get("created_at", memory["updated_at"]).replace("Z", "+00:00"))
        if refresh and envelope.get("ttl") is not None:
            self._write(persona, category, memory["title"], value, envelope["ttl"], created)
        fields = dict(namespace=(persona, category), key=memory["title"], value=value,
                      created_at=created, updated_at=updated)
        return SearchItem(score=score, **fields) if score is not None else Item(**fields)

    def _write(self, persona: str, category: str, key: str, value: Any, ttl: Optional[float],
               created: datetime) -> None:
        envelope: Dict[str, Any] = {"value": value, "created_at": created.isoformat()}
        if ttl is not None:
            envelope["ttl"] = ttl
            envelope["expires_at"] = (_now() + timedelta(minutes=ttl)).isoformat()
        content = json.dumps(envelope, ensure_ascii=False, separators=(",", ":"))
        if len(content) > 500:
            raise strata.BadInput(
                f"the item {key!r} is {len(content)} characters as stored (its value's JSON, times and TTL); "
                "a strata memory holds at most 500")
        self._engine.save_memory(persona, category, key, content, title=key)

    def _memory(self, persona: str, category: str, key: str) -> Optional[Dict[str, Any]]:
        """The memory under ``key``, unless another key of the same snake_case form holds it."""
        memory = self._engine.memory(persona, category, key)
        return memory if memory is not None and memory["title"] == key else None

    def _get(self, op: GetOp) -> Optional[Item]:
        persona, category = _namespace(op.namespace)
        memory = self._memory(persona, category, op.key)
        return None if memory is None else self._item(memory, self._refresh(op.refresh_ttl))

    def _put(self, op: PutOp) -> None:
        persona, category = _namespace(op.namespace)
        existing = self._engine.memory(persona, category, op.key)
        if existing is not None and existing["title"] != op.key:
            raise strata.BadInput(
                f"key {op.key!r} is {existing['key']!r} in strata's snake_case form, which {existing['title']!r} "
                "already holds in this namespace")
        if op.value is None:
            if existing is not None:
                self._engine.delete_memory(persona, category, op.key)
            return None
        created = _now()
        if existing is not None:
            item = self._item(existing, refresh=False)
            created = item.created_at if item is not None else created
        self._write(persona, category, op.key, dict(op.value), op.ttl, created)
        return None

    def _search(self, op: SearchOp) -> List[SearchItem]:
        prefix = op.namespace_prefix
        if not prefix:
            raise InvalidNamespaceError("a StrataStore search names the persona: namespace_prefix=(persona,)")
        persona = prefix[0]
        category = _namespace(prefix)[1] if len(prefix) > 1 else None
        refresh = self._refresh(op.refresh_ttl)
        wanted = op.offset + op.limit
        found: List[SearchItem] = []
        if op.query:
            # Ranked by strata; the namespace and filter are applied to its ranking.
            answer = self._engine.search_memories(persona, op.query, limit=max(wanted * 4, 10))
            for hit in answer["results"]:
                if category is not None and hit.get("category") != category:
                    continue
                memory = self._engine.memory(persona, hit["category"], hit["key"])
                item = memory and self._item(memory, refresh, score=hit.get("score"))
                if item is not None and _matches(item.value, op.filter):
                    found.append(item)
        else:
            for memory in self._engine.memories(persona, category):
                item = self._item(memory, refresh, score=None)
                if item is not None and _matches(item.value, op.filter):
                    found.append(SearchItem(item.namespace, item.key, item.value, item.created_at,
                                            item.updated_at, None))
        return found[op.offset:wanted]

    def _list_namespaces(self, op: ListNamespacesOp) -> List[Tuple[str, ...]]:
        personas = sorted({row["persona"] for row in self._engine.sessions()})
        namespaces = sorted({(persona, memory["category"]) for persona in personas
                             for memory in self._engine.memories(persona)})
        kept = [ns for ns in namespaces if all(_namespace_matches(ns, c) for c in op.match_conditions or ())]
        if op.max_depth is not None:
            kept = sorted({ns[:op.max_depth] for ns in kept})
        return kept[op.offset:op.offset + op.limit]


def _matches(value: Dict[str, Any], wanted: Optional[Dict[str, Any]]) -> bool:
    """LangGraph's filter: each key equal (or, for a dict of operators, ``$eq``, ``$ne``,
    ``$gt``, ``$gte``, ``$lt``, ``$lte``)."""
    for key, condition in (wanted or {}).items():
        actual = value.get(key)
        if isinstance(condition, dict) and condition and all(k.startswith("$") for k in condition):
            for operator, operand in condition.items():
                checks = {"$eq": lambda: actual == operand, "$ne": lambda: actual != operand,
                          "$gt": lambda: actual is not None and actual > operand,
                          "$gte": lambda: actual is not None and actual >= operand,
                          "$lt": lambda: actual is not None and actual < operand,
                          "$lte": lambda: actual is not None and actual <= operand}
                if operator not in checks:
                    raise strata.BadInput(f"filter operator {operator!r} is not one of {', '.join(checks)}")
                if not checks[operator]():
                    return False
        elif actual != condition:
            return False
    return True


def _namespace_matches(namespace: Tuple[str, ...], condition: Any) -> bool:
    path = tuple(condition.path)
    part = namespace[:len(path)] if condition.match_type == "prefix" else namespace[-len(path):] if path else ()
    return len(part) == len(path) and all(p == "*" or p == n for p, n in zip(path, part))
