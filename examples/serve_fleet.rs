//! A fleet on PostgreSQL: 4 `strata serve` processes behind one database, 8 clients at once
//! over 100 sessions of 2 personas, 10,000 appends and 1,000 prepare_context calls; then every
//! message is counted (none lost, none stored twice). Then, quiet, one caller appends and
//! prepares on alice's first 20 sessions through one server, and the same through the library
//! in this process, for the server's own cost. Prints p50 and p95 of each call
//! (benches/README.md).
//!
//! ```sh
//! export STRATA_TEST_POSTGRES="$(./scripts/postgres.sh url)"
//! cargo build --release --bin strata --example serve_fleet
//! target/release/examples/serve_fleet
//! ```
//!
//! A fresh database is made on that server for the run and dropped after it. The binary is
//! the one beside the example (`target/<profile>/strata`) unless `STRATA_BIN` names another.
//! `STRATA_FLEET_HISTORY=90000` first gives the 100 sessions that many messages of history
//! (ingested, then compacted, as a bot's older turns would be), so the load meets a database
//! of 100,000 messages.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const SERVERS: usize = 4;
const CLIENTS: usize = 8;
const SESSIONS: usize = 100;
const APPENDS: usize = 10_000;
const PREPARES: usize = 1_000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = std::env::var("STRATA_TEST_POSTGRES")
        .map_err(|_| "set STRATA_TEST_POSTGRES to a PostgreSQL server's url (scripts/postgres.sh url)")?;
    let name = format!("strata_fleet_{}", std::process::id());
    let mut admin = postgres::Client::connect(&server, postgres::NoTls)?;
    admin.batch_execute(&format!("CREATE DATABASE {name}"))?;
    let url = format!("{}/{name}", server.rsplit_once('/').ok_or("a url with a database")?.0);
    let measured = run(&url);
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))?;
    measured
}

fn run(url: &str) -> Result<(), Box<dyn std::error::Error>> {
    let bin = binary()?;
    let dir = tempfile::tempdir()?;
    let mut tokens = String::new();
    let mut keys = Vec::new();
    for persona in ["alice", "bob"] {
        let made = Command::new(&bin)
            .args(["--json", "token", "new", "--name", persona, "--persona", persona])
            .output()?;
        let made: Value = serde_json::from_slice(&made.stdout)?;
        tokens.push_str(made["toml"].as_str().ok_or("no toml")?);
        keys.push((persona, made["token"].as_str().ok_or("no token")?.to_owned()));
    }
    let token_file = dir.path().join("tokens.toml");
    std::fs::write(&token_file, tokens)?;
    let init = Command::new(&bin).args(["--db", url, "init"]).output()?;
    if !init.status.success() {
        return Err(String::from_utf8_lossy(&init.stderr).into_owned().into());
    }
    let history =
        std::env::var("STRATA_FLEET_HISTORY").ok().map(|n| n.parse::<usize>()).transpose()?.unwrap_or(0);
    if history > 0 {
        let started = Instant::now();
        preload(&bin, url, dir.path(), history)?;
        println!(
            "history: {history} messages ingested and compacted in {:.1} s",
            started.elapsed().as_secs_f64()
        );
    }
    let mut servers = Vec::new();
    for _ in 0..SERVERS {
        servers.push(Served::start(&bin, url, &token_file, dir.path())?);
    }
    let addrs: Vec<String> = servers.iter().map(|served| served.addr.clone()).collect();

    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let started = Instant::now();
    let (appends, prepares) = runtime.block_on(load(&addrs, &keys))?;
    let took = started.elapsed();
    let stored = runtime.block_on(count(&addrs[0], &keys))?;
    println!(
        "fleet: {SERVERS} servers, {CLIENTS} clients, {SESSIONS} sessions: {} appends and {} prepare_context in {:.1} s",
        appends.len(),
        prepares.len(),
        took.as_secs_f64()
    );
    println!(
        "stored {stored} messages: {history} of history and {APPENDS} appended (none lost, none twice: checked by content)"
    );
    if stored != history + APPENDS {
        return Err(format!("{stored} messages stored, {history} + {APPENDS} expected").into());
    }
    report("HTTP append, under load", appends);
    report("HTTP prepare_context, under load", prepares);
    // Quiet: one caller, the same sessions, one server, then the library in this process.
    let (appends, prepares) = runtime.block_on(quiet(&addrs[0], &keys[0].1))?;
    report("HTTP append, one caller", appends);
    report("HTTP prepare_context, one caller", prepares);
    for served in &mut servers {
        served.stop()?;
    }
    in_process(url, &runtime)
}

/// `history` messages spread over the sessions, each session's ingested by `strata ingest` as
/// its persona (alice the even sessions, bob the odd, as in the load), then compacted by
/// `strata compact` with the configured summarizer.
fn preload(
    bin: &PathBuf,
    url: &str,
    dir: &std::path::Path,
    history: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let run = |args: &[&str]| -> Result<(), Box<dyn std::error::Error>> {
        let output = Command::new(bin).args(["--db", url]).args(args).env("STRATA_LOG", "error").output()?;
        if !output.status.success() {
            return Err(
                format!("strata {}: {}", args.join(" "), String::from_utf8_lossy(&output.stderr)).into()
            );
        }
        Ok(())
    };
    for session in 0..SESSIONS {
        let mut lines = String::new();
        for i in 0..history / SESSIONS + usize::from(session < history % SESSIONS) {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            // Numbered past every line the load and the quiet runs write.
            let n = 10 * APPENDS + session * history + i;
            lines.push_str(&json!({"role": role, "content": text(n, CLIENTS + 1)}).to_string());
            lines.push('\n');
        }
        let file = dir.join(format!("history-{session}.jsonl"));
        std::fs::write(&file, lines)?;
        let (key, persona) = (format!("s{session}"), ["alice", "bob"][session % 2]);
        run(&["ingest", file.to_str().ok_or("a path")?, "--session", &key, "--persona", persona])?;
        run(&["compact", "--session", &key])?;
    }
    Ok(())
}

/// The sessions of alice the quiet runs use (the load gave alice the even ones).
const QUIET_SESSIONS: usize = 20;
const QUIET_CALLS: usize = 200;

/// One caller over HTTP: an append and a prepare_context per call, on alice's first sessions.
async fn quiet(addr: &str, token: &str) -> Result<(Timings, Timings), String> {
    let client = reqwest::Client::new();
    let (mut appends, mut prepares) = (Vec::new(), Vec::new());
    for n in 0..QUIET_CALLS {
        let base = format!("http://{addr}/v1/personas/alice/sessions/s{}", 2 * (n % QUIET_SESSIONS));
        let body = json!({"message": {"role": "user", "content": text(2 * APPENDS + n, CLIENTS)}});
        let started = Instant::now();
        let response = client
            .post(format!("{base}/messages"))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if !response.status().is_success() {
            return Err(format!("append: {}", response.status()));
        }
        response.bytes().await.map_err(|e| e.to_string())?;
        appends.push(started.elapsed());
        let started = Instant::now();
        let response = client
            .post(format!("{base}/context"))
            .bearer_auth(token)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if !response.status().is_success() {
            return Err(format!("context: {}", response.status()));
        }
        response.bytes().await.map_err(|e| e.to_string())?;
        prepares.push(started.elapsed());
    }
    Ok((appends, prepares))
}

/// The binary beside this example, or `STRATA_BIN`.
fn binary() -> Result<PathBuf, Box<dyn std::error::Error>> {
    if let Some(bin) = std::env::var_os("STRATA_BIN") {
        return Ok(bin.into());
    }
    let exe = std::env::current_exe()?;
    let bin =
        exe.parent().and_then(|examples| examples.parent()).ok_or("no target directory")?.join("strata");
    if !bin.exists() {
        return Err(
            format!("{} is missing: cargo build --bin strata (or set STRATA_BIN)", bin.display()).into()
        );
    }
    Ok(bin)
}

/// A running `strata serve`.
struct Served {
    addr: String,
    child: Child,
}

impl Served {
    fn start(
        bin: &PathBuf,
        url: &str,
        tokens: &std::path::Path,
        dir: &std::path::Path,
    ) -> Result<Served, Box<dyn std::error::Error>> {
        use std::io::BufRead;
        let mut child = Command::new(bin)
            .args(["--db", url, "serve", "--listen", "127.0.0.1:0", "--no-embed", "--tokens"])
            .arg(tokens)
            .current_dir(dir)
            .env("STRATA_LOG", "error")
            .stderr(Stdio::piped())
            .spawn()?;
        let mut lines = std::io::BufReader::new(child.stderr.take().ok_or("no stderr")?).lines();
        let line = lines.next().ok_or("the server said nothing")??;
        let addr = line
            .split_whitespace()
            .find_map(|word| word.strip_prefix("http://"))
            .ok_or_else(|| format!("no address in {line:?}"))?
            .to_owned();
        std::thread::spawn(move || lines.for_each(drop));
        Ok(Served { addr, child })
    }

    /// SIGTERM, and a clean exit.
    fn stop(&mut self) -> Result<(), Box<dyn std::error::Error>> {
        Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status()?;
        let status = self.child.wait()?;
        if !status.success() {
            return Err(format!("a server exited with {status}").into());
        }
        Ok(())
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

type Timings = Vec<Duration>;

/// The clients: each appends its share over the sessions, through the servers in turn, and
/// prepares a context after every tenth append.
async fn load(addrs: &[String], keys: &[(&str, String)]) -> Result<(Timings, Timings), String> {
    let mut tasks = tokio::task::JoinSet::new();
    for client_index in 0..CLIENTS {
        let (addrs, keys) =
            (addrs.to_vec(), keys.iter().map(|(p, t)| (p.to_string(), t.clone())).collect::<Vec<_>>());
        tasks.spawn(async move {
            let client = reqwest::Client::new();
            let (mut appends, mut prepares) = (Vec::new(), Vec::new());
            for i in 0..APPENDS / CLIENTS {
                let n = client_index * (APPENDS / CLIENTS) + i;
                let session = n % SESSIONS;
                let (persona, token) = &keys[session % keys.len()];
                let addr = &addrs[n % addrs.len()];
                let base = format!("http://{addr}/v1/personas/{persona}/sessions/s{session}");
                let role = if i % 2 == 0 { "user" } else { "assistant" };
                let body = json!({"message": {"role": role, "content": text(n, client_index), "key": format!("c{client_index}-{i}")}});
                let started = Instant::now();
                let response = client
                    .post(format!("{base}/messages"))
                    .bearer_auth(token)
                    .json(&body)
                    .send()
                    .await
                    .map_err(|e| e.to_string())?;
                if !response.status().is_success() {
                    return Err(format!("append: {} {}", response.status(), response.text().await.unwrap_or_default()));
                }
                response.bytes().await.map_err(|e| e.to_string())?;
                appends.push(started.elapsed());
                if i % (APPENDS / PREPARES) == APPENDS / PREPARES - 1 {
                    let started = Instant::now();
                    let response = client
                        .post(format!("{base}/context"))
                        .bearer_auth(token)
                        .send()
                        .await
                        .map_err(|e| e.to_string())?;
                    if !response.status().is_success() {
                        return Err(format!("context: {}", response.status()));
                    }
                    response.bytes().await.map_err(|e| e.to_string())?;
                    prepares.push(started.elapsed());
                }
            }
            Ok::<_, String>((appends, prepares))
        });
    }
    let (mut appends, mut prepares) = (Vec::new(), Vec::new());
    while let Some(done) = tasks.join_next().await {
        let (a, p) = done.map_err(|e| e.to_string())??;
        appends.extend(a);
        prepares.extend(p);
    }
    Ok((appends, prepares))
}

/// Messages stored, read back through a server's export; an error if one is stored twice.
async fn count(addr: &str, keys: &[(&str, String)]) -> Result<usize, String> {
    let client = reqwest::Client::new();
    let mut seen = BTreeSet::new();
    for (persona, token) in keys {
        let text = client
            .get(format!("http://{addr}/v1/personas/{persona}/export"))
            .bearer_auth(token)
            .send()
            .await
            .map_err(|e| e.to_string())?
            .text()
            .await
            .map_err(|e| e.to_string())?;
        for line in text.lines() {
            let line: Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
            let content = line["content"].as_str().unwrap_or_default().to_owned();
            if !seen.insert(content.clone()) {
                return Err(format!("stored twice: {content}"));
            }
        }
    }
    Ok(seen.len())
}

/// The quiet run's calls through the library, in this process, on the same sessions.
fn in_process(url: &str, runtime: &tokio::runtime::Runtime) -> Result<(), Box<dyn std::error::Error>> {
    // The servers' configuration: the defaults and the STRATA_* variables they inherit.
    let engine = strata::Engine::open(url, strata::Config::load(None, std::env::vars())?)?;
    let sessions: Vec<_> = (0..QUIET_SESSIONS)
        .map(|i| engine.session(&format!("s{}", 2 * i), "alice"))
        .collect::<Result<_, _>>()?;
    let (mut appends, mut prepares) = (Vec::new(), Vec::new());
    for n in 0..QUIET_CALLS {
        let session = &sessions[n % QUIET_SESSIONS];
        let message = json!({"role": "user", "content": text(3 * APPENDS + n, CLIENTS)});
        let started = Instant::now();
        session.append_json(&message)?;
        appends.push(started.elapsed());
        let started = Instant::now();
        runtime.block_on(session.prepare_context())?;
        prepares.push(started.elapsed());
    }
    report("in-process append", appends);
    report("in-process prepare_context", prepares);
    Ok(())
}

/// A chat line of its own: words drawn by `n` from small vocabularies, so a context's recalled
/// block (a search of the newest request) matches a few percent of the history, as in a real
/// one, not every message. Unique by `n` and `client`.
fn text(n: usize, client: usize) -> String {
    const SUBJECTS: [&str; 16] = [
        "billing",
        "search",
        "checkout",
        "invoices",
        "ledger",
        "gateway",
        "scheduler",
        "exporter",
        "router",
        "cache",
        "queue",
        "mailer",
        "reports",
        "auth",
        "uploads",
        "metrics",
    ];
    const VERBS: [&str; 8] =
        ["deployed", "rolled back", "profiled", "migrated", "patched", "reviewed", "load-tested", "paused"];
    const PLACES: [&str; 8] =
        ["staging", "production", "the canary", "eu-west", "us-east", "the lab", "CI", "the sandbox"];
    let pick =
        |salt: usize, len: usize| (n.wrapping_mul(2_654_435_761).wrapping_add(salt * 40_503) >> 7) % len;
    format!(
        "#{n}/{client}: we {} the {} service on {} after ticket {}",
        VERBS[pick(1, VERBS.len())],
        SUBJECTS[pick(2, SUBJECTS.len())],
        PLACES[pick(3, PLACES.len())],
        n * 31 % 9973
    )
}

fn report(what: &str, mut timings: Timings) {
    timings.sort();
    let at = |q: f64| timings[((timings.len() as f64 * q) as usize).min(timings.len() - 1)];
    println!(
        "{what:<34} n={:>6}  p50 {:>7.2} ms  p95 {:>7.2} ms",
        timings.len(),
        at(0.50).as_secs_f64() * 1e3,
        at(0.95).as_secs_f64() * 1e3
    );
}
