"""strata as a LangChain chat message history::

    from langchain_core.runnables.history import RunnableWithMessageHistory
    from strata.integrations.langchain import StrataChatHistory

    chain = RunnableWithMessageHistory(
        prompt | model, lambda session_id: StrataChatHistory(engine, session_id, persona="assistant"),
        input_messages_key="question", history_messages_key="history")

``messages`` is the compacted context (folded turns as summaries, recent ones verbatim, the
memories' injection), so a long conversation fits the model; ``add_messages`` stores each
message whole. ``clear`` deletes nothing: the conversation goes on in a new strata session (a
new *generation*, ``strata/integrations/_generations.py``), the old one stays stored.
"""

from __future__ import annotations

from typing import Any, List, Sequence

import strata
from strata.integrations._generations import Generations

try:
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.messages import BaseMessage, convert_to_messages, convert_to_openai_messages
except ImportError as error:  # pragma: no cover - the message is the point
    raise ImportError("strata.integrations.langchain needs langchain-core: "
                      "pip install 'strata-memory[langchain]'") from error

__all__ = ["StrataChatHistory"]


class StrataChatHistory(BaseChatMessageHistory):
    """The conversation ``session_id`` of ``persona`` in ``engine``, as LangChain's history."""

    def __init__(self, engine: strata.Engine, session_id: str, persona: str = "default"):
        self.session_id = session_id
        self._conversation = Generations(engine, session_id, persona)

    def __repr__(self) -> str:
        return f"StrataChatHistory({self.session_id!r}, generation={self._conversation.generation})"

    @property
    def strata_session(self) -> strata.Session:
        """The strata session of the current generation (its tools, its tree)."""
        return self._conversation.session

    @property
    def messages(self) -> List[BaseMessage]:  # type: ignore[override]
        """The compacted context, as LangChain messages."""
        return convert_to_messages(self._conversation.session.prepare_context().messages)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Stores the messages in one transaction, all or none."""
        plain: List[Any] = convert_to_openai_messages(list(messages))
        if plain:
            self._conversation.session.append_many(plain)

    def clear(self) -> None:
        """Starts the conversation over, in the next generation; the earlier one stays stored."""
        self._conversation.next([])
