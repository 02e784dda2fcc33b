//! Store queries added for the recall tools (kept apart so work on it does not collide with the compactor).
