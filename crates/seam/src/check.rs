//! `strata doctor`'s report: each check, its problems, and the forest's checks every
//! backend runs.

/// One check of [`Report`].
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    /// What was checked.
    pub name: &'static str,
    /// How many problems were found.
    pub problems: u64,
    /// The first problems, in words.
    pub details: Vec<String>,
    /// Why the check could not run this time, when it could not (not a problem of the file:
    /// another process writing, a full disk).
    pub skipped: Option<String>,
}

/// What `strata doctor` found.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// Every check, in the order run.
    pub checks: Vec<Check>,
    /// Rows still waiting for a vector (not a problem: the embedder catches up).
    pub embedding_backlog: u64,
}

impl Report {
    /// Whether every check passed.
    pub fn healthy(&self) -> bool {
        self.checks.iter().all(|check| check.problems == 0)
    }
}
