//! The connection pool, the numbered migrations, and how the server's errors become the
//! store's.

use std::time::Duration;

use postgres::NoTls;
use r2d2_postgres::PostgresConnectionManager;
use strata_store::{Error, Result};

pub(crate) type Pool = r2d2::Pool<PostgresConnectionManager<NoTls>>;
pub(crate) type Connection = r2d2::PooledConnection<PostgresConnectionManager<NoTls>>;

/// The migrations, in order: file `NNNN_*.sql` is schema version NNNN.
const MIGRATIONS: &[&str] =
    &[include_str!("../schema/0001_init.sql"), include_str!("../schema/0002_engine.sql")];

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
        reason: format!("{} ({source})", strata_store::without_password(url)),
    })?;
    let mut client = config.connect(NoTls).map_err(pg)?;
    migrate(&mut client)?;
    drop(client);
    let manager = PostgresConnectionManager::new(config, NoTls);
    r2d2::Pool::builder()
        .max_size(size)
        .connection_timeout(Duration::from_secs(30))
        .build(manager)
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
