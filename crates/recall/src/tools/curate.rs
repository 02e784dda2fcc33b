//! Curation that sees: how much of a memory an update from consolidation would drop.
//!
//! A summarizer that proposes news about a memory is shown its current content and asked for
//! the whole new content. A model that was shown only part of the story, or the offline
//! summarizer restating one sentence, can still return a replacement that loses what the
//! memory knew. So before an update is written its loss is measured: the share of the old
//! content's words the new content no longer holds. Above `max_dropped_share`, unless the
//! summarizer said the old content stopped being true (`supersede`), the update is not applied
//! but proposed to the user.

use std::collections::HashSet;

/// The words of a text, lowercased: runs of letters and digits, and each Chinese, Japanese or
/// Korean character alone (those scripts put no spaces between words).
fn words(text: &str) -> HashSet<String> {
    let is_cjk =
        |c: char| matches!(c as u32, 0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xAC00..=0xD7AF);
    let mut found = HashSet::new();
    let mut word = String::new();
    for c in text.chars() {
        if is_cjk(c) {
            found.insert(std::mem::take(&mut word));
            found.insert(c.to_string());
        } else if c.is_alphanumeric() {
            word.extend(c.to_lowercase());
        } else {
            found.insert(std::mem::take(&mut word));
        }
    }
    found.insert(word);
    found.remove("");
    found
}

/// The share (0 to 1) of `old`'s words that `new` no longer holds; 0 for an empty `old`.
pub fn dropped_share(old: &str, new: &str) -> f64 {
    let old = words(old);
    if old.is_empty() {
        return 0.0;
    }
    let new = words(new);
    old.difference(&new).count() as f64 / old.len() as f64
}

#[cfg(test)]
mod tests {
    use super::dropped_share;

    #[test]
    fn the_share_dropped_counts_the_old_words_the_new_content_lost() {
        let old = "Deploys go out on Thursdays after 14:00 from the release branch";
        assert_eq!(dropped_share(old, old), 0.0);
        assert_eq!(dropped_share(old, &format!("{old}; Fridays too")), 0.0, "an addition drops nothing");
        assert!(dropped_share(old, "Deploys go out on Mondays") > 0.5);
        assert_eq!(dropped_share("", "anything"), 0.0);
        assert_eq!(dropped_share("标日学习", "标日"), 0.5, "each CJK character is a word");
        assert_eq!(dropped_share("Port 5433", "port 5433."), 0.0, "case and punctuation do not count");
    }
}
