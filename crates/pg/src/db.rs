//! The connection pool, the numbered migrations, and how the server's errors become the
//! store's.
//!
//! Each pooled connection keeps the statements it has prepared, keyed by their SQL, so a
//! statement is parsed once per connection and every later call is one round trip (bind and
//! execute) instead of two: `prepare_context` makes about twenty reads, and on loopback the
//! round trips, not the server's work, were most of its time.

use std::collections::HashMap;
use std::time::Duration;

use postgres::types::ToSql;
use postgres::{Client, GenericClient, NoTls, Row, Statement, Transaction};
use strata_seam::{Error, Result};

pub(crate) type Pool = r2d2::Pool<Manager>;
pub(crate) type Connection = r2d2::PooledConnection<Manager>;

/// Statements a connection keeps prepared at most; past it, they are dropped and prepared
/// again as they are used. The searches' SQL varies with their filters, so the set is bounded
/// but not tiny.
const MAX_STATEMENTS: usize = 256;

/// Opens connections for the pool, each with its own statement cache.
pub(crate) struct Manager {
    config: postgres::Config,
}

/// A connection and the statements prepared on it.
pub(crate) struct Conn {
    // Taken only by `drop`, to close it off the runtime.
    client: Option<Client>,
    statements: Statements,
}

#[derive(Default)]
struct Statements(HashMap<String, Statement>);

impl Statements {
    fn prepared(&mut self, client: &mut impl GenericClient, sql: &str) -> Result<Statement, postgres::Error> {
        if let Some(statement) = self.0.get(sql) {
            return Ok(statement.clone());
        }
        if self.0.len() >= MAX_STATEMENTS {
            self.0.clear();
        }
        let statement = client.prepare(sql)?;
        self.0.insert(sql.to_owned(), statement.clone());
        Ok(statement)
    }
}

type Params<'p> = &'p [&'p (dyn ToSql + Sync)];

/// Runs a call of the synchronous client, which blocks on a runtime of its own, where tokio
/// lets it: a thread that drives async tasks cannot start another runtime (the client would
/// panic), so a bot's async code that appends or opens a session on PostgreSQL would. On a
/// multi-thread runtime the call leaves the worker (`block_in_place`); on a current-thread
/// runtime it runs on a thread of its own; elsewhere it runs here.
pub(crate) fn off_runtime<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|handle| handle.runtime_flavor()) {
        Err(_) => f(),
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        Ok(_) => std::thread::scope(|scope| {
            scope.spawn(f).join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        }),
    }
}

/// The reads and writes strata makes: on a connection (one statement, its own snapshot) or
/// in a transaction, through the connection's prepared statements.
pub(crate) trait Queries {
    fn query(&mut self, sql: &str, params: Params<'_>) -> Result<Vec<Row>, postgres::Error>;
    fn query_one(&mut self, sql: &str, params: Params<'_>) -> Result<Row, postgres::Error>;
    fn query_opt(&mut self, sql: &str, params: Params<'_>) -> Result<Option<Row>, postgres::Error>;
    fn execute(&mut self, sql: &str, params: Params<'_>) -> Result<u64, postgres::Error>;
    /// A read whose best plan depends on its values (a word's frequency, a persona's share of
    /// the rows, a vector): prepared afresh, so the server plans it for these parameters (a
    /// kept statement is planned generically once it has run five times). One round trip more.
    fn query_planned(&mut self, sql: &str, params: Params<'_>) -> Result<Vec<Row>, postgres::Error>;
}

macro_rules! cached_queries {
    ($type:ty) => {
        impl Queries for $type {
            fn query(&mut self, sql: &str, params: Params<'_>) -> Result<Vec<Row>, postgres::Error> {
                let (client, statements) = self.parts();
                off_runtime(|| {
                    let statement = statements.prepared(client, sql)?;
                    client.query(&statement, params)
                })
            }

            fn query_one(&mut self, sql: &str, params: Params<'_>) -> Result<Row, postgres::Error> {
                let (client, statements) = self.parts();
                off_runtime(|| {
                    let statement = statements.prepared(client, sql)?;
                    client.query_one(&statement, params)
                })
            }

            fn query_opt(&mut self, sql: &str, params: Params<'_>) -> Result<Option<Row>, postgres::Error> {
                let (client, statements) = self.parts();
                off_runtime(|| {
                    let statement = statements.prepared(client, sql)?;
                    client.query_opt(&statement, params)
                })
            }

            fn execute(&mut self, sql: &str, params: Params<'_>) -> Result<u64, postgres::Error> {
                let (client, statements) = self.parts();
                off_runtime(|| {
                    let statement = statements.prepared(client, sql)?;
                    client.execute(&statement, params)
                })
            }

            fn query_planned(&mut self, sql: &str, params: Params<'_>) -> Result<Vec<Row>, postgres::Error> {
                let (client, _) = self.parts();
                off_runtime(|| client.query(sql, params))
            }
        }
    };
}

cached_queries!(Conn);
cached_queries!(Tx<'_>);

impl Conn {
    fn parts(&mut self) -> (&mut Client, &mut Statements) {
        (self.client.as_mut().expect("a connection's client until it drops"), &mut self.statements)
    }

    /// Runs statements outside any transaction, over the simple protocol: what `VACUUM` and
    /// `CHECKPOINT` need.
    pub fn batch_execute(&mut self, sql: &str) -> Result<(), postgres::Error> {
        let (client, _) = self.parts();
        off_runtime(|| client.batch_execute(sql))
    }

    /// A read-committed transaction.
    pub fn transaction(&mut self) -> Result<Tx<'_>, postgres::Error> {
        let (client, statements) = self.parts();
        let tx = off_runtime(|| client.transaction())?;
        Ok(Tx { tx: Some(tx), statements })
    }

    /// A read-only repeatable-read transaction: one snapshot for every read in it, and it never
    /// waits for a writer.
    pub fn snapshot(&mut self) -> Result<Tx<'_>, postgres::Error> {
        let (client, statements) = self.parts();
        let tx = off_runtime(|| {
            client
                .build_transaction()
                .isolation_level(postgres::IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()
        })?;
        Ok(Tx { tx: Some(tx), statements })
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        // Closing the client blocks on its runtime too.
        if let Some(client) = self.client.take() {
            off_runtime(move || drop(client));
        }
    }
}

/// A transaction whose statements come from its connection's cache. It offers only what strata
/// uses, so that no query can bypass the cache.
pub(crate) struct Tx<'a> {
    // Taken by `commit`, or by `drop` to roll back off the runtime.
    tx: Option<Transaction<'a>>,
    statements: &'a mut Statements,
}

impl<'a> Tx<'a> {
    fn parts(&mut self) -> (&mut Transaction<'a>, &mut Statements) {
        (self.tx.as_mut().expect("a transaction until it commits or drops"), self.statements)
    }

    /// Runs statements without parameters (and without preparing them).
    pub fn batch_execute(&mut self, sql: &str) -> Result<(), postgres::Error> {
        let (tx, _) = self.parts();
        off_runtime(|| tx.batch_execute(sql))
    }

    pub fn commit(mut self) -> Result<(), postgres::Error> {
        let tx = self.tx.take().expect("a transaction commits once");
        off_runtime(move || tx.commit())
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        // An uncommitted transaction rolls back as it drops, which blocks on the runtime.
        if let Some(tx) = self.tx.take() {
            off_runtime(move || drop(tx));
        }
    }
}

impl r2d2::ManageConnection for Manager {
    type Connection = Conn;
    type Error = postgres::Error;

    fn connect(&self) -> Result<Conn, postgres::Error> {
        // Kept statements run under the server's default plan cache mode: after five runs a
        // statement whose generic plan costs no more than its custom ones keeps the generic
        // plan, and its later calls skip planning (prepare_context's twenty reads spent about
        // 1.5 ms binding with every call planned). The searches, whose plans depend on their
        // values, use `query_planned`.
        let client = off_runtime(|| self.config.connect(NoTls))?;
        Ok(Conn { client: Some(client), statements: Statements::default() })
    }

    fn is_valid(&self, conn: &mut Conn) -> Result<(), postgres::Error> {
        let (client, _) = conn.parts();
        off_runtime(|| client.simple_query("").map(|_| ()))
    }

    fn has_broken(&self, conn: &mut Conn) -> bool {
        conn.client.as_ref().is_none_or(|client| client.is_closed())
    }
}

/// The migrations, in order: file `NNNN_*.sql` is schema version NNNN.
const MIGRATIONS: &[&str] = &[
    include_str!("../schema/0001_init.sql"),
    include_str!("../schema/0002_engine.sql"),
    include_str!("../schema/0003_message_body.sql"),
    include_str!("../schema/0004_maintenance.sql"),
    include_str!("../schema/0005_memory_validity.sql"),
];

/// The newest schema this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// The advisory-lock key migrations run under, so that processes starting together migrate
/// once ("strata" in ASCII).
const MIGRATION_LOCK: i64 = 0x7374_7261_7461;

/// A server error as the store's error, keeping the server's words as its source.
pub(crate) fn pg(source: postgres::Error) -> Error {
    Error::Backend { backend: "postgres", source: Box::new(source) }
}

pub(crate) fn pool_error(source: r2d2::Error) -> Error {
    Error::Backend { backend: "postgres", source: Box::new(source) }
}

/// A pool of up to `size` connections to `url`, the schema brought up to date first.
pub(crate) fn open(url: &str, size: u32) -> Result<Pool> {
    let config: postgres::Config = url.parse().map_err(|source: postgres::Error| Error::Invalid {
        field: "database url",
        reason: format!("{} ({source})", strata_seam::location::without_password(url)),
    })?;
    // The whole first connection (connect, migrate, close) off any async runtime.
    off_runtime(|| {
        let mut client = config.connect(NoTls).map_err(pg)?;
        migrate(&mut client)
    })?;
    r2d2::Pool::builder()
        .max_size(size)
        // A connection the server closed is found broken when it is returned; checking each
        // one out with a query would add a round trip to every call.
        .test_on_check_out(false)
        .connection_timeout(Duration::from_secs(30))
        .build(Manager { config })
        .map_err(pool_error)
}

/// Brings the schema up to date, under an advisory lock: of several processes starting
/// together one migrates, the others wait for it and find nothing left to do.
fn migrate(client: &mut postgres::Client) -> Result<()> {
    let mut tx = client.transaction().map_err(pg)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).map_err(pg)?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS strata_schema (version BIGINT NOT NULL)").map_err(pg)?;
    let found: Option<i64> = tx.query_one("SELECT max(version) FROM strata_schema", &[]).map_err(pg)?.get(0);
    let found = found.unwrap_or(0);
    if found > SCHEMA_VERSION {
        return Err(Error::SchemaTooNew { found, supported: SCHEMA_VERSION });
    }
    for (index, migration) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        let version = index as i64 + 1;
        tracing::info!(version, "migrating the PostgreSQL schema");
        tx.batch_execute(migration).map_err(pg)?;
        tx.execute("INSERT INTO strata_schema(version) VALUES ($1)", &[&version]).map_err(pg)?;
    }
    tx.commit().map_err(pg)
}
