# Types of the native module strata._strata. The documented API is the pure-Python layer
# (strata/__init__.py, strata/aio.py), which wraps these classes; every value crosses as
# JSON-shaped data (dicts, lists, str, int, float, bool, None).
from typing import Any, Awaitable, Dict, List, Literal, Mapping, Optional, Sequence, Tuple, TypedDict, Union

from typing_extensions import NotRequired

__version__: str
#: The version of the dicts' shapes below; it goes up when a key is removed or renamed, or its
#: type or meaning changes (a new key does not change it).
WIRE_VERSION: int

_Json = Dict[str, Any]

# The shapes the engine answers with (strata::edge in the Rust crate), one TypedDict each.
# Times are RFC 3339 text in UTC. python/tests/test_stub.py checks these keys against the dicts
# the compiled module returns.

class SessionDict(TypedDict):
    id: int
    key: str
    persona: str
    created_at: str
    last_active_at: str

class MessageDict(TypedDict):
    id: int
    session_id: int
    seq: int
    role: Literal["system", "user", "assistant", "tool"]
    content: str
    tool_calls: Optional[List[_Json]]
    tool_call_id: Optional[str]
    name: Optional[str]
    created_at: str
    token_count: int
    pinned: bool
    #: The level-0 summary covering it; None until it is compacted.
    summary_id: Optional[int]
    #: The message as it was appended, when the keys above do not say all of it.
    as_sent: NotRequired[_Json]

class ProvenanceDict(TypedDict):
    source: Literal["user", "agent", "summary", "proposal", "unknown"]
    via: NotRequired[str]
    session: NotRequired[int]
    node: NotRequired[int]
    first_seq: NotRequired[int]
    last_seq: NotRequired[int]
    message: NotRequired[int]
    tool_call_id: NotRequired[str]

class MemoryDict(TypedDict):
    id: int
    category: Literal["user_preferences", "progress", "memo"]
    key: str
    title: str
    content: str
    updated_at: str
    persona: str
    provenance: NotRequired[ProvenanceDict]
    valid_from: str
    #: When the text stopped being true; absent while it is.
    valid_to: NotRequired[str]

class SavedMemoryDict(TypedDict):
    memory: MemoryDict
    #: True when the key was new.
    created: bool

class ProposalDict(TypedDict):
    id: int
    persona: str
    #: The summary node that found it; None once that node is gone.
    node_id: Optional[int]
    category: Literal["user_preferences", "progress", "memo"]
    key: str
    title: str
    content: str
    edit: NotRequired[Literal["add", "update", "supersede"]]
    #: True for a proposal waiting for the user, False for a fact not yet settled.
    proposed: bool
    created_at: str

class SummarizerStatsDict(TypedDict):
    summarizer: str
    nodes: int
    tokens_in: int
    tokens_out: int

class RejectionsDict(TypedDict):
    summarizer: str
    reason: str
    count: int

class StatsDict(TypedDict):
    sessions: int
    messages: int
    compacted_messages: int
    message_tokens: int
    #: Summary nodes per level, the index being the level.
    nodes_per_level: List[int]
    memories: int
    embedding_backlog: int
    file_bytes: int
    summarizers: List[SummarizerStatsDict]
    rejections: List[RejectionsDict]

class CheckDict(TypedDict):
    name: str
    problems: int
    details: List[str]
    #: Why the check could not run this time; absent when it ran.
    skipped: NotRequired[str]

class DoctorReportDict(TypedDict):
    healthy: bool
    checks: List[CheckDict]
    embedding_backlog: int

class ForgetCountsDict(TypedDict):
    sessions: int
    messages: int
    summaries: int
    rebuilt: int
    memories: int
    memory_versions: int
    proposals: int
    vectors: int
    ingests: int

class KeptSpanDict(TypedDict):
    node: int
    session: int
    persona: str
    first_seq: int
    last_seq: int

class ForgetScopeDict(TypedDict):
    scope: Literal["persona", "session", "session_before"]
    persona: NotRequired[str]
    key: NotRequired[str]
    before: NotRequired[str]

class ForgetPlanDict(TypedDict):
    scope: ForgetScopeDict
    counts: ForgetCountsDict
    rebuild: List[KeptSpanDict]

class ForgottenDict(TypedDict):
    #: The id of the forget's audit record.
    audit: int
    counts: ForgetCountsDict
    markers: int
    wal_truncated: bool

class Engine:
    def __init__(self, path: str, config: Union[Mapping[str, Any], str, None] = ..., busy_timeout: float = ...) -> None: ...
    @property
    def path(self) -> str: ...
    @property
    def config(self) -> _Json: ...
    @property
    def closed(self) -> bool: ...
    def close(self) -> None: ...
    def session(self, key: str, persona: str = ...) -> Session: ...
    def sessions(self, persona: Optional[str] = ...) -> List[SessionDict]: ...
    def tool_specs(self, format: Optional[str] = None) -> List[_Json]: ...
    def save_memory(self, persona: str, category: str, key: str, content: str, title: Optional[str] = ...) -> SavedMemoryDict: ...
    def memory(self, persona: str, category: str, key: str) -> Optional[MemoryDict]: ...
    def memories(self, persona: str, category: Optional[str] = ...) -> List[MemoryDict]: ...
    def delete_memory(self, persona: str, category: str, key: str) -> bool: ...
    def proposals(self, persona: str) -> List[ProposalDict]: ...
    def accept_proposal(self, persona: str, key: str) -> MemoryDict: ...
    def reject_proposal(self, persona: str, key: str) -> ProposalDict: ...
    def search_memories(self, persona: str, query: str, limit: int = ...) -> _Json: ...
    def embed(self) -> int: ...
    def start_embedding(self) -> None: ...
    def wait_embedded(self, timeout: float = ...) -> bool: ...
    def stats(self) -> StatsDict: ...
    def doctor(self, full: bool = ...) -> DoctorReportDict: ...
    def forget(
        self, *, persona: Optional[str] = ..., session: Optional[str] = ..., before: Optional[float] = ..., dry_run: bool = ...
    ) -> Union[ForgetPlanDict, ForgottenDict]: ...
    def backup(self, dest: str) -> None: ...

class Session:
    @property
    def key(self) -> str: ...
    @property
    def persona(self) -> str: ...
    @property
    def id(self) -> int: ...
    def append(self, message: Any, format: Optional[str] = None) -> int: ...
    def append_many(self, messages: Sequence[Any]) -> List[int]: ...
    def prepare_context(self, format: Optional[str] = None, keep_reasoning: bool = False) -> _Json: ...
    def call_tool(self, name: str, arguments: Union[Mapping[str, Any], str, None] = ...) -> _Json: ...
    def compact(self, max_calls: int = ...) -> _Json: ...
    def messages(self, first_seq: int = ..., last_seq: Optional[int] = ...) -> List[MessageDict]: ...
    def tree(self) -> str: ...
    def _append_async(self, message: Any, format: Optional[str] = None) -> Awaitable[int]: ...
    def _append_many_async(self, messages: Sequence[Any]) -> Awaitable[List[int]]: ...
    def _prepare_context_async(self, format: Optional[str] = None, keep_reasoning: bool = False) -> Awaitable[_Json]: ...
    def _call_tool_async(self, name: str, arguments: Union[Mapping[str, Any], str, None] = ...) -> Awaitable[_Json]: ...
    def _compact_async(self, max_calls: int = ...) -> Awaitable[_Json]: ...

def _shut_down() -> None: ...
def run_cli(argv: list[str]) -> int: ...
