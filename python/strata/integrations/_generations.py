"""One conversation of an adapter over strata's append-only sessions, in *generations*.

A framework that removes messages (the Agents SDK's ``pop_item`` and ``clear_session``,
LangChain's ``clear``) is given a new strata session, keyed ``"<id>#<n>"``, holding what it
kept: nothing stored is deleted or changed (an earlier generation stays searchable by the
persona's tools, and ``Engine.forget(session=...)`` erases it). Opened later, the conversation
continues its newest generation.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List

import strata

#: Separates a conversation's id from its generation in the strata session key.
SEPARATOR = "#"


class Generations:
    """The conversation ``conversation_id`` of ``persona``: its current strata session."""

    def __init__(self, engine: strata.Engine, conversation_id: str, persona: str):
        if not isinstance(conversation_id, str) or not conversation_id or SEPARATOR in conversation_id:
            raise strata.BadInput(
                f"a session id is a non-empty string without {SEPARATOR!r}, not {conversation_id!r}")
        self._engine, self._id, self._persona = engine, conversation_id, persona
        self.generation = self._newest()
        self.session = engine.session(self._key(self.generation), persona)

    def _key(self, generation: int) -> str:
        return self._id if generation == 0 else f"{self._id}{SEPARATOR}{generation}"

    def _newest(self) -> int:
        prefix, newest = self._id + SEPARATOR, 0
        for row in self._engine.sessions(self._persona):
            suffix = row["key"][len(prefix):]
            if row["key"].startswith(prefix) and suffix.isdigit():
                newest = max(newest, int(suffix))
        return newest

    def next(self, kept: List[Dict[str, Any]]) -> None:
        """Goes on in a new generation that starts with ``kept``."""
        generation = self._newest() + 1
        session = self._engine.session(self._key(generation), self._persona)
        if kept:
            session.append_many(kept)
        self.generation, self.session = generation, session


def stored_item(row: Dict[str, Any]) -> Dict[str, Any]:
    """A stored message as it was appended: the object itself when strata kept it
    (``as_sent``), else the Chat Completions message its columns are (for a plain text message,
    also a valid Responses input item)."""
    if "as_sent" in row:
        return row["as_sent"]
    item: Dict[str, Any] = {"role": row["role"], "content": row["content"]}
    for field in ("tool_calls", "tool_call_id", "name"):
        value = row.get(field)
        if value is not None:
            item[field] = json.loads(value) if field == "tool_calls" and isinstance(value, str) else value
    return item
