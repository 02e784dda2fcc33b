//! Growth, measured as rows read rather than time (the machines are shared and noisy): the
//! work of compacting a session and of assembling its context follows the new messages, not
//! the whole history.

use strata_compactor::{BeforeAssembly, CompactorConfig, Outcome};
use strata_seam::{NewMessage, Role};

use super::util::*;
use strata_seam::Conversations;

fn config() -> CompactorConfig {
    CompactorConfig {
        trigger_ratio: 0.0,
        target_ratio: 0.0,
        leaf_min_tokens: 400,
        leaf_chunk_tokens: 800,
        ..CompactorConfig::default()
    }
}

/// Appends `turns` plain turns in one transaction (a bulk import).
fn import(fx: &Fixture, turns: usize) {
    let messages: Vec<NewMessage> = (0..turns)
        .flat_map(|i| {
            [
                NewMessage::text(Role::User, format!("Request {i}: {}", words(i as u64, 40))),
                NewMessage::text(Role::Assistant, format!("Reply {i}: {}", words(i as u64 + 7, 60))),
            ]
        })
        .enumerate()
        .map(|(i, mut message)| {
            message.created_at = t0() + chrono::Duration::seconds(i as i64);
            fx.compactor.counter().count_new(&mut message);
            message
        })
        .collect();
    fx.store.append(fx.session, &messages).unwrap();
}

/// Rows read by one compaction of a freshly imported session of `turns` turns, run to the end.
async fn rows_to_compact(turns: usize) -> u64 {
    let fx = fixture(config());
    import(&fx, turns);
    let before = fx.store.rows_read();
    let outcome = fx.compactor.compact_rounds(fx.session, u32::MAX).await.unwrap();
    assert!(matches!(outcome, strata_compactor::Outcome::Compacted { pending: false, .. }), "{outcome:?}");
    fx.store.rows_read() - before
}

#[tokio::test]
async fn compaction_reads_in_proportion_to_the_new_messages() {
    let small = rows_to_compact(500).await;
    let large = rows_to_compact(2_000).await;
    // Four times the messages: about four times the rows (each message is read a small,
    // constant number of times), where re-reading the session every round read sixty times.
    let ratio = large as f64 / small as f64;
    println!("rows read to compact: {small} for 1,000 messages, {large} for 4,000 ({ratio:.2}x)");
    assert!(ratio < 4.6, "rows read: {small} for 1,000 messages, {large} for 4,000 ({ratio:.2}x)");
    assert!(large < 12 * 4_000, "{large} rows read for 4,000 messages");
}

#[tokio::test]
async fn assembly_reads_only_the_live_part_of_the_session() {
    let mut rows = Vec::new();
    for turns in [300, 1_200] {
        let fx = fixture(config());
        import(&fx, turns);
        fx.compact_fully().await;
        let before = fx.store.rows_read();
        fx.compactor.assemble(fx.session, t0()).await.unwrap();
        rows.push(fx.store.rows_read() - before);
    }
    // Four times the history, the same live part (head, roots, buffer, tail): the roots grow
    // with the logarithm of the history at most.
    println!("rows read by one assembly of 600 / 2,400 messages: {rows:?}");
    assert!(rows[1] <= rows[0] + 16, "rows read by one assembly: {rows:?}");
}

#[tokio::test]
async fn a_request_with_nothing_to_compact_reads_the_session_once() {
    let fx = fixture(config());
    import(&fx, 300);
    fx.compact_fully().await;
    let before = fx.store.rows_read();
    let alone = fx.compactor.assemble(fx.session, t0()).await.unwrap();
    let assembly = fx.store.rows_read() - before;

    // The check that there is nothing to write reads in the assembly's snapshot: no row more
    // than the assembly alone, and the same context.
    let before = fx.store.rows_read();
    let checked = fx.compactor.compact_before_assembly(fx.session, t0()).await.unwrap();
    let BeforeAssembly::Read { outcome, snapshot } = checked else {
        panic!("a compacted session had work: {checked:?}")
    };
    assert_eq!(fx.store.rows_read() - before, assembly);
    assert!(!matches!(outcome, Outcome::Compacted { .. }), "{outcome:?}");
    assert_eq!(fx.compactor.assembler().lay_out(&snapshot, None).unwrap(), alone);

    // New turns over the trigger: the call compacts, and the caller assembles after it.
    import(&fx, 40);
    let checked = fx.compactor.compact_before_assembly(fx.session, t0()).await.unwrap();
    assert!(matches!(checked, BeforeAssembly::Compacted(Outcome::Compacted { .. })), "{checked:?}");
}
