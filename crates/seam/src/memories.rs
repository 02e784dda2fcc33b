//! The rules of agent memories and where they came from: the limits and key normalization a
//! [`MemoryWrite`] is checked against, who may write which category ([`Writer`]), when a
//! memory expires ([`MemoryTtls`], [`Ttl`]), each memory's [`Provenance`] ([`Source`]) and
//! earlier versions ([`MemoryVersion`]), and the queue of updates summarizers propose
//! ([`MemoryUpdate`], [`QueuedUpdate`], [`UpdateId`]).
//!
//! The memory row itself, [`Memory`](crate::Memory), and its [`Category`](crate::Category)
//! are at the crate's root.

pub use crate::agent_memories::{
    MAX_CONTENT_CHARS, MAX_KEY_CHARS, MemoryTtls, MemoryWrite, Ttl, normalize_key,
};
pub use crate::provenance::{MemoryVersion, Provenance, Source};
pub use crate::types::{Edit, MemoryUpdate, QueuedUpdate, UpdateId, Writer};
