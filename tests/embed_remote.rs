//! The remote embedding provider (`[recall] embed_provider = "openai"`) against a real HTTP
//! server on 127.0.0.1: a tiny OpenAI-style `/v1/embeddings` server, written here on std's
//! `TcpListener`, that answers with the real local model's vectors.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{Value, json};
use strata_recall::Embedder;
use strata_seam::{NewMessage, Role};

use crate::util::Strata;

/// One request the server answered.
#[derive(Clone, Debug)]
struct Seen {
    authorization: Option<String>,
    path: String,
    inputs: usize,
    model: String,
}

struct Server {
    url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

/// How the server behaves.
#[derive(Clone, Copy)]
struct Behaviour {
    /// The first this many requests get 503 (a server warming up).
    unavailable_first: usize,
    /// Keep only this many dimensions of each vector (a server of another model).
    dimensions: Option<usize>,
}

fn model() -> Embedder {
    static MODEL: OnceLock<Embedder> = OnceLock::new();
    MODEL.get_or_init(|| Embedder::load_default().expect("run scripts/fetch-embed-assets.sh")).clone()
}

fn serve(behaviour: Behaviour) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let log = Arc::clone(&log);
            std::thread::spawn(move || connection(stream, &log, behaviour));
        }
    });
    Server { url, seen }
}

/// Answers the requests of one keep-alive connection until the client closes it.
fn connection(stream: TcpStream, log: &Mutex<Vec<Seen>>, behaviour: Behaviour) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let path = request_line.split_whitespace().nth(1).unwrap_or_default().to_owned();
        let (mut length, mut authorization) = (0usize, None);
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (name, value) = line.split_once(':').unwrap();
            match name.to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().unwrap(),
                "authorization" => authorization = Some(value.trim().to_owned()),
                _ => {}
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let request: Value = serde_json::from_slice(&body).unwrap();
        let inputs: Vec<String> =
            request["input"].as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_owned()).collect();
        let number = {
            let mut log = log.lock().unwrap();
            log.push(Seen {
                authorization,
                path: path.clone(),
                inputs: inputs.len(),
                model: request["model"].as_str().unwrap_or_default().to_owned(),
            });
            log.len()
        };
        let (status, answer) = if number <= behaviour.unavailable_first {
            ("503 Service Unavailable", json!({"error": {"message": "the model is loading"}}))
        } else if path != "/v1/embeddings" {
            ("404 Not Found", json!({"error": {"message": "no such route"}}))
        } else {
            let vectors = model().embed(&inputs).unwrap();
            let data: Vec<Value> = vectors
                .into_iter()
                .enumerate()
                .map(|(index, mut vector)| {
                    vector.truncate(behaviour.dimensions.unwrap_or(vector.len()));
                    json!({"object": "embedding", "index": index, "embedding": vector})
                })
                .collect();
            ("200 OK", json!({"object": "list", "data": data, "model": request["model"]}))
        };
        let answer = answer.to_string();
        write!(
            writer,
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{answer}",
            answer.len()
        )
        .unwrap();
        writer.flush().unwrap();
    }
}

/// A config file pointing `[recall]` at the server, with fast retries.
fn config(strata: &Strata, server: &Server) -> String {
    let path = strata.file(
        "remote.toml",
        &format!(
            "[compactor.retry]\ninitial_backoff_ms = 10\nmax_backoff_ms = 50\n\n\
             [recall]\nembed_provider = \"openai\"\n\n\
             [recall.embed_endpoint]\nbase_url = \"{}/v1\"\nmodel = \"served-minilm\"\ndimensions = 384\n\
             batch_size = 2\napi_key_env = \"MY_EMBEDDINGS_KEY\"\n",
            server.url
        ),
    );
    path.display().to_string()
}

fn conversation(strata: &Strata) -> strata_seam::SharedBackend {
    let store = strata.backend();
    let session = store.session("s", "p").unwrap();
    let texts = [
        "Can you look at the failing build on the release branch?",
        "The rebase blew up: conflicts in the lock file and the migrations.",
        "Let's order pizza for the team on Friday.",
        "The staging database password rotates every thirty days.",
        "I moved the rate limiter into src/net/limits.rs yesterday.",
    ];
    let messages: Vec<NewMessage> = texts
        .iter()
        .enumerate()
        .map(|(i, text)| NewMessage::text(if i % 2 == 0 { Role::User } else { Role::Assistant }, *text))
        .collect();
    store.append(session.id, &messages).unwrap();
    store
}

#[test]
fn strata_embeds_through_an_openai_compatible_endpoint_with_its_key_and_retries() {
    let strata = Strata::new();
    conversation(&strata);
    let server = serve(Behaviour { unavailable_first: 1, dimensions: None });
    let config = config(&strata, &server);
    let run = |args: &[&str]| {
        let output = strata
            .command()
            .arg("--config")
            .arg(&config)
            .args(args)
            .env("MY_EMBEDDINGS_KEY", "sk-embeddings")
            .env_remove("OPENAI_API_KEY")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
        serde_json::from_str::<Value>(&stdout).unwrap()
    };
    let embedded = run(&["embed", "--json"]);
    assert_eq!(embedded["embedded"], 5, "{embedded}");
    assert_eq!(embedded["model"], "openai:served-minilm");
    assert_eq!(strata.vector_space(), Some(("openai:served-minilm".to_owned(), 384)));
    assert_eq!(strata.message_vectors(), 5);

    let seen = server.seen.lock().unwrap().clone();
    // The first request met a 503 and was sent again; batches of at most 2 texts (5 texts:
    // 3 batches, plus the retried one).
    assert_eq!(seen.len(), 4, "{seen:?}");
    assert!(seen.iter().all(|s| s.path == "/v1/embeddings" && s.model == "served-minilm"), "{seen:?}");
    assert!(seen.iter().all(|s| s.authorization.as_deref() == Some("Bearer sk-embeddings")), "{seen:?}");
    assert!(seen.iter().all(|s| (1..=2).contains(&s.inputs)), "{seen:?}");
    assert_eq!(seen[0].inputs, seen[1].inputs, "the retry sends the same batch");

    // The query goes through the endpoint too, and finds the message by meaning.
    let found = run(&["search", "the rebase blew up", "--persona", "p", "--limit", "3", "--json"]);
    assert_eq!(found["results"][0]["id"], 2, "{found:#}");
    assert_eq!(server.seen.lock().unwrap().len(), 5, "one more request: the query");

    // The local model is another embedding space: everything is embedded again, never mixed.
    let local = strata.run(&["embed", "--json"]).json();
    assert_eq!(local["embedded"], 5, "{local}");
    assert_eq!(strata.vector_space().unwrap().0, strata_recall::DEFAULT_MODEL);
    assert_eq!(strata.message_vectors(), 5);
}

#[test]
fn an_endpoint_of_other_dimensions_is_one_clear_error_and_nothing_is_written() {
    let strata = Strata::new();
    let store = conversation(&strata);
    let server = serve(Behaviour { unavailable_first: 0, dimensions: Some(128) });
    let config = config(&strata, &server);
    let error = strata.run(&["--config", &config, "embed"]).failure();
    assert!(error.contains("128 dimensions") && error.contains("384"), "{error}");
    assert_eq!(strata.message_vectors(), 0);
    assert_eq!(store.backlog_count(None, None).unwrap(), 5);
}

#[test]
fn an_unreachable_endpoint_says_where_it_tried() {
    let strata = Strata::new();
    conversation(&strata);
    // A port nothing listens on: bind one, then free it.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let server = Server { url: format!("http://127.0.0.1:{port}"), seen: Arc::default() };
    let config = config(&strata, &server);
    let error = strata.run(&["--config", &config, "embed"]).failure();
    assert!(error.contains(&format!("127.0.0.1:{port}/v1/embeddings")), "{error}");
}
