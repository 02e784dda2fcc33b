"""strata: lossless, SQLite-backed memory and hierarchical context compaction for LLM chat bots.

Every message is stored verbatim; old turns fold into a forest of summaries so the prompt fits
the model's window; the model gets tools to search and open anything folded away::

    import strata

    with strata.Engine("bot.db") as engine:
        session = engine.session("alice", persona="assistant")
        session.append({"role": "user", "content": "Staging moved to port 5433."})
        context = session.prepare_context()          # compacts, then fits the window
        reply = client.chat.completions.create(
            model="gpt-4o-mini", messages=context.messages, tools=engine.tool_specs())
        for call in reply.choices[0].message.tool_calls or []:
            answer = session.call_tool(call.function.name, call.function.arguments)

Blocking calls release the GIL, and one ``Engine`` may be shared between threads. The same API
as coroutines is in :mod:`strata.aio`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Union

from strata import _embed, _strata
from strata._errors import (
    BadInput,
    Busy,
    DamagedDatabase,
    DatabaseError,
    EmbedderUnavailable,
    Error,
    Forbidden,
    NotFound,
    SummarizerUnavailable,
)

__version__: str = _strata.__version__
#: The version of the shapes of the dicts strata answers with (sessions, messages, memories,
#: proposals, stats, doctor and forget reports; see ``strata._strata``'s stub for their keys).
#: It goes up when a key is removed or renamed, or its type or meaning changes; a new key does
#: not change it.
WIRE_VERSION: int = _strata.WIRE_VERSION

__all__ = [
    "Engine",
    "Session",
    "Context",
    "Message",
    "Config",
    "Error",
    "BadInput",
    "NotFound",
    "Forbidden",
    "Busy",
    "DatabaseError",
    "DamagedDatabase",
    "SummarizerUnavailable",
    "EmbedderUnavailable",
    "__version__",
    "WIRE_VERSION",
]

#: A chat message in any format strata reads: OpenAI Chat Completions (every role, ``developer``
#: included; text, image, audio and file parts; ``reasoning_content`` / ``reasoning``,
#: ``refusal``, ``annotations``, ``audio``), Anthropic Messages (text, image, document,
#: ``tool_use``, ``tool_result``, ``thinking`` with its signature) or an OpenAI Responses item;
#: optionally with strata's ``timestamp`` (RFC 3339 text or UNIX seconds), ``key`` (an
#: idempotency key unique in the session) and ``pinned`` (never compacted). A message object
#: of the ``openai`` or ``anthropic`` package is taken as it is, and so is a dict holding them
#: (``{"role": "assistant", "content": response.content}``). Every field is kept.
Message = Union[Mapping[str, Any], Any]

#: The formats: ``"openai"`` (Chat Completions), ``"anthropic"`` (Messages), ``"responses"``.
Format = str


def _plain(value: Any) -> Any:
    """The SDK objects in a message (pydantic models of ``openai`` and ``anthropic``) as plain
    JSON-shaped data: exactly the fields the server sent (``exclude_unset``: a ``null`` it sent
    stays, a field the SDK only defaults is left out); a plain dict of text costs one look at
    each value."""
    if isinstance(value, Mapping):
        if all(isinstance(v, (str, int, float, bool, type(None))) for v in value.values()):
            return value
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    dump = getattr(value, "model_dump", None)
    if dump is not None:
        return _plain(dump(mode="json", exclude_unset=True))
    return value

#: The configuration: a dict shaped like ``strata.example.toml`` (``{"compactor":
#: {"context_window_tokens": 8000}}``), the path of such a TOML file, or ``None`` for the
#: defaults.
Config = Union[Mapping[str, Any], str, "os.PathLike[str]", None]


@dataclass(frozen=True)
class Context:
    """What to send to the model, from :meth:`Session.prepare_context`."""

    #: The messages in the OpenAI chat format, ready for ``chat.completions.create``.
    messages: List[Dict[str, Any]]
    #: Tokens per part (``head``, ``scaffold``, ``acknowledgement``, ``recent``, ``buffer``,
    #: ``tail``, ``reply_priming``, ``tools``; ``recalled``, the recalled block, is part of
    #: ``tail``), their ``total`` and the ``budget`` it fits.
    tokens: Dict[str, int]
    #: What the compaction before it did (``{"outcome": "compacted", "nodes_created": ...}``,
    #: ``"below_threshold"``, ...); ``None`` when compaction runs in the background.
    outcome: Optional[Dict[str, Any]]
    #: How many leading messages form the cache-stable prefix (head, scaffold,
    #: acknowledgement): they change only when a compaction happens.
    prefix_len: int
    #: How many leading messages the next call sends again byte for byte, unless a compaction
    #: runs in between: everything before the newest user request (which carries the
    #: injection and the recalled block). Where a prompt cache breakpoint goes. It counts the
    #: OpenAI form's messages; the Anthropic format carries ``cache_control`` there instead.
    stable_len: int
    #: Tokens of ``messages[:stable_len]``.
    stable_tokens: int
    #: The same string for every call of this session (OpenAI's ``prompt_cache_key``).
    prompt_cache_key: str
    #: One entry per message: its part, its source and its tokens.
    entries: List[Dict[str, Any]] = field(repr=False)
    #: What was prepended to the newest user message (guidelines, preferences, memories).
    injection: Dict[str, Any] = field(repr=False)
    #: What the recalled block of the newest request holds (``hits`` with their ``message_id``,
    #: ``session``, ``seq``, ``score`` and ``similarity``; ``tokens``; ``partial``, what semantic
    #: search could not cover); ``None`` when proactive recall is off.
    recalled: Optional[Dict[str, Any]] = field(default=None, repr=False)
    #: The format of ``messages`` (``"openai"``, ``"anthropic"``, ``"responses"``).
    format: str = "openai"
    #: Anthropic's ``system`` parameter (a list of text blocks) in the ``anthropic`` format, where
    #: the system messages are not messages; ``None`` in the others.
    system: Optional[List[Dict[str, Any]]] = None

    @classmethod
    def _from_native(cls, prepared: Dict[str, Any]) -> "Context":
        context = prepared["context"]
        return cls(
            messages=context["messages"],
            tokens=context["tokens"],
            outcome=prepared["outcome"],
            prefix_len=context["prefix_len"],
            stable_len=context["stable_len"],
            stable_tokens=context["stable_tokens"],
            prompt_cache_key=context["prompt_cache_key"],
            entries=context["entries"],
            injection=context["injection"],
            recalled=context.get("recalled"),
            format=context.get("format", "openai"),
            system=context.get("system"),
        )


def _config(config: Config) -> Union[Dict[str, Any], str, None]:
    if config is None or isinstance(config, Mapping):
        # The model of the `embed` extra, when nothing else says where a model is.
        return _embed.configure(None if config is None else dict(config))
    if isinstance(config, (str, os.PathLike)):
        return os.fspath(config)
    raise BadInput(f"config is a dict or the path of a TOML file, not {type(config).__name__}")


class Engine:
    """A strata database: its sessions, memories and search.

    Opens (or creates) the SQLite file at ``path``, or the PostgreSQL database a
    ``postgres://user:password@host/database`` url names (for bot processes on several hosts
    sharing one memory). ``config`` is a dict, a TOML path or
    ``None`` (the defaults: the offline extractive summarizer, a 32k window). ``busy_timeout``
    is how many seconds a write waits for another writer (another process on the same file)
    before raising :class:`Busy`.

    Use it as a context manager, or call :meth:`close`. Safe to share between threads.
    """

    def __init__(self, path: Union[str, "os.PathLike[str]"], config: Config = None, *, busy_timeout: float = 10.0):
        self._native = _strata.Engine(os.fspath(path), _config(config), busy_timeout)

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return repr(self._native)

    @property
    def path(self) -> str:
        """The database file."""
        return os.fspath(self._native.path)

    @property
    def config(self) -> Dict[str, Any]:
        """The configuration in force, every setting filled in."""
        return self._native.config

    @property
    def closed(self) -> bool:
        return self._native.closed

    def close(self) -> None:
        """Closes the engine; later calls on it and on its sessions raise :class:`Error`."""
        self._native.close()

    def session(self, key: str, persona: str = "default") -> "Session":
        """The conversation with this key, created for ``persona`` if new. An existing session
        of another persona raises :class:`Forbidden`: personas never share a session."""
        return Session(self._native.session(key, persona))

    def sessions(self, persona: Optional[str] = None) -> List[Dict[str, Any]]:
        """Every session (of one persona), as dicts."""
        return self._native.sessions(persona)

    def tool_specs(self, format: Format = "openai") -> List[Dict[str, Any]]:
        """The tools the model may call, in ``format``: OpenAI's ``tools`` (the default),
        Anthropic's (``name``, ``description``, ``input_schema``) or the Responses API's."""
        return self._native.tool_specs(format)

    # Memories, written as the user (who may also write ``user_preferences``).

    def save_memory(
        self, persona: str, category: str, key: str, content: str, title: Optional[str] = None
    ) -> Dict[str, Any]:
        """Creates or replaces a memory of ``persona``: ``category`` is ``progress``,
        ``user_preferences`` or ``memo``; ``key`` is normalized to snake_case; ``content`` is
        at most 500 characters. Returns ``{"memory": {...}, "created": bool}``."""
        return self._native.save_memory(persona, category, key, content, title)

    def memory(self, persona: str, category: str, key: str) -> Optional[Dict[str, Any]]:
        """One memory, or ``None``."""
        return self._native.memory(persona, category, key)

    def memories(self, persona: str, category: Optional[str] = None) -> List[Dict[str, Any]]:
        """The memories of ``persona`` (of one category), newest first."""
        return self._native.memories(persona, category)

    def delete_memory(self, persona: str, category: str, key: str) -> bool:
        """Deletes a memory; whether it existed."""
        return self._native.delete_memory(persona, category, key)

    def proposals(self, persona: str) -> List[Dict[str, Any]]:
        """Preferences the summaries found in the chat, waiting for the user's yes or no."""
        return self._native.proposals(persona)

    def accept_proposal(self, persona: str, key: str) -> Dict[str, Any]:
        """The user accepts a proposal: it becomes a ``user_preferences`` memory, shown in every
        turn. Returns the memory."""
        return self._native.accept_proposal(persona, key)

    def reject_proposal(self, persona: str, key: str) -> Dict[str, Any]:
        """The user rejects a proposal; it is deleted. Returns what was proposed."""
        return self._native.reject_proposal(persona, key)

    def search_memories(self, persona: str, query: str, limit: int = 10) -> Dict[str, Any]:
        """The memories of ``persona`` nearest ``query`` by meaning, fused with keywords as
        ``memory_search`` ranks them, best first (``results``, each with its ``category``,
        ``key`` and ``score``). Without the model it ranks by keywords and says why in
        ``semantic_coverage``."""
        return self._native.search_memories(persona, query, limit)

    # Embeddings.

    def embed(self) -> int:
        """Embeds everything still waiting for a vector, now; returns how many vectors were
        written. Raises :class:`EmbedderUnavailable` without the model's files."""
        return self._native.embed()

    def start_embedding(self) -> None:
        """Starts the background thread that embeds new messages, summaries and memories."""
        self._native.start_embedding()

    def wait_embedded(self, timeout: float = 60.0) -> bool:
        """Waits until the background thread has embedded everything appended so far; False on
        timeout (True at once when it is not running)."""
        return self._native.wait_embedded(timeout)

    # Upkeep.

    def stats(self) -> Dict[str, Any]:
        """Counts of sessions, messages, nodes, memories, vectors; tokens per summarizer."""
        return self._native.stats()

    def doctor(self, full: bool = False) -> Dict[str, Any]:
        """Checks the database (SQLite's check, the full-text indexes, the forest's invariants);
        ``report["healthy"]`` says whether all passed."""
        return self._native.doctor(full)

    def forget(
        self,
        *,
        persona: Optional[str] = None,
        session: Optional[str] = None,
        before: Optional[float] = None,
        dry_run: bool = False,
    ) -> Dict[str, Any]:
        """Erases a persona, a session, or a session's messages sent before ``before`` (a Unix
        time), with everything derived from them, so the bytes leave the file; an audit record
        keeps the counts, never the text. ``dry_run`` only says what would go."""
        return self._native.forget(persona=persona, session=session, before=before, dry_run=dry_run)

    def backup(self, dest: Union[str, "os.PathLike[str]"]) -> None:
        """Writes a consistent copy to ``dest`` (which must not exist), safe while others
        write."""
        self._native.backup(os.fspath(dest))


class Session:
    """One conversation, bound to its persona. Get it from :meth:`Engine.session`."""

    def __init__(self, native: "_strata.Session"):
        self._native = native

    def __repr__(self) -> str:
        return repr(self._native)

    @property
    def key(self) -> str:
        return self._native.key

    @property
    def persona(self) -> str:
        return self._native.persona

    @property
    def id(self) -> int:
        return self._native.id

    def append(self, message: Message, format: Optional[Format] = None) -> int:
        """Stores a message whole, as sent (every field kept), with its exact token count;
        returns its id. Its format is told from its shape unless ``format`` names it. A message
        whose ``key`` the session holds is not stored again (its id is returned), so a retried
        append is harmless. A message strata cannot store (a tool result that answers no open
        call, say) raises :class:`BadInput` and writes nothing."""
        return self._native.append(_plain(message), format)

    def append_many(self, messages: Iterable[Message]) -> List[int]:
        """Stores a batch in one transaction, all or nothing: one bad message raises
        :class:`BadInput` naming its index and nothing is written."""
        return self._native.append_many([_plain(message) for message in messages])

    def prepare_context(self, format: Optional[Format] = None, keep_reasoning: bool = False) -> Context:
        """Before each model call: compacts what needs folding, then assembles the context that
        fits the window (head, summary scaffold, recent turns, the injection on the newest user
        message), in ``format`` (default ``"openai"``): every stored message as it was sent,
        every tool call answered, reasoning sent back by its provider's rule (Anthropic's thinking
        of the current tool loop, DeepSeek's ``reasoning_content`` beside tool calls;
        ``keep_reasoning`` sends all of it). For ``"anthropic"``, pass ``context.system`` as
        ``system=`` and ``context.messages`` as ``messages=``."""
        return Context._from_native(self._native.prepare_context(format, keep_reasoning))

    def call_tool(self, name: str, arguments: Union[Mapping[str, Any], str, None] = None) -> Dict[str, Any]:
        """Runs a tool the model called, as this session's persona. ``arguments`` is a dict or
        the JSON text the model sent. Always answers the tool's JSON as a dict: its result, or
        ``{"error": {...}}`` naming the problem, for the model to read and correct. Append it
        with ``{"role": "tool", "tool_call_id": ..., "content": json.dumps(answer)}``."""
        if arguments is not None and not isinstance(arguments, (str, Mapping)):
            raise BadInput(f"tool arguments are a dict or JSON text, not {type(arguments).__name__}")
        return self._native.call_tool(name, dict(arguments) if isinstance(arguments, Mapping) else arguments)

    def tool_message(
        self, tool_call_id: str, name: str, answer: Mapping[str, Any], format: Format = "openai"
    ) -> Dict[str, Any]:
        """The message that carries ``answer`` back to the model, ready to append: a ``tool``
        message, an Anthropic user message with a ``tool_result`` block, or a Responses
        ``function_call_output`` item."""
        text = json.dumps(answer)
        if format == "anthropic":
            return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_call_id, "content": text}]}
        if format == "responses":
            return {"type": "function_call_output", "call_id": tool_call_id, "output": text}
        return {"role": "tool", "tool_call_id": tool_call_id, "name": name, "content": text}

    def compact(self, max_calls: int = 1000) -> Dict[str, Any]:
        """Folds everything due now (``prepare_context`` folds a bounded amount per call);
        returns the totals and the facts settled into memories."""
        return self._native.compact(max_calls)

    def messages(self, first_seq: int = 0, last_seq: Optional[int] = None) -> List[Dict[str, Any]]:
        """The stored messages, verbatim, by position in the session; a message stored with
        more than strata reads of it has ``as_sent``, the message as it was appended."""
        return self._native.messages(first_seq, last_seq)

    def tree(self) -> str:
        """The summary forest drawn as an indented tree."""
        return self._native.tree()
