//! Helpers for end-to-end tests: a temporary database and a way to run the binary on it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

use strata_seam::Backend;
use strata_store::Store;

/// A temporary directory with a database, and the `strata` binary to run against it. The
/// database is a file in the directory, or, when `STRATA_TEST_BACKEND=postgres`, a fresh
/// database on the test server (dropped with the `Strata`): the engine's behaviour tests run
/// on both backends (`make test-rust` runs them twice).
pub struct Strata {
    dir: tempfile::TempDir,
    db: PathBuf,
    _database: Option<Box<dyn std::any::Any + Send>>,
}

/// Whether this run's [`Strata`] databases are on PostgreSQL.
pub fn on_postgres() -> bool {
    std::env::var("STRATA_TEST_BACKEND").is_ok_and(|backend| backend == "postgres")
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
        if on_postgres() {
            // The synchronous PostgreSQL client panics on a tokio runtime's thread, and async
            // tests make their `Strata` on one: the database is made (and dropped) on a thread
            // of its own.
            let (url, database) = std::thread::spawn(|| {
                let (url, database) = crate::postgres::common::scratch_database();
                (url, Box::new(database) as Box<dyn std::any::Any + Send>)
            })
            .join()
            .unwrap();
            return Strata { dir, db: PathBuf::from(url), _database: Some(database) };
        }
        let db = dir.path().join("strata.db");
        Strata { dir, db, _database: None }
    }

    pub fn db(&self) -> &Path {
        &self.db
    }

    /// The database, opened on whichever backend this run uses (for tests that mean "the
    /// database", not "the file"). Open it off any tokio runtime's thread.
    pub fn backend(&self) -> strata_seam::SharedBackend {
        if on_postgres() {
            let url = self.db.to_str().expect("a url");
            std::sync::Arc::new(strata_pg::PgStore::open(url).expect("the test database opens"))
        } else {
            std::sync::Arc::new(Store::open(&self.db).expect("the test database opens"))
        }
    }

    /// Runs `sql` on the database, on whichever backend this run uses: for a test that ages or
    /// damages rows in a way no command does. The statement must mean the same in SQLite and
    /// PostgreSQL. Call it off any tokio runtime's thread.
    pub fn execute(&self, sql: &str) {
        if on_postgres() {
            let url = self.db.to_str().expect("a url");
            let mut client =
                postgres::Client::connect(url, postgres::NoTls).expect("the test database opens");
            client.batch_execute(sql).unwrap_or_else(|e| panic!("{sql}: {e:?}"));
        } else {
            let conn = rusqlite::Connection::open(&self.db).unwrap();
            conn.execute_batch(sql).unwrap_or_else(|e| panic!("{sql}: {e:?}"));
        }
    }

    /// How many message vectors (chunks) the database holds, on either backend. Call it off any
    /// tokio runtime's thread.
    pub fn message_vectors(&self) -> u64 {
        if on_postgres() {
            let url = self.db.to_str().expect("a url");
            let mut client =
                postgres::Client::connect(url, postgres::NoTls).expect("the test database opens");
            let row =
                client.query_one("SELECT count(*) FROM embeddings WHERE kind = 'message'", &[]).unwrap();
            row.get::<_, i64>(0) as u64
        } else {
            Store::open(&self.db).unwrap().embeddings().counts().unwrap().messages
        }
    }

    /// The embedding space's model and dimensions, if vectors were ever stored, on either
    /// backend. Call it off any tokio runtime's thread.
    pub fn vector_space(&self) -> Option<(String, u32)> {
        if on_postgres() {
            let url = self.db.to_str().expect("a url");
            let mut client =
                postgres::Client::connect(url, postgres::NoTls).expect("the test database opens");
            let row = client.query_opt("SELECT model, dimensions FROM embedding_space", &[]).unwrap();
            row.map(|row| (row.get(0), row.get::<_, i32>(1) as u32))
        } else {
            use strata_seam::transfer::Source;
            let space = Store::open(&self.db).unwrap().dump().space().unwrap();
            space.map(|space| (space.model, space.dimensions as u32))
        }
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

impl Drop for Strata {
    fn drop(&mut self) {
        // Dropping the PostgreSQL database connects with the synchronous client: off the
        // runtime's thread, like its creation.
        if let Some(database) = self._database.take() {
            std::thread::spawn(move || drop(database)).join().unwrap();
        }
    }
}

/// Polls (no fixed sleeps) until `ready` holds or the child exits; then kills it with SIGKILL.
/// Returns whether it was still running when killed.
pub fn kill_when(child: &mut Child, mut ready: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        if ready() {
            break;
        }
        std::thread::yield_now();
    }
    child.kill().unwrap(); // SIGKILL on Unix: no cleanup runs.
    child.wait().unwrap();
    true
}

/// Every structural invariant of the forest, checked from the database alone.
pub fn assert_consistent(store: &dyn Backend, key: &str, expected_messages: usize) {
    let session = store.find_session(key).unwrap().expect("session exists");
    let messages = store.messages(session.id, 0..=i64::MAX).unwrap();
    assert_eq!(messages.len(), expected_messages, "no message lost");
    assert!(messages.iter().enumerate().all(|(i, m)| m.seq == i as i64), "seqs dense");
    let nodes = store.nodes(session.id).unwrap();
    for node in &nodes {
        if node.level == strata::seam::Level::LEAF {
            let covered: Vec<i64> =
                messages.iter().filter(|m| m.summary_id == Some(node.id)).map(|m| m.seq).collect();
            let range: Vec<i64> = (node.first_seq..=node.last_seq).collect();
            assert_eq!(covered, range, "leaf {} covers exactly its contiguous range", node.id);
        } else {
            let children: Vec<_> = nodes.iter().filter(|c| c.parent_id == Some(node.id)).collect();
            assert!(children.len() >= 2, "node {} has its children", node.id);
            assert!(children.iter().all(|c| c.level.up() == node.level));
            assert_eq!(children.iter().map(|c| c.first_seq).min(), Some(node.first_seq));
            assert_eq!(children.iter().map(|c| c.last_seq).max(), Some(node.last_seq));
        }
    }
    // A message is covered by a node that exists (the link and the node commit together).
    for message in &messages {
        if let Some(node) = message.summary_id {
            assert!(
                nodes.iter().any(|n| n.id == node && n.level == strata::seam::Level::LEAF),
                "message {} dangles",
                message.id
            );
        }
    }
}

/// Folds as soon as there is a little to fold, so the early turns are only in summaries.
pub fn folding() -> strata::Config {
    let mut config = strata::Config::default();
    config.compactor.trigger_ratio = 0.0;
    config.compactor.target_ratio = 0.0;
    config.compactor.leaf_min_tokens = 100;
    config.compactor.leaf_chunk_tokens = 300;
    config.compactor.tail_turns = 1;
    config.compactor.tail_tokens = 200;
    config.compactor.refill_folded_turns = false;
    config
}
