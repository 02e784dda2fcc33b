//! Selection: units and phrases picked greedily by marginal gain per token, a
//! maximal-marginal-relevance selection whose novelty is word coverage and, when the units
//! were embedded, also meaning.

use super::chunk::{Chunk, Unit};

/// Below this cosine similarity to every picked unit, a unit's meaning counts as new. With
/// all-MiniLM-L6-v2, unrelated sentences of one conversation score about 0.1 to 0.3, two facts
/// on one subject (a bug and its fix) about 0.6 to 0.7, and the same statement reworded about
/// 0.85 and up. Only the last is redundant: a lower threshold (0.4 to 0.8 was measured) dropped
/// the second of two facts on one subject, which is exactly what a reader asks about.
const SIMILAR: f32 = 0.8;
/// At this similarity or above, a unit says what a picked unit says: it is worth nothing.
const SAME: f32 = 0.9;

/// The least gain a unit is picked for: one plain new word is not worth a line.
const MIN_UNIT_GAIN: f64 = 1.5;

/// What was picked, in the order it was picked (the last is the least valuable).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Pick {
    Unit(usize),
    Phrase(usize),
}

/// The greedy selection's state: words covered so far and tokens spent.
pub(super) struct Selection<'a> {
    chunk: &'a Chunk,
    weights: Vec<f64>,
    /// Estimated tokens per character of this chunk's text.
    ratio: f64,
    covered: Vec<bool>,
    taken_units: Vec<bool>,
    taken_phrases: Vec<bool>,
    /// The units' sentence vectors (L2-normalized), when a model embedded them.
    vectors: Option<&'a [Vec<f32>]>,
    /// Per unit, its highest cosine similarity to a picked unit (0 before any pick).
    redundancy: Vec<f32>,
    pub(super) picks: Vec<Pick>,
    spent: f64,
}

impl Selection<'_> {
    /// How much of a unit's meaning is new: 1 below [`SIMILAR`] to every picked unit, falling
    /// linearly to 0 at [`SAME`]; always 1 without vectors.
    fn novelty(&self, index: usize) -> f64 {
        if self.vectors.is_none() {
            return 1.0;
        }
        let redundancy = self.redundancy[index];
        f64::from(1.0 - ((redundancy - SIMILAR) / (SAME - SIMILAR)).clamp(0.0, 1.0))
    }

    pub(super) fn unit_cost(&self, unit: &Unit) -> f64 {
        unit.chars * self.ratio + 2.0
    }

    pub(super) fn gain(&self, words: &[usize]) -> f64 {
        words.iter().filter(|&&w| !self.covered[w]).map(|&w| self.weights[w]).sum()
    }

    /// Counts `words` as said already (by the headline): the body spends nothing on them.
    pub(super) fn cover(&mut self, words: &[usize]) {
        words.iter().for_each(|&w| self.covered[w] = true);
    }

    /// Marks a unit as said elsewhere in the summary (the headline quotes it): never picked,
    /// and its meaning counts as said for the novelty of the others.
    pub(super) fn quoted(&mut self, index: usize) {
        self.taken_units[index] = true;
        if let Some(vectors) = self.vectors {
            let said = &vectors[index];
            for (redundancy, vector) in self.redundancy.iter_mut().zip(vectors) {
                *redundancy = redundancy.max(dot(said, vector));
            }
        }
    }

    pub(super) fn take(&mut self, pick: Pick, cost: f64) {
        let words = match pick {
            Pick::Unit(index) => {
                self.taken_units[index] = true;
                &self.chunk.units[index].words
            }
            Pick::Phrase(index) => {
                self.taken_phrases[index] = true;
                &self.chunk.phrases[index].words
            }
        };
        words.iter().for_each(|&w| self.covered[w] = true);
        if let Pick::Unit(index) = pick {
            self.quoted(index);
        }
        self.spent += cost;
        self.picks.push(pick);
    }

    /// Units by best marginal gain per token (words already covered count for nothing) until
    /// `budget` tokens are spent or no unit adds anything.
    pub(super) fn units(&mut self, budget: f64) {
        loop {
            let open = self.chunk.units.iter().enumerate().filter(|(index, _)| !self.taken_units[*index]);
            let candidates = open.map(|(index, unit)| (index, self.unit_cost(unit)));
            // One plain new word is not worth a line.
            let best = self.best(budget, MIN_UNIT_GAIN, candidates, |index| {
                let unit = &self.chunk.units[index];
                self.gain(&unit.words) * unit.multiplier * self.novelty(index)
            });
            let Some((index, cost)) = best else { break };
            self.take(Pick::Unit(index), cost);
        }
    }

    /// Phrases the same way, each worth at least a name or two plain words.
    pub(super) fn phrases(&mut self, budget: f64) {
        loop {
            let open = self.chunk.phrases.iter().enumerate().filter(|(index, _)| !self.taken_phrases[*index]);
            let candidates =
                open.map(|(index, phrase)| (index, phrase.text.chars().count() as f64 * self.ratio + 1.0));
            let best =
                self.best(budget, 2.0, candidates, |index| self.gain(&self.chunk.phrases[index].words));
            let Some((index, cost)) = best else { break };
            self.take(Pick::Phrase(index), cost);
        }
    }

    /// The candidate `(index, cost)` with the best gain per token among those that fit in
    /// `budget` and gain at least `min_gain`; the first of equals wins.
    fn best(
        &self,
        budget: f64,
        min_gain: f64,
        candidates: impl Iterator<Item = (usize, f64)>,
        gain: impl Fn(usize) -> f64,
    ) -> Option<(usize, f64)> {
        let mut best: Option<(f64, usize, f64)> = None;
        for (index, cost) in candidates {
            if self.spent + cost > budget {
                continue;
            }
            let gain = gain(index);
            if gain < min_gain {
                continue;
            }
            let priority = gain / cost;
            if best.is_none_or(|(score, _, _)| priority > score) {
                best = Some((priority, index, cost));
            }
        }
        best.map(|(_, index, cost)| (index, cost))
    }
}

impl Chunk {
    /// False for a unit that no selection could pick: worth too little with every word new.
    pub(super) fn could_be_picked(&self, index: usize) -> bool {
        let unit = &self.units[index];
        unit.words.iter().map(|&id| self.weight(id)).sum::<f64>() * unit.multiplier >= MIN_UNIT_GAIN
    }

    /// A fresh selection with the word weights of this chunk and, if given, its units' vectors
    /// (one per unit).
    pub(super) fn selection<'a>(&'a self, ratio: f64, vectors: Option<&'a [Vec<f32>]>) -> Selection<'a> {
        let vectors = vectors.filter(|vectors| vectors.len() == self.units.len());
        Selection {
            chunk: self,
            weights: (0..self.words.len()).map(|id| self.weight(id)).collect(),
            ratio,
            covered: vec![false; self.words.len()],
            taken_units: vec![false; self.units.len()],
            taken_phrases: vec![false; self.phrases.len()],
            vectors,
            redundancy: vec![0.0; self.units.len()],
            picks: Vec::new(),
            spent: 0.0,
        }
    }
}

/// The dot product of two vectors: their cosine similarity when both are L2-normalized. Eight
/// running sums instead of one let the compiler use vector instructions (a float sum in order
/// cannot be reordered): about six times faster on 384 dimensions.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut sums = [0.0f32; 8];
    let (a_lanes, b_lanes) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = a_lanes.remainder().iter().zip(b_lanes.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in a_lanes.zip(b_lanes) {
        for lane in 0..8 {
            sums[lane] += x[lane] * y[lane];
        }
    }
    sums.iter().sum::<f32>() + tail
}
