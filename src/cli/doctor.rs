//! `strata doctor`, `strata backup` and `strata copy`: is the database healthy, a consistent
//! copy of the file, and a whole database copied into PostgreSQL or a new SQLite file.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, bail};
use strata_seam::{Backend, SharedBackend};
use strata_store::Store;

use crate::cli::output::print_json;
use strata_seam::Maintenance;

/// Runs every check; a readable report, and an error (so a non-zero exit) when one failed.
pub fn doctor(store: &dyn Backend, full: bool, json: bool, out: &mut impl Write) -> anyhow::Result<()> {
    let report = store.doctor(full).context("the checks could not run")?;
    if json {
        print_json(out, &strata::edge::DoctorReport::from(&report))?;
    } else {
        for check in &report.checks {
            let verdict = match (&check.skipped, check.problems) {
                (Some(_), _) => "not run".to_owned(),
                (None, 0) => "ok".to_owned(),
                (None, problems) => format!("{problems} problems"),
            };
            writeln!(out, "{verdict:>12}  {}", check.name)?;
            if let Some(why) = &check.skipped {
                writeln!(out, "              - {why}")?;
            }
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

/// `path` with `suffix` appended to its file name (`chat.db` + `-wal`).
fn beside(path: &Path, suffix: &str) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    name.into()
}

/// Brings `backup` back as the database `db`. The backup is checked first (a strata file,
/// `quick_check`), and copied beside `db` before anything of `db` moves, so a failure leaves
/// `db` as it was. The current file and its `-wal` are moved to `<db>.replaced` (and
/// `-replaced-wal`) rather than deleted. Its `-commits` watermark goes: it counts the commits
/// of the file being replaced, more than the backup holds, and would make every writer refuse
/// the restored file as one that lost commits; the restored file's own count is recorded.
pub fn restore(backup: &Path, db: &Path, replace: bool, out: &mut impl Write) -> anyhow::Result<()> {
    let timeout = std::time::Duration::from_secs(10);
    let source = Store::open_existing(backup, timeout)
        .with_context(|| format!("cannot restore from {}", backup.display()))?;
    source
        .quick_check()
        .with_context(|| format!("the backup {} is damaged; nothing was restored", backup.display()))?;
    drop(source);
    if db.exists() && !replace {
        bail!(
            "{} exists; stop every process using it, then run again with --replace (it is moved to {})",
            db.display(),
            beside(db, ".replaced").display()
        );
    }
    if beside(db, ".replaced").exists() {
        bail!("{} exists (an earlier restore's); move it away first", beside(db, ".replaced").display());
    }
    let staged = beside(db, ".restoring");
    // A consistent copy of the backup (its own `-wal` included), so the staged file is whole.
    Store::open_existing(backup, timeout)?
        .backup(&staged)
        .with_context(|| format!("cannot copy {} to {}", backup.display(), staged.display()))?;
    let moved_aside = db.exists();
    if moved_aside {
        std::fs::rename(db, beside(db, ".replaced"))
            .with_context(|| format!("cannot move {} aside", db.display()))?;
        if beside(db, "-wal").exists() {
            std::fs::rename(beside(db, "-wal"), beside(db, ".replaced-wal"))
                .with_context(|| format!("cannot move {}-wal aside", db.display()))?;
        }
    }
    for stale in ["-shm", "-commits"] {
        match std::fs::remove_file(beside(db, stale)) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => {
                return Err(error).with_context(|| format!("cannot remove {}{stale}", db.display()));
            }
        }
    }
    std::fs::rename(&staged, db).with_context(|| format!("cannot move {} into place", staged.display()))?;
    let restored =
        Store::open(db).with_context(|| format!("the restored {} cannot be opened", db.display()))?;
    restored.accept_lost_commits()?;
    let stats = restored.stats()?;
    writeln!(
        out,
        "restored {} from {} ({} messages){}",
        db.display(),
        backup.display(),
        stats.messages,
        if replace {
            format!("; the file it replaced is {}", beside(db, ".replaced").display())
        } else {
            String::new()
        }
    )?;
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

/// `strata copy --to TARGET`: the database (`name` for the record) copied exactly into
/// PostgreSQL (a url; resumable) or into a new SQLite file (a path; one transaction), then
/// checked: the same counts, and the target's doctor finds nothing.
pub fn copy(
    source: &dyn Backend,
    name: &str,
    to: &str,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let target: SharedBackend = if strata_seam::location::is_postgres_url(to) {
        super::open_postgres(to)?
    } else {
        if Path::new(to).exists() {
            bail!("{to} exists; a copy goes into a new file");
        }
        Store::open(to).with_context(|| format!("cannot create {to}"))?.into()
    };
    let progress = indicatif::ProgressBar::new_spinner();
    let copied = source
        .read_dump(&mut |dump| {
            target.copy_from(dump, name, &mut |table, rows| {
                progress.set_message(format!("{table}: {rows}"));
                progress.tick();
            })
        })
        .context(if target.name() == "sqlite" {
            "the copy stopped; nothing was written (delete the new file and run it again)"
        } else {
            "the copy stopped; run the same command again to finish it"
        })?;
    progress.finish_and_clear();
    let (source, copy) = (source.stats()?, target.stats()?);
    let report = target.doctor(false).context("the copy's checks could not run")?;
    let same =
        (
            source.sessions,
            source.messages,
            source.compacted_messages,
            source.memories,
            source.embedding_backlog,
        ) == (copy.sessions, copy.messages, copy.compacted_messages, copy.memories, copy.embedding_backlog)
            && source.nodes_per_level == copy.nodes_per_level;
    if json {
        print_json(
            out,
            &serde_json::json!({
                "sessions": copied.sessions, "messages": copied.messages, "nodes": copied.nodes,
                "memories": copied.memories, "queued": copied.queued, "vectors": copied.vectors,
                "backlog": copied.backlog, "same_counts": same, "healthy": report.healthy(),
            }),
        )?;
    } else {
        writeln!(
            out,
            "copied {} sessions, {} messages, {} summary nodes, {} memories, {} queued facts, {} vectors \
             ({} rows wait for a vector)",
            copied.sessions,
            copied.messages,
            copied.nodes,
            copied.memories,
            copied.queued,
            copied.vectors,
            copied.backlog
        )?;
    }
    if !same {
        bail!("the copy's counts differ from the source's: {source:?} against {copy:?}");
    }
    if !report.healthy() {
        let failed: Vec<&str> =
            report.checks.iter().filter(|check| check.problems > 0).map(|check| check.name).collect();
        bail!("the copy is not healthy: {}", failed.join("; "));
    }
    Ok(())
}
