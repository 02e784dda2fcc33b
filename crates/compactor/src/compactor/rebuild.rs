//! Rebuilding a Level-0 node over what a forget keeps: before `Store::forget` erases the older
//! messages of a node's span, the summarizer writes a summary of the kept ones, through the
//! same quality gate as every summary. The store uses it only if the span is unchanged when
//! its transaction runs, and writes a marker otherwise (or when the summarizer fails here).

use strata_seam::forgetting::KeptSpan;
use strata_seam::{Level, NewSummary, error_chain};

use super::{Compactor, source_item};
use crate::error::Result;
use crate::summarizer::SourceKind;

impl Compactor {
    /// A summary of the messages `span` keeps, by this compactor's summarizer; `None` when it
    /// fails (the reason is logged; the forget writes a marker instead). Holds the session's
    /// compaction lock while it asks, so this process does not compact the session meanwhile.
    pub async fn rebuild_span(&self, span: &KeptSpan) -> Result<Option<NewSummary>> {
        let lock = self.session_lock(span.session);
        let _guard = lock.lock().await;
        let (session, range) = (span.session, span.first_seq..=span.last_seq);
        let messages = self.blocking(move |store| Ok(store.messages(session, range)?)).await?;
        if messages.is_empty() {
            return Ok(None);
        }
        let tokens: u64 = messages.iter().map(|m| u64::from(m.token_count)).sum();
        let items = messages.iter().map(source_item).collect();
        let request = self.request(&span.persona, SourceKind::Messages, Level::LEAF, items, tokens);
        match self.summarize_gated(span.session, &request).await {
            Ok((summary, token_count)) => Ok(Some(NewSummary {
                headline: summary.headline,
                body: summary.body,
                token_count,
                summarizer: self.inner.summarizer.name().to_owned(),
                memory_updates: summary.memory_updates,
            })),
            Err(error) => {
                tracing::info!(node = %span.node, error = %error_chain(&error), "no summary of the kept messages; a marker instead");
                Ok(None)
            }
        }
    }
}
