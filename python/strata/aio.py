"""strata for asyncio bots: the same engine, its slow calls as coroutines.

The work runs on strata's own runtime, never on your event loop, which only awaits the
result::

    import strata.aio

    async def main():
        async with strata.aio.Engine("bot.db") as engine:
            session = await engine.session("alice", persona="assistant")
            await session.append({"role": "user", "content": "hello"})
            context = await session.prepare_context()
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, Dict, Iterable, List, Mapping, Optional, Union

import strata
from strata import BadInput, Config, Context, Message, _plain

__all__ = ["Engine", "Session"]


class Engine:
    """:class:`strata.Engine` with coroutines. Its quick, in-memory calls (``tool_specs``,
    ``config``) stay plain; the rest are run in a worker thread."""

    def __init__(self, path: Union[str, "os.PathLike[str]"], config: Config = None, *, busy_timeout: float = 10.0):
        self.sync = strata.Engine(path, config, busy_timeout=busy_timeout)

    async def __aenter__(self) -> "Engine":
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"strata.aio.Engine({self.sync.path!r})"

    @property
    def path(self) -> str:
        return self.sync.path

    @property
    def config(self) -> Dict[str, Any]:
        return self.sync.config

    def close(self) -> None:
        self.sync.close()

    def tool_specs(self, format: str = "openai") -> List[Dict[str, Any]]:
        return self.sync.tool_specs(format)

    async def session(self, key: str, persona: str = "default") -> "Session":
        return Session(await asyncio.to_thread(self.sync.session, key, persona))

    async def sessions(self, persona: Optional[str] = None) -> List[Dict[str, Any]]:
        return await asyncio.to_thread(self.sync.sessions, persona)

    async def save_memory(
        self, persona: str, category: str, key: str, content: str, title: Optional[str] = None
    ) -> Dict[str, Any]:
        return await asyncio.to_thread(self.sync.save_memory, persona, category, key, content, title)

    async def memory(self, persona: str, category: str, key: str) -> Optional[Dict[str, Any]]:
        return await asyncio.to_thread(self.sync.memory, persona, category, key)

    async def memories(self, persona: str, category: Optional[str] = None) -> List[Dict[str, Any]]:
        return await asyncio.to_thread(self.sync.memories, persona, category)

    async def delete_memory(self, persona: str, category: str, key: str) -> bool:
        return await asyncio.to_thread(self.sync.delete_memory, persona, category, key)

    async def proposals(self, persona: str) -> List[Dict[str, Any]]:
        return await asyncio.to_thread(self.sync.proposals, persona)

    async def accept_proposal(self, persona: str, key: str) -> Dict[str, Any]:
        return await asyncio.to_thread(self.sync.accept_proposal, persona, key)

    async def reject_proposal(self, persona: str, key: str) -> Dict[str, Any]:
        return await asyncio.to_thread(self.sync.reject_proposal, persona, key)

    async def embed(self) -> int:
        return await asyncio.to_thread(self.sync.embed)

    async def stats(self) -> Dict[str, Any]:
        return await asyncio.to_thread(self.sync.stats)


class Session:
    """:class:`strata.Session` with coroutines. ``prepare_context``, ``call_tool`` and
    ``compact`` run as tasks of strata's runtime; appends on its blocking pool."""

    def __init__(self, sync: strata.Session):
        self.sync = sync

    def __repr__(self) -> str:
        return f"strata.aio.Session(key={self.key!r}, persona={self.persona!r})"

    @property
    def key(self) -> str:
        return self.sync.key

    @property
    def persona(self) -> str:
        return self.sync.persona

    @property
    def id(self) -> int:
        return self.sync.id

    async def append(self, message: Message, format: Optional[str] = None) -> int:
        return await self.sync._native._append_async(_plain(message), format)

    async def append_many(self, messages: Iterable[Message]) -> List[int]:
        return await self.sync._native._append_many_async([_plain(message) for message in messages])

    async def prepare_context(self, format: Optional[str] = None, keep_reasoning: bool = False) -> Context:
        return Context._from_native(await self.sync._native._prepare_context_async(format, keep_reasoning))

    async def call_tool(self, name: str, arguments: Union[Mapping[str, Any], str, None] = None) -> Dict[str, Any]:
        if arguments is not None and not isinstance(arguments, (str, Mapping)):
            raise BadInput(f"tool arguments are a dict or JSON text, not {type(arguments).__name__}")
        return await self.sync._native._call_tool_async(name, dict(arguments) if isinstance(arguments, Mapping) else arguments)

    async def compact(self, max_calls: int = 1000) -> Dict[str, Any]:
        return await self.sync._native._compact_async(max_calls)

    def tool_message(
        self, tool_call_id: str, name: str, answer: Mapping[str, Any], format: str = "openai"
    ) -> Dict[str, Any]:
        return self.sync.tool_message(tool_call_id, name, answer, format)
