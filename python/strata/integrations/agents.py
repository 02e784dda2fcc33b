"""strata as the memory of an OpenAI Agents SDK agent::

    from agents import Agent, Runner
    from strata.integrations.agents import StrataSession

    session = StrataSession(engine, "alice", persona="assistant")
    result = await Runner.run(agent, "Where does staging listen?", session=session)

:class:`StrataSession` implements the SDK's ``Session`` protocol. ``get_items()`` returns the
compacted context (summaries of what was folded away, recent turns verbatim, the injection of
memories), so a conversation of any length fits the model; the model's own tools
(``engine.tool_specs()``) reach what was folded. ``get_items(limit=n)`` returns the newest ``n``
stored items as they were added, which is what the SDK reads when it checks its own writes.

strata's messages are append-only, so ``pop_item`` and ``clear_session`` never delete: they
continue the conversation in a new strata session, the next *generation* of this one, keyed
``"<session_id>#<n>"`` (``strata/integrations/_generations.py``). ``pop_item`` copies every item
but the newest into it; ``clear_session`` starts it empty. The earlier generations stay in the
database, searchable by the persona's tools; ``engine.forget(session=...)`` erases one. A
``StrataSession`` opened later continues the newest generation.
"""

from __future__ import annotations

import asyncio
from typing import Any, Dict, List, Optional

import strata
from strata.integrations._generations import Generations, stored_item

__all__ = ["StrataSession"]


class StrataSession:
    """An OpenAI Agents SDK ``Session`` kept by strata: the conversation ``session_id`` of
    ``persona`` in ``engine``."""

    #: The SDK reads it; strata decides how much history fits, so there is no item limit.
    session_settings = None

    def __init__(self, engine: strata.Engine, session_id: str, persona: str = "default"):
        self.session_id = session_id
        self._conversation = Generations(engine, session_id, persona)

    def __repr__(self) -> str:
        return f"StrataSession({self.session_id!r}, generation={self._conversation.generation})"

    @property
    def strata_session(self) -> strata.Session:
        """The strata session of the current generation (its tools, its tree)."""
        return self._conversation.session

    def _stored(self) -> List[Dict[str, Any]]:
        """Every item of the current generation as it was added."""
        return [stored_item(row) for row in self._conversation.session.messages()]

    # The Session protocol. Each call runs in a worker thread: strata's calls block (with the
    # GIL released), the event loop does not.

    async def get_items(self, limit: Optional[int] = None) -> List[Dict[str, Any]]:
        """The compacted context as Responses input items; with ``limit``, the newest ``limit``
        stored items as they were added."""
        if limit is not None:
            if limit <= 0:
                return []
            return (await asyncio.to_thread(self._stored))[-limit:]
        context = await asyncio.to_thread(self._conversation.session.prepare_context, "responses")
        return context.messages

    async def add_items(self, items: List[Dict[str, Any]]) -> None:
        """Stores the items (user input, model output, tool calls and results), all or none."""
        if items:
            await asyncio.to_thread(self._conversation.session.append_many, items)

    async def pop_item(self) -> Optional[Dict[str, Any]]:
        """The newest item, no longer part of the conversation (which goes on in the next
        generation); ``None`` when there is none."""

        def pop() -> Optional[Dict[str, Any]]:
            stored = self._stored()
            if not stored:
                return None
            self._conversation.next(stored[:-1])
            return stored[-1]

        return await asyncio.to_thread(pop)

    async def clear_session(self) -> None:
        """Starts the conversation over, in the next generation; the earlier one stays stored."""
        await asyncio.to_thread(self._conversation.next, [])
