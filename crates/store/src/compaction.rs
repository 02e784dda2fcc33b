//! Store queries added for the compactor (kept apart so work on it does not collide with recall).
