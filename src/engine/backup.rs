//! A consistent copy of the database into a new SQLite file, whichever backend it is on.

use std::path::Path;

use strata_store::Store;

use crate::Engine;
use crate::error::{Error, Result};

impl Engine {
    /// Writes a consistent copy of the database into the new SQLite file `dest` (which must
    /// not exist). A SQLite database is copied with `VACUUM INTO` (safe while other processes
    /// write); any other backend is read from one snapshot into the file in one transaction
    /// (`strata copy`), every row with its id. Blocking; a failed copy leaves no file.
    pub fn backup(&self, dest: &Path) -> Result<()> {
        let store = self.store();
        if let Some(sqlite) = store.as_sqlite() {
            return Ok(sqlite.backup(dest)?);
        }
        if dest.exists() {
            return Err(Error::Store(strata_store::Error::Invalid {
                field: "backup",
                reason: format!("{} exists; a backup goes into a new file", dest.display()),
            }));
        }
        let copied = Store::open(dest)
            .and_then(|target| store.read_dump(&mut |dump| target.copy_from(dump, |_, _| {})));
        if copied.is_err() {
            for suffix in ["", "-wal", "-shm", "-commits"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", dest.display()));
            }
        }
        copied?;
        Ok(())
    }
}
