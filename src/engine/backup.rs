//! A consistent copy of the database into a new SQLite file, whichever backend it is on.

use std::path::Path;

use crate::Engine;
use crate::error::Result;

impl Engine {
    /// Writes a consistent copy of the database into the new SQLite file `dest` (which must
    /// not exist). A SQLite database is copied with `VACUUM INTO` (safe while other processes
    /// write); any other backend is read from one snapshot into the file in one transaction
    /// (`strata copy`), every row with its id. Blocking; a failed copy leaves no file.
    pub fn backup(&self, dest: &Path) -> Result<()> {
        Ok(self.store().backup(dest)?)
    }
}
