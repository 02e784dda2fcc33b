//! `strata doctor` and `strata backup`: is the file healthy, and a consistent copy of it.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, bail};
use strata_store::{Backend, Store};

use crate::cli::output::print_json;

/// Runs every check; a readable report, and an error (so a non-zero exit) when one failed.
pub fn doctor(store: &dyn Backend, full: bool, json: bool, out: &mut impl Write) -> anyhow::Result<()> {
    let report = store.doctor(full).context("the checks could not run")?;
    if json {
        print_json(out, &report)?;
    } else {
        for check in &report.checks {
            let verdict =
                if check.problems == 0 { "ok".to_owned() } else { format!("{} problems", check.problems) };
            writeln!(out, "{verdict:>12}  {}", check.name)?;
            for detail in &check.details {
                writeln!(out, "              - {detail}")?;
            }
        }
        writeln!(
            out,
            "{:>12}  rows waiting for a vector (`strata embed` catches up)",
            report.embedding_backlog
        )?;
    }
    if !report.healthy() {
        let failed: Vec<&str> =
            report.checks.iter().filter(|check| check.problems > 0).map(|check| check.name).collect();
        bail!("the database is not healthy: {}", failed.join("; "));
    }
    Ok(())
}

/// Writes a consistent copy of the database to `dest` and checks the copy.
pub fn backup(store: &Store, dest: &Path, json: bool, out: &mut impl Write) -> anyhow::Result<()> {
    store.backup(dest).with_context(|| format!("cannot back up to {}", dest.display()))?;
    let copy = Store::open_existing(dest, std::time::Duration::from_secs(10))
        .with_context(|| format!("the backup at {} cannot be opened", dest.display()))?;
    copy.quick_check().with_context(|| format!("the backup at {} is damaged", dest.display()))?;
    let stats = copy.stats()?;
    if json {
        print_json(
            out,
            &serde_json::json!({"backup": dest, "messages": stats.messages, "bytes": stats.file_bytes}),
        )?;
    } else {
        writeln!(
            out,
            "backed up {} to {} ({} messages, {} bytes, checked)",
            store.path().display(),
            dest.display(),
            stats.messages,
            stats.file_bytes
        )?;
    }
    Ok(())
}
