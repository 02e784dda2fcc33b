"""The exceptions strata raises. Each carries the one-line message the ``strata`` command
line prints for the same failure. A tool's own refusal is not an exception: ``call_tool``
returns it as the tool's JSON answer (``{"error": {...}}``), which the model must see."""

from __future__ import annotations

__all__ = [
    "Error",
    "BadInput",
    "NotFound",
    "Forbidden",
    "Busy",
    "DatabaseError",
    "DamagedDatabase",
    "SummarizerUnavailable",
    "EmbedderUnavailable",
]


class Error(Exception):
    """Base class of every strata error.

    ``kind`` names the failure in the vocabulary every front end shares (the Rust library's
    ``ErrorKind``, the ``kind`` of ``strata serve``'s JSON errors): ``invalid_input``,
    ``not_found``, ``conflict``, ``too_large``, ``forbidden``, ``unauthorized``,
    ``unavailable``, ``unsupported`` or ``internal``."""

    kind: str = "internal"


class BadInput(Error, ValueError):
    """An argument or a message strata cannot take (an unknown key, a bad role, an invalid
    configuration). Nothing was written."""


class NotFound(Error, LookupError):
    """No such session, message, summary, proposal or tool, or no database at the path."""


class Forbidden(Error, PermissionError):
    """Not allowed for this caller: a session of another persona, or the agent writing a user
    preference."""


class Busy(Error):
    """Another writer held the database longer than ``busy_timeout``, or won a race for the
    same rows. Calling again is safe."""


class DatabaseError(Error):
    """The file cannot be used as a strata database: not strata's, of a newer strata, or
    unreadable."""


class DamagedDatabase(DatabaseError):
    """SQLite or ``doctor`` found the file damaged; write commands refuse it."""


class SummarizerUnavailable(Error):
    """The summarizer could not be set up (an LLM summarizer without its endpoint or key). A
    summarizer that goes down mid-compaction is not an error: its work is archived raw and
    ``prepare_context`` still answers."""


class EmbedderUnavailable(Error):
    """The local embedding model or ONNX Runtime is missing; everything but semantic search and
    ``embed`` works."""
