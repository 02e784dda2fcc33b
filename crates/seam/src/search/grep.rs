//! How `memory_grep` ranks what a backend found, and the folding both sides share.

use unicode_normalization::UnicodeNormalization;

use super::{HitKind, TextHit, TextQuery};

/// Ranks one kind's grep matches, each read with its grep text (a memory's is its key, a
/// space and its text) and arriving newest first: best `match_score` first, ties newest
/// first, at most `limit`, each shown as its text. Every backend ranks its matches here, so
/// `memory_grep` orders alike whatever the database.
pub fn rank_grep_hits(query: &TextQuery, mut found: Vec<TextHit>, limit: usize) -> Vec<TextHit> {
    let terms: Vec<String> = query.terms().iter().map(|term| term.to_lowercase()).collect();
    for hit in &mut found {
        hit.rank = -match_score(&hit.snippet, &terms);
    }
    // The sort is stable, so equal scores stay newest first.
    found.sort_by(|a, b| a.rank.total_cmp(&b.rank));
    found.truncate(limit);
    for hit in &mut found {
        // A memory was matched and scored on its key and text; it is shown as its text.
        if let Some(key) = hit.key.as_deref().filter(|_| hit.id.kind() == HitKind::Memory) {
            let cut = (key.len() + 1).min(hit.snippet.len());
            hit.snippet.drain(..cut);
        }
    }
    found
}

/// Text folded as the trigram index folds it (`case_sensitive 0 remove_diacritics 1`,
/// schema 2): diacritics taken off (canonical decomposition without its combining marks),
/// then each character lowercased where its lowercase is one character. SQLite's tables
/// may fold a rare character otherwise; such a row is found once it is indexed.
pub fn fold(text: &str) -> String {
    text.nfd()
        .filter(|c| !unicode_normalization::char::is_combining_mark(*c))
        .map(|c| {
            let mut lower = c.to_lowercase();
            match (lower.next(), lower.next()) {
                (Some(single), None) => single,
                _ => c,
            }
        })
        .collect()
}

/// Bytes of a text scanned for matches to score; a match further in does not count.
const SCORE_SCAN_BYTES: usize = 1 << 20;

/// How well a text matches a grep: for each (lowercased) term, its occurrences saturated as
/// bm25 saturates term frequency (k1 = 1.2) and divided by the text's length relative to a
/// 100-word message (b = 0.75), summed over the terms. Every term is in every candidate, so
/// the terms weigh alike. Linear in the text, at most [`SCORE_SCAN_BYTES`] of it.
fn match_score(text: &str, terms: &[String]) -> f64 {
    const K1: f64 = 1.2;
    const B: f64 = 0.75;
    const TYPICAL_WORDS: f64 = 100.0;
    let mut end = text.len().min(SCORE_SCAN_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let lower = text[..end].to_lowercase();
    let words = lower.split_whitespace().count().max(1) as f64;
    let norm = K1 * (1.0 - B + B * words / TYPICAL_WORDS);
    terms
        .iter()
        .filter(|term| !term.is_empty())
        .map(|term| {
            let tf = lower.matches(term.as_str()).count() as f64;
            tf * (K1 + 1.0) / (tf + norm)
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn match_scores_favour_repeats_and_short_texts() {
        let terms = ["deploy".to_owned()];
        let once = match_score("we deploy today", &terms);
        let twice = match_score("Deploy now, deploy often", &terms);
        let long = match_score(&format!("we deploy {}", "filler ".repeat(300)), &terms);
        assert!(twice > once && once > long && long > 0.0, "{twice} {once} {long}");
        assert_eq!(match_score("nothing here", &terms), 0.0);
    }

    #[test]
    fn folding_takes_off_case_and_diacritics_as_the_trigram_index_does() {
        assert_eq!(fold("Café ZÜRICH"), "cafe zurich");
        assert_eq!(fold("Ärger über Ölpreise"), "arger uber olpreise");
        assert_eq!(fold("数据库 Ωmega"), "数据库 ωmega");
    }
}
