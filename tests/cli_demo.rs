//! `strata demo`, the README's main job, on a shorter conversation.

use crate::util::Strata;

#[test]
fn demo_compacts_and_recalls_planted_facts() {
    let strata = Strata::new();
    let out = strata.run(&["demo", "--messages", "260"]).success();
    for expected in [
        "[1/4] stored",
        "[2/4] compacted (extractive summarizer)",
        "[3/4] embedded",
        "[4/4] assembled the context",
        // The summaries keep facts: the fix survives in the scaffold's bodies (two levels up),
        // the older decision only in the store, where the tools find it.
        "fix        in the context verbatim? yes",
        "decision   in the context verbatim? no",
        "▸ memory_grep",
        "▸ memory_search",
        "refused: user_preferences are read-only",
    ] {
        assert!(out.contains(expected), "missing {expected:?} in:\n{out}");
    }
    // The paraphrase query, which shares no word with the planted fact, finds it in the top 3.
    let search = out.split("▸ memory_search").nth(1).unwrap().split("▸ view_message").next().unwrap();
    assert!(search.contains("rotates every 45 days"), "{search}");
    // Running it again on the same database is refused, not duplicated.
    let error = strata.run(&["demo", "--messages", "260"]).failure();
    assert!(error.contains("already holds the demo"), "{error}");
}
