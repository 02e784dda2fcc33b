//! bm25, as both backends score `memory_search`'s keyword side: FTS5's formula (k1 = 1.2,
//! b = 0.75, idf `ln((N - n + 0.5) / (n + 0.5))`, floored just above zero), computed here from
//! what each backend reads, so the two score alike and only the persona searched moves the
//! scores it sees: the row count and the word counts are the persona's ([`WordStatistics`]),
//! and a row's length is weighed against the mean of the rows read, not of the whole index.

use super::WordStatistics;

const K1: f64 = 1.2;
const B: f64 = 0.75;

/// A row the keyword side read, as bm25 sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct RowTerms {
    /// The row's id.
    pub id: i64,
    /// Its length: tokens on SQLite, distinct lexemes on PostgreSQL.
    pub length: u32,
    /// How many times it holds each of the query's words, in the query's order.
    pub counts: Vec<u32>,
}

/// The weight of a word held by `holding` of `rows` rows: rarer is heavier. A word in more than
/// half the rows would weigh less than nothing; it weighs next to nothing instead (as FTS5).
pub fn idf(rows: u64, holding: f64) -> f64 {
    let rows = rows as f64;
    let holding = holding.min(rows);
    ((rows - holding + 0.5) / (holding + 0.5)).ln().max(1e-6)
}

/// The bm25 score of each row read (higher is better), best first, ties newest first.
/// `holding` gives, for each query word, how many of the persona's rows hold it (exact or
/// estimated), the weight the word gets; [`WordStatistics::rows`] is how many rows there are.
pub fn bm25(statistics: &WordStatistics, holding: &[f64], read: &[RowTerms]) -> Vec<(i64, f64)> {
    if read.is_empty() {
        return Vec::new();
    }
    let weights: Vec<f64> = holding.iter().map(|&n| idf(statistics.rows, n)).collect();
    let mean_length = read.iter().map(|row| f64::from(row.length.max(1))).sum::<f64>() / read.len() as f64;
    let mut scored: Vec<(i64, f64)> = read
        .iter()
        .map(|row| {
            let norm = K1 * (1.0 - B + B * f64::from(row.length.max(1)) / mean_length);
            let score = weights
                .iter()
                .zip(&row.counts)
                .map(|(weight, &count)| {
                    let tf = f64::from(count);
                    weight * tf * (K1 + 1.0) / (tf + norm)
                })
                .sum();
            (row.id, score)
        })
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
    scored
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: i64, length: u32, counts: &[u32]) -> RowTerms {
        RowTerms { id, length, counts: counts.to_vec() }
    }

    #[test]
    fn rarer_words_and_shorter_rows_score_higher() {
        let statistics = WordStatistics { rows: 1_000, frequencies: vec![10, 500] };
        let read = [row(1, 10, &[0, 1]), row(2, 10, &[1, 0]), row(3, 40, &[1, 0]), row(4, 10, &[0, 0])];
        let scored = bm25(&statistics, &[10.0, 500.0], &read);
        let order: Vec<i64> = scored.iter().map(|&(id, _)| id).collect();
        assert_eq!(order, [2, 3, 1, 4], "{scored:?}");
        assert_eq!(scored[3].1, 0.0, "a row holding no word scores nothing");
    }

    #[test]
    fn ties_go_to_the_newest_row() {
        let statistics = WordStatistics { rows: 100, frequencies: vec![5] };
        let scored = bm25(&statistics, &[5.0], &[row(7, 3, &[1]), row(9, 3, &[1])]);
        assert_eq!(scored.iter().map(|&(id, _)| id).collect::<Vec<_>>(), [9, 7]);
    }

    #[test]
    fn a_word_in_most_rows_weighs_next_to_nothing() {
        assert_eq!(idf(10, 9.0), 1e-6);
        assert!(idf(1_000, 1.0) > idf(1_000, 10.0));
    }
}
