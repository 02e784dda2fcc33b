//! No panic is reachable from a command-line argument: every numeric argument gets its
//! boundary values (zero, one, the type's largest, one past it, negative), and every text
//! argument that is parsed gets nonsense. Each run ends with success or one clean error, never
//! exit status 101.

use std::io::Write;
use std::process::Stdio;

use crate::util::Strata;

const U32_MAX: &str = "4294967295";
const U64_MAX: &str = "18446744073709551615";
const PAST_U64: &str = "18446744073709551616";
const I64_MAX: &str = "9223372036854775807";
const I64_MIN: &str = "-9223372036854775808";

/// Runs `strata --db DB args...` with `input` on standard input; fails the test on a panic.
#[track_caller]
fn assert_no_panic(strata: &Strata, args: &[&str], input: &str) {
    let mut child = strata
        .command()
        .args(args)
        .env("STRATA_LOG", "off")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A command that fails before reading its input closes the pipe: that is not the test's
    // concern.
    let _ = child.stdin.take().unwrap().write_all(input.as_bytes());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.code() != Some(101) && !stderr.contains("panicked"),
        "strata {args:?} panicked ({:?}):\n{stderr}",
        output.status
    );
}

#[test]
fn boundary_values_of_every_argument_end_in_success_or_one_clean_error() {
    let strata = Strata::new();
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/sample.jsonl");
    strata.run(&["ingest", sample, "--session", "s"]).success();
    let numbers = ["0", "1", "-1", U32_MAX, U64_MAX, PAST_U64, I64_MAX, I64_MIN, "nan", ""];

    let mut cases: Vec<Vec<String>> = Vec::new();
    let mut add = |template: &[&str]| {
        for value in numbers {
            cases.push(
                template
                    .iter()
                    .map(|part| if *part == "N" { value } else { part })
                    .map(str::to_owned)
                    .collect(),
            );
        }
    };
    // Values a command must refuse before doing any work (a demo of 10^19 messages would never
    // end), or that end quickly on the small database.
    add(&["demo", "--messages", "N"]);
    add(&["synth", "--messages", "N", "--out", "/dev/null"]);
    add(&["synth", "--seed", "N", "--messages", "1", "--out", "/dev/null"]);
    add(&["--busy-timeout-ms", "N", "stats"]);
    add(&["view", "N"]);
    add(&["expand", "N"]);
    add(&["expand", "1", "--offset", "N"]);
    add(&["grep", "tabs", "--limit", "N"]);
    add(&["compact", "--session", "s", "--window", "N"]);
    add(&["resummarize", "--session", "s", "--level", "N"]);
    add(&["context", "--session", "s", "--window", "N"]);
    add(&["eval", "planted", "--messages", "N"]);
    add(&["eval", "retrieval", "--questions", "N", "--data", "/nonexistent"]);
    add(&["chat", "--session", "c", "--max-tool-rounds", "N", "--base-url", "http://127.0.0.1:9"]);
    add(&["chat", "--session", "c", "--max-tokens", "N", "--base-url", "http://127.0.0.1:9"]);
    add(&["chat", "--session", "c", "--timeout", "N", "--base-url", "http://127.0.0.1:9"]);
    for now in ["", "yesterday", "+999999-12-31T23:59:59Z", "-262144-01-01T00:00:00Z", "9999-99-99T99:99:99Z"]
    {
        cases.push(["context", "--session", "s", "--now", now].map(str::to_owned).to_vec());
    }
    for time in ["", "0000-00-00", "+999999-12-31T23:59:59Z", "2026-02-30", "9999-12-31T23:59:60Z"] {
        cases.push(["grep", "tabs", "--start", time].map(str::to_owned).to_vec());
        cases.push(["grep", "tabs", "--end", time].map(str::to_owned).to_vec());
    }
    for key in ["", "___", "\u{7}", "ключ"] {
        cases.push(["memory", "set", "memo", key, "x"].map(str::to_owned).to_vec());
        cases.push(["memory", "accept", key].map(str::to_owned).to_vec());
        cases.push(["memory", "reject", key].map(str::to_owned).to_vec());
    }

    for case in &cases {
        let args: Vec<&str> = case.iter().map(String::as_str).collect();
        // The chat cases send one line to a port nothing listens on: the request fails fast.
        assert_no_panic(&strata, &args, "hello\n");
    }
}

/// `--version --json` is the one command that answers without a database: the versions a client
/// checks, strata's and its JSON shapes'.
#[test]
fn version_json_names_the_wire_version() {
    let strata = Strata::new();
    let versions: serde_json::Value =
        serde_json::from_str(&strata.run(&["--version", "--json"]).success()).unwrap();
    assert_eq!(versions["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(versions["wire_version"], strata::WIRE_VERSION);
    assert_eq!(strata.run(&["--version"]).success(), format!("strata {}\n", env!("CARGO_PKG_VERSION")));
}
