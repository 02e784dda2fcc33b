//! A summarizer with an input cap: a request larger than the model should read at once (a
//! 300,000-character tool result in one turn) is cut into pieces, each summarized alone, and
//! the pieces' summaries merged into one.

use strata_seam::memories::MemoryUpdate;

use crate::error::SummarizeError;
use crate::summarizer::{
    BoxFuture, MAX_MEMORY_UPDATES, Origin, SourceItem, SourceKind, Summarizer, Summary, SummaryRequest,
};
use crate::tokens::TokenCounter;

/// Wraps a summarizer so that no request it sees holds more than `cap` source tokens.
///
/// The sources are cut at item edges where they can be, and an item larger than the cap is cut
/// into parts at white space (`message 812 (seq 40), part 2 of 5`). The pieces' summaries are
/// then merged by the same summarizer, as a merge of summaries, again under the cap. The
/// memory updates of every piece are kept (the newest of a key wins).
#[derive(Debug)]
pub struct CappedSummarizer<S> {
    inner: S,
    cap: u32,
    counter: TokenCounter,
}

/// Tokens of the headings the piece's rendering adds per item, as an estimate.
const ITEM_OVERHEAD: u32 = 16;

impl<S: Summarizer> CappedSummarizer<S> {
    /// `inner`, fed at most `cap` source tokens per request (counted by `counter`). A cap
    /// under 256 tokens is taken as 256: smaller pieces would say nothing.
    pub fn new(inner: S, cap: u32, counter: TokenCounter) -> CappedSummarizer<S> {
        CappedSummarizer { inner, cap: cap.max(256), counter }
    }

    async fn run(&self, request: &SummaryRequest) -> Result<Summary, SummarizeError> {
        if request.source_tokens <= self.cap {
            return self.inner.summarize(request).await;
        }
        let pieces = self.pieces(&request.items);
        if pieces.len() < 2 {
            return self.inner.summarize(request).await;
        }
        let count = pieces.len();
        let mut parts = Vec::with_capacity(count);
        let mut updates: Vec<MemoryUpdate> = Vec::new();
        for (index, (items, tokens)) in pieces.into_iter().enumerate() {
            let time = items[0].time;
            let piece = SummaryRequest { items, source_tokens: tokens, ..request.clone() };
            let summary = self.inner.summarize(&piece).await?;
            for update in summary.memory_updates {
                updates.retain(|earlier| earlier.key != update.key);
                updates.push(update);
            }
            parts.push(SourceItem {
                reference: format!("part {} of {count}", index + 1),
                origin: Origin::Summary,
                name: None,
                tool: None,
                calls: Vec::new(),
                time,
                text: format!("{}\n{}", summary.headline, summary.body),
            });
        }
        let tokens = parts.iter().map(|part| self.counter.text(&part.text) + ITEM_OVERHEAD).sum();
        let merge = SummaryRequest {
            kind: SourceKind::Summaries,
            items: parts,
            source_tokens: tokens,
            ..request.clone()
        };
        // The merge may itself be over the cap (hundreds of pieces): it is capped the same way.
        let mut merged = Box::pin(self.run(&merge)).await?;
        let excess = updates.len().saturating_sub(MAX_MEMORY_UPDATES);
        updates.drain(..excess);
        merged.memory_updates = updates;
        Ok(merged)
    }

    /// The sources cut into pieces of at most `cap` tokens each, with their token counts.
    fn pieces(&self, items: &[SourceItem]) -> Vec<(Vec<SourceItem>, u32)> {
        let budget = self.cap.saturating_sub(ITEM_OVERHEAD).max(1);
        let mut pieces: Vec<(Vec<SourceItem>, u32)> = Vec::new();
        let mut current: (Vec<SourceItem>, u32) = (Vec::new(), 0);
        for item in items {
            let tokens = self.counter.text(&item.full_text());
            let parts =
                if tokens > budget { self.split(item, tokens, budget) } else { vec![(item.clone(), tokens)] };
            for (part, tokens) in parts {
                if current.1 + tokens + ITEM_OVERHEAD > self.cap && !current.0.is_empty() {
                    pieces.push(std::mem::take(&mut current));
                }
                current.0.push(part);
                current.1 += tokens + ITEM_OVERHEAD;
            }
        }
        if !current.0.is_empty() {
            pieces.push(current);
        }
        pieces
    }

    /// An item over `budget` tokens cut into parts of at most `budget` tokens, at white space
    /// where there is some.
    fn split(&self, item: &SourceItem, tokens: u32, budget: u32) -> Vec<(SourceItem, u32)> {
        // The parts are plain text: the calls are cut with the rest.
        let full_text = item.full_text();
        let text = full_text.as_ref();
        // Characters per token of this text, so a first cut lands near the budget.
        let per_token = text.len() as f64 / f64::from(tokens.max(1));
        let mut cuts: Vec<&str> = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            let mut len = ((f64::from(budget) * per_token * 0.9) as usize).clamp(1, rest.len());
            loop {
                let end = cut_at(rest, len);
                if end == rest.len() || self.counter.text(&rest[..end]) <= budget || len <= 1 {
                    cuts.push(&rest[..end]);
                    rest = &rest[end..];
                    break;
                }
                len = len * 3 / 4;
            }
        }
        let count = cuts.len();
        cuts.into_iter()
            .enumerate()
            .map(|(index, text)| {
                let part = SourceItem {
                    reference: format!("{}, part {} of {count}", item.reference, index + 1),
                    text: text.to_owned(),
                    calls: Vec::new(),
                    ..item.clone()
                };
                let tokens = self.counter.text(text);
                (part, tokens)
            })
            .collect()
    }
}

/// Where to end a part of at most `len` bytes of `text`: after the last white space in its
/// second half, else at the char boundary at or before `len` (never empty).
fn cut_at(text: &str, len: usize) -> usize {
    if len >= text.len() {
        return text.len();
    }
    let mut end = len;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    if end == 0 {
        // One character longer than `len` bytes: take it whole.
        return text.char_indices().nth(1).map_or(text.len(), |(at, _)| at);
    }
    match text[..end].rfind(char::is_whitespace) {
        Some(space) if space >= end / 2 => space + 1,
        _ => end,
    }
}

impl<S: Summarizer> Summarizer for CappedSummarizer<S> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn summarize<'a>(
        &'a self,
        request: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<Summary, SummarizeError>> {
        Box::pin(self.run(request))
    }

    fn paraphrases(&self) -> bool {
        self.inner.paraphrases()
    }

    fn usage_log(&self) -> Option<&strata_llm::UsageLog> {
        self.inner.usage_log()
    }
}

#[cfg(test)]
mod tests {
    use super::cut_at;

    #[test]
    fn cuts_land_on_white_space_and_char_boundaries() {
        assert_eq!(cut_at("alpha beta gamma", 12), 11, "after the space before gamma");
        assert_eq!(cut_at("alpha", 10), 5);
        assert_eq!(cut_at("ééééé", 3), 2, "never inside a character");
        assert_eq!(cut_at("é", 1), 2, "one character wider than the cut is taken whole");
        assert_eq!(cut_at("abcdefgh", 4), 4, "no white space: a hard cut");
    }
}
