//! The search behind a context's recalled block: `memory_search`'s fusion over the persona's
//! whole history, run by assembly for the newest request, so the model has what bears on it
//! without a tool round.
//!
//! Unlike a tool call it must know when to say nothing: fused scores are relative (the best
//! candidate of any search scores 1), so a hit enters only above an absolute floor, its cosine
//! similarity to the request (`[recall] proactive_min_similarity`) or how near its keywords
//! come to the whole request (`proactive_min_keyword_match`); the floors were calibrated on the
//! evaluation set (see benches/README.md, "The context"). It never waits: without the model
//! (not loaded yet, or absent) the keyword side serves alone, and the answer says so.

use std::collections::{HashMap, HashSet};

use strata_seam::search::{HitId, HitKind, Recalled, RecalledHit, TextHit};
use strata_seam::{Backend, MessageId};

use super::Tool;
use super::search::{FusionQuery, coverage, cut_query, fuse, one_hit_per_source};
use crate::config::RecallConfig;
use crate::embed::Embedder;
use crate::error::Result;
use crate::tools::Scope;

/// The messages and memories of `persona` that bear on `request`, leaving out the messages in
/// `exclude` (what the context shows verbatim). `embedder` is the loaded model, if any.
pub fn proactive(
    store: &dyn Backend,
    persona: &str,
    config: &RecallConfig,
    embedder: Option<&Embedder>,
    request: &str,
    exclude: &HashSet<MessageId>,
) -> Result<Recalled> {
    let how_to_open = format!(
        "{}(message_id) shows a message whole, with what was said around it.",
        Tool::ViewMessage.name()
    );
    let Ok(text) = cut_query(request) else { return Ok(Recalled { how_to_open, ..Recalled::default() }) };
    let scope = Scope::persona(persona);
    let vector = embedder.map(|embedder| embedder.embed_query(&text)).transpose()?;
    let model = embedder.map(|embedder| embedder.spec().id);
    let query = FusionQuery {
        text: &text,
        vector: model.zip(vector.as_deref()),
        range: (None, None),
        kinds: &[HitKind::Message, HitKind::Memory],
    };
    let mut fusion =
        fuse(store, &scope, config, &query, config.search_candidates.max(config.proactive_hits))?;
    let relevant = |hit: &super::Hit| {
        hit.similarity.is_some_and(|similarity| similarity >= config.proactive_min_similarity)
            || hit.keyword_match.is_some_and(|matched| matched >= config.proactive_min_keyword_match)
    };
    let (messages, memories): (Vec<_>, Vec<_>) = std::mem::take(&mut fusion.results)
        .into_iter()
        .filter(relevant)
        .partition(|hit| hit.kind() == HitKind::Message);
    let memories = memories
        .iter()
        .filter_map(|hit| match hit.id {
            HitId::Memory(id) => Some(id),
            _ => None,
        })
        .collect();
    let messages: Vec<_> = messages
        .into_iter()
        .filter(|hit| !matches!(hit.id, HitId::Message(id) if exclude.contains(&id)))
        .collect();
    // The candidates were read with their whole text, session, seq, time and sender: a hit is
    // shown from that read, never read again.
    let read: HashMap<HitId, &TextHit> =
        fusion.read.semantic.iter().chain(&fusion.read.keyword).map(|(hit, _)| (hit.id, hit)).collect();
    let mut hits = Vec::new();
    for hit in one_hit_per_source(messages, &fusion, config.proactive_hits) {
        let HitId::Message(id) = hit.id else { continue };
        let Some(&found) = read.get(&hit.id) else { continue };
        hits.push(RecalledHit {
            message_id: id,
            session: found.session.clone().unwrap_or_default(),
            seq: found.seq.unwrap_or_default(),
            timestamp: found.timestamp,
            speaker: found.speaker.clone().unwrap_or_else(|| found.role.clone()),
            text: found.snippet.clone(),
            score: hit.score.unwrap_or(0.0),
            similarity: hit.similarity,
        });
    }
    let partial = match model {
        Some(model) => coverage(&fusion.read, model).map(|coverage| coverage.note),
        None => Some(
            "semantic search was not available (the embedding model is not loaded yet); these were found by \
             keywords only"
                .to_owned(),
        ),
    };
    Ok(Recalled { hits, memories, partial, how_to_open })
}
