//! Embedding throughput (issue 23): strata's [`Embedder`] against a minimal loop over an ONNX
//! Runtime session of the same model file, in the same run, on the texts the demo embeds.
//!
//! The corpus is the demo's conversation (seed 42, 1,600 messages) as the embedding backlog
//! hands it to the model: `name: text`, cut by the default embedding policy (tool results one
//! chunk, other messages up to 8), every 16th text, about 145 of them.
//!
//! - `embed/strata`: `Embedder::embed_sorted` with the default batch size.
//! - `embed/bare_ort`: tokenizer, one `Session::run` per batch, mean pooling and L2
//!   normalization, nothing else: the runtime's limit for the same model, sequence cap, batch
//!   size and thread count.
//!
//! At the end a table gives texts/s and tokens/s of each (medians from criterion's estimates).
//! With `STRATA_BENCH_LEVERS=1` a sweep of the levers (intra-op threads, batch size, batching by
//! length, sequence-length cap, graph optimization level, intra-op spinning) runs first over
//! the bare loop, each timed over the whole corpus, in alternating rounds (machine noise lands on
//! every lever alike), the best round kept. Needs the embedding assets (`scripts/fetch-embed-assets.sh`).

use std::path::{Path, PathBuf};
use std::time::Instant;

use criterion::{Criterion, Throughput};
use ort::session::Session;
use ort::session::builder::GraphOptimizationLevel;
use ort::value::Tensor;
use strata_recall::embedding::{MINILM_L6_V2, chunk_text};
use strata_recall::{Embedder, RecallConfig};
use strata_seam::Role;
use strata_synth::TranscriptSpec;
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

/// The texts of the demo's backlog, as the pipeline hands them to the model.
fn demo_texts() -> Vec<String> {
    let messages = 1_600;
    let transcript = strata_synth::generate(&TranscriptSpec {
        min_messages: messages,
        min_chars: messages * strata_synth::CHARS_PER_MESSAGE,
        ..TranscriptSpec::default()
    });
    let config = RecallConfig::default();
    let mut texts = Vec::new();
    for message in &transcript.messages {
        let speaker = message.name.clone().unwrap_or_else(|| message.role.as_str().to_owned());
        let text = format!("{speaker}: {}", message.content);
        let max = if message.role == Role::Tool { config.embed_tool_chunks } else { config.embed_max_chunks };
        texts.extend(chunk_text(&text, MINILM_L6_V2.chunk_words, max).into_iter().map(str::to_owned));
    }
    texts.into_iter().step_by(16).collect()
}

/// One configuration of the runtime.
#[derive(Clone, Copy, Debug)]
struct Lever {
    threads: usize,
    batch: usize,
    sorted: bool,
    max_tokens: usize,
    level: GraphOptimizationLevel,
    spinning: bool,
}

/// What strata runs by default.
const DEFAULT: Lever = Lever {
    threads: 2,
    batch: 32,
    sorted: true,
    max_tokens: MINILM_L6_V2.max_tokens,
    level: GraphOptimizationLevel::Level3,
    spinning: false,
};

/// The minimal loop: a session, a tokenizer, pooling.
struct BareLoop {
    session: Session,
    tokenizer: Tokenizer,
    lever: Lever,
}

impl BareLoop {
    fn new(environment: &ort::environment::Environment, model_dir: &Path, lever: Lever) -> BareLoop {
        let session = Session::builder(environment)
            .unwrap()
            .with_optimization_level(lever.level)
            .unwrap()
            .with_intra_threads(lever.threads)
            .unwrap()
            .with_intra_op_spinning(lever.spinning)
            .unwrap()
            .commit_from_file(model_dir.join("model.onnx"))
            .unwrap();
        BareLoop { session, tokenizer: tokenizer(model_dir, lever.max_tokens), lever }
    }

    fn embed(&mut self, texts: &[&str]) -> Vec<Vec<f32>> {
        let mut order: Vec<usize> = (0..texts.len()).collect();
        if self.lever.sorted {
            order.sort_by_key(|&i| texts[i].len());
        }
        let mut vectors = vec![Vec::new(); texts.len()];
        for batch in order.chunks(self.lever.batch) {
            let inputs: Vec<&str> = batch.iter().map(|&i| texts[i]).collect();
            let encodings = self.tokenizer.encode_batch(inputs, true).unwrap();
            let (rows, width) = (encodings.len(), encodings[0].len());
            let column = |get: fn(&tokenizers::Encoding) -> &[u32]| -> Tensor<i64> {
                let data: Vec<i64> =
                    encodings.iter().flat_map(|e| get(e).iter().map(|&x| i64::from(x))).collect();
                Tensor::from_array(([rows, width], data)).unwrap()
            };
            let ids = column(tokenizers::Encoding::get_ids);
            let mask = column(tokenizers::Encoding::get_attention_mask);
            let types = column(tokenizers::Encoding::get_type_ids);
            let outputs = self
                .session
                .run(ort::inputs!["input_ids" => ids, "attention_mask" => mask, "token_type_ids" => types])
                .unwrap();
            let (_, hidden) = outputs["last_hidden_state"].try_extract_tensor::<f32>().unwrap();
            let dims = hidden.len() / (rows * width);
            for (row, &i) in batch.iter().enumerate() {
                let mask = encodings[row].get_attention_mask();
                let mut pooled = vec![0f32; dims];
                for (token, _) in mask.iter().enumerate().filter(|(_, m)| **m == 1) {
                    let at = (row * width + token) * dims;
                    pooled.iter_mut().zip(&hidden[at..at + dims]).for_each(|(p, h)| *p += h);
                }
                let norm = pooled.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
                pooled.iter_mut().for_each(|x| *x /= norm);
                vectors[i] = pooled;
            }
        }
        vectors
    }
}

/// The model's tokenizer, padded to the longest text of a batch and cut at `max_tokens`.
fn tokenizer(model_dir: &Path, max_tokens: usize) -> Tokenizer {
    let mut tokenizer = Tokenizer::from_file(model_dir.join("tokenizer.json")).unwrap();
    tokenizer.with_padding(Some(PaddingParams {
        strategy: PaddingStrategy::BatchLongest,
        pad_id: 0,
        pad_token: "[PAD]".into(),
        ..PaddingParams::default()
    }));
    tokenizer
        .with_truncation(Some(TruncationParams { max_length: max_tokens, ..TruncationParams::default() }))
        .unwrap();
    tokenizer
}

/// Times each lever over the whole corpus, `rounds` times, alternating; prints texts/s.
fn sweep(environment: &ort::environment::Environment, model_dir: &Path, texts: &[&str], tokens: usize) {
    use GraphOptimizationLevel as Level;
    let levers: Vec<(&str, Lever)> = vec![
        ("default (2 threads, batch 32, sorted, 128 tokens, level 3, no spinning)", DEFAULT),
        ("1 intra-op thread", Lever { threads: 1, ..DEFAULT }),
        ("batch 8", Lever { batch: 8, ..DEFAULT }),
        ("batch 16", Lever { batch: 16, ..DEFAULT }),
        ("batch 64", Lever { batch: 64, ..DEFAULT }),
        ("input order (not sorted by length)", Lever { sorted: false, ..DEFAULT }),
        ("sequence cap 256", Lever { max_tokens: 256, ..DEFAULT }),
        ("sequence cap 64", Lever { max_tokens: 64, ..DEFAULT }),
        ("graph optimization disabled", Lever { level: Level::Disable, ..DEFAULT }),
        ("graph optimization level 1", Lever { level: Level::Level1, ..DEFAULT }),
        ("graph optimization level 2", Lever { level: Level::Level2, ..DEFAULT }),
        ("graph optimization all", Lever { level: Level::All, ..DEFAULT }),
        ("intra-op spinning", Lever { spinning: true, ..DEFAULT }),
        ("1 intra-op thread, spinning", Lever { threads: 1, spinning: true, ..DEFAULT }),
    ];
    let mut loops: Vec<BareLoop> =
        levers.iter().map(|(_, lever)| BareLoop::new(environment, model_dir, *lever)).collect();
    let rounds: usize = std::env::var("STRATA_BENCH_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(2);
    let mut seconds = vec![Vec::new(); loops.len()];
    for round in 0..rounds {
        for (i, bare) in loops.iter_mut().enumerate() {
            bare.embed(&texts[..8]);
            let started = Instant::now();
            std::hint::black_box(bare.embed(texts));
            seconds[i].push(started.elapsed().as_secs_f64());
        }
        eprintln!("levers: round {}/{rounds} done", round + 1);
    }
    println!("\nlever sweep, bare loop, {} texts, {tokens} tokens, best of {rounds} rounds:", texts.len());
    println!("| lever | texts/s | tokens/s | vs default |");
    println!("|---|---:|---:|---:|");
    // The fastest round: on a shared machine, what a lever costs when it is not interrupted.
    let best = |values: &[f64]| values.iter().copied().fold(f64::INFINITY, f64::min);
    let base = best(&seconds[0]);
    for ((name, _), times) in levers.iter().zip(&seconds) {
        let t = best(times);
        println!("| {name} | {:.1} | {:.0} | {:.2}x |", texts.len() as f64 / t, tokens as f64 / t, base / t);
    }
}

fn main() {
    let assets: PathBuf = strata_recall::embedding::default_assets_dir();
    let embedder = Embedder::load(&assets).expect("run scripts/fetch-embed-assets.sh first");
    let environment = strata_recall::embedding::runtime_environment(&assets).unwrap();
    // The bare loop runs the default model's file, the one `Embedder::load` runs.
    let default = strata_recall::model_spec(strata_recall::DEFAULT_MODEL).unwrap();
    let model_dir = assets.join(default.dir);
    let owned = demo_texts();
    let texts: Vec<&str> = owned.iter().map(String::as_str).collect();
    let counter = tokenizer(&model_dir, MINILM_L6_V2.max_tokens);
    let tokens: usize = texts.iter().map(|text| counter.encode(*text, true).unwrap().len()).sum();
    eprintln!("{} texts, {tokens} tokens (at most {} per text)", texts.len(), MINILM_L6_V2.max_tokens);

    if std::env::var_os("STRATA_BENCH_LEVERS").is_some() {
        sweep(&environment, &model_dir, &texts, tokens);
    }

    let mut bare = BareLoop::new(&environment, &model_dir, DEFAULT);
    // The two compute the same vectors.
    let ours = embedder.embed_sorted(&texts[..16], 32).unwrap();
    let theirs = bare.embed(&texts[..16]);
    for (a, b) in ours.iter().zip(&theirs) {
        let cosine = strata_recall::embedding::cosine(a, b);
        assert!(cosine > 0.9999, "the bare loop computes another model: cosine {cosine}");
    }

    let mut criterion = Criterion::default().configure_from_args().sample_size(10);
    let mut group = criterion.benchmark_group("embed");
    group.throughput(Throughput::Elements(texts.len() as u64));
    group.warm_up_time(std::time::Duration::from_secs(1));
    let batch = RecallConfig::default().embed_batch_size;
    group.bench_function("strata", |b| b.iter(|| embedder.embed_sorted(&texts, batch).unwrap()));
    group.bench_function("bare_ort", |b| b.iter(|| bare.embed(&texts)));
    group.finish();
    criterion.final_summary();

    let median = |name: &str| -> Option<f64> {
        let path = format!("{}/criterion/embed/{name}/new/estimates.json", target_dir());
        let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
        Some(json["median"]["point_estimate"].as_f64()? / 1e9)
    };
    if let (Some(strata), Some(bare)) = (median("strata"), median("bare_ort")) {
        println!("\n| {} texts, {tokens} tokens | texts/s | tokens/s |", texts.len());
        println!("|---|---:|---:|");
        for (name, seconds) in [("strata `Embedder`", strata), ("bare ort loop", bare)] {
            println!("| {name} | {:.1} | {:.0} |", texts.len() as f64 / seconds, tokens as f64 / seconds);
        }
        println!("strata at {:.1}% of the bare loop's throughput", 100.0 * bare / strata);
    }
}

fn target_dir() -> String {
    std::env::var("CARGO_TARGET_DIR")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/target").to_owned())
}
