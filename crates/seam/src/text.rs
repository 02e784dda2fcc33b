//! Cutting text to a size: the one rule every crate shows shortened text by.
//!
//! A text cut for a reader ends in `…` and stays within its number of characters, the
//! ellipsis included, and is cut at a character boundary, never inside one. Excerpts centred
//! on a match (a search snippet) are built on it. (A text cut for a machine, an embedding
//! model's input, is recall's: `strata-recall`'s pipeline cuts it to bytes, unmarked.)

/// `text` cut to at most `max_chars` characters, the last of them `…` when anything was cut.
pub fn truncate_chars(text: &str, max_chars: usize) -> String {
    if text.char_indices().nth(max_chars).is_none() {
        return text.to_owned();
    }
    if max_chars == 0 {
        return String::new();
    }
    // The first `max_chars - 1` characters, then the ellipsis.
    let end = text.char_indices().nth(max_chars - 1).map_or(text.len(), |(at, _)| at);
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_text_keeps_its_length_with_the_ellipsis() {
        assert_eq!(truncate_chars("short", 5), "short");
        assert_eq!(truncate_chars("longer", 5), "long…");
        assert_eq!(truncate_chars("longer", 1), "…");
        assert_eq!(truncate_chars("longer", 0), "");
        assert_eq!(truncate_chars("", 0), "");
        assert_eq!(truncate_chars("数据库迁移完成", 4), "数据库…");
        assert_eq!(truncate_chars("数据库迁", 4), "数据库迁");
        for max in 0..12 {
            assert!(truncate_chars("héllo wörld!", max).chars().count() <= max);
        }
    }
}
