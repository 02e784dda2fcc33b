//! Helpers for end-to-end tests: a temporary database and a way to run the binary on it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A temporary directory with a database path, and the `strata` binary to run against it.
pub struct Strata {
    dir: tempfile::TempDir,
    db: PathBuf,
}

/// The outcome of one run.
#[derive(Debug)]
pub struct Run {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    fn from(output: Output) -> Run {
        Run {
            ok: output.status.success(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Asserts success and returns stdout.
    #[track_caller]
    pub fn success(self) -> String {
        assert!(self.ok, "strata failed:\nstdout: {}\nstderr: {}", self.stdout, self.stderr);
        self.stdout
    }

    /// Asserts a clean failure: non-zero exit, exactly one `error:` line, no panic. Returns it.
    #[track_caller]
    pub fn failure(self) -> String {
        assert!(!self.ok, "strata should have failed:\nstdout: {}", self.stdout);
        assert!(!self.stderr.contains("panicked"), "panic: {}", self.stderr);
        let lines: Vec<&str> = self.stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "one error line expected, got: {}", self.stderr);
        assert!(lines[0].starts_with("error: "), "{}", lines[0]);
        lines[0].to_owned()
    }

    /// Parses stdout as JSON.
    #[track_caller]
    pub fn json(self) -> serde_json::Value {
        let stdout = self.success();
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
    }
}

impl Strata {
    pub fn new() -> Strata {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("strata.db");
        Strata { dir, db }
    }

    pub fn db(&self) -> &Path {
        &self.db
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Writes a file in the temporary directory and returns its path.
    pub fn file(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, contents).unwrap();
        path
    }

    pub fn command(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_strata"));
        command.arg("--db").arg(&self.db).env_remove("STRATA_DB").env("STRATA_LOG", "error");
        command
    }

    pub fn run(&self, args: &[&str]) -> Run {
        Run::from(self.command().args(args).output().unwrap())
    }

    /// Runs the binary on another database file.
    pub fn run_on(&self, db: &Path, args: &[&str]) -> Run {
        let mut command = Command::new(env!("CARGO_BIN_EXE_strata"));
        command.arg("--db").arg(db).env_remove("STRATA_DB").env("STRATA_LOG", "error");
        Run::from(command.args(args).stdin(std::process::Stdio::null()).output().unwrap())
    }
}
