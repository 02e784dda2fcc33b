//! Where vectors come from: the local model, or an OpenAI-compatible `/v1/embeddings` endpoint
//! (OpenAI, Ollama, vLLM, text-embeddings-inference, llama.cpp server).
//!
//! The endpoint is implemented here, in the root crate, as recall's [`EmbeddingEndpoint`]:
//! recall holds no HTTP client and no tokio (ARCHITECTURE.md, layering), and the root already
//! has the one HTTP client strata keeps, the compactor's [`ChatEndpoint`], with its key lookup,
//! per-attempt timeout and retries of transient failures. Recall calls the endpoint from its
//! synchronous code (the embedding worker's thread, a tool call on a blocking thread, a
//! command), so each request is spawned on a runtime this module owns, built by
//! [`crate::blocking::runtime`], and waited for on a channel: it never blocks inside an async
//! task and never nests runtimes.

use std::sync::Arc;

use serde_json::{Value, json};
use strata_llm::{ChatEndpoint, RetryPolicy};
use strata_recall::{EmbedProvider, Embedder, EmbeddingEndpoint, EndpointError, RecallConfig};

/// Loads the embedder `recall` names: the local model from its assets, or the endpoint of
/// `[recall.embed_endpoint]` (requests retried by `retry`, the compactor's policy).
pub fn load_embedder(recall: &RecallConfig, retry: &RetryPolicy) -> strata_recall::Result<Embedder> {
    match recall.embed_provider {
        EmbedProvider::Local => Embedder::for_config(recall),
        EmbedProvider::Openai => {
            let settings = &recall.embed_endpoint;
            let endpoint = OpenAiEmbeddings::new(settings, retry)
                .map_err(|source| strata_recall::Error::Endpoint { source })?;
            Embedder::remote(&settings.model, settings.dimensions, settings.batch_size, Arc::new(endpoint))
        }
    }
}

/// An OpenAI-compatible embeddings endpoint.
pub struct OpenAiEmbeddings {
    endpoint: ChatEndpoint,
    model: String,
    dimensions: usize,
    runtime: Option<tokio::runtime::Runtime>,
}

impl std::fmt::Debug for OpenAiEmbeddings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiEmbeddings")
            .field("url", &self.endpoint.url())
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl OpenAiEmbeddings {
    /// The endpoint `settings` describe; its key is read from `api_key_env` (else
    /// `OPENAI_API_KEY`), like the summarizer's.
    pub fn new(
        settings: &strata_recall::EndpointSettings,
        retry: &RetryPolicy,
    ) -> Result<OpenAiEmbeddings, EndpointError> {
        let key = strata_llm::api_key(&settings.api_key_env);
        let endpoint = ChatEndpoint::with_path(&settings.base_url, "embeddings", key, retry.clone())?;
        let runtime = crate::blocking::runtime()?;
        Ok(OpenAiEmbeddings {
            endpoint,
            model: settings.model.clone(),
            dimensions: settings.dimensions,
            runtime: Some(runtime),
        })
    }

    /// The vectors of one answer, in the order of the texts.
    fn vectors(&self, answer: &Value, texts: usize) -> Result<Vec<Vec<f32>>, EndpointError> {
        let malformed = |reason: String| -> EndpointError {
            format!("{} answered with no usable embeddings: {reason}", self.endpoint.url()).into()
        };
        let data = answer["data"].as_array().ok_or_else(|| malformed("no \"data\" list".into()))?;
        if data.len() != texts {
            return Err(malformed(format!("{} embeddings for {texts} texts", data.len())));
        }
        let mut vectors = vec![None; texts];
        for (position, item) in data.iter().enumerate() {
            // Servers return them in order; `index` says so when it is there.
            let index = item["index"].as_u64().map_or(position, |i| i as usize);
            let vector: Vec<f32> = item["embedding"]
                .as_array()
                .ok_or_else(|| malformed(format!("item {position} has no \"embedding\" list")))?
                .iter()
                .map(|x| x.as_f64().map(|x| x as f32))
                .collect::<Option<_>>()
                .ok_or_else(|| malformed(format!("item {position} holds something other than numbers")))?;
            if vector.len() != self.dimensions {
                return Err(malformed(format!(
                    "{} dimensions, [recall.embed_endpoint] dimensions = {}",
                    vector.len(),
                    self.dimensions
                )));
            }
            match vectors.get_mut(index) {
                Some(slot @ None) => *slot = Some(vector),
                _ => return Err(malformed(format!("index {index} is out of range or repeated"))),
            }
        }
        Ok(vectors.into_iter().map(|vector| vector.expect("every index was filled")).collect())
    }
}

impl EmbeddingEndpoint for OpenAiEmbeddings {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EndpointError> {
        let body = json!({"model": self.model, "input": texts, "encoding_format": "float"});
        let endpoint = self.endpoint.clone();
        let (sender, receiver) = std::sync::mpsc::sync_channel(1);
        let runtime = self.runtime.as_ref().expect("the runtime lives as long as the endpoint");
        runtime.spawn(async move {
            let _ = sender.send(endpoint.complete(&body).await);
        });
        let answer = receiver.recv().map_err(|_| -> EndpointError { "the request was dropped".into() })??;
        self.vectors(&answer, texts.len())
    }
}

impl Drop for OpenAiEmbeddings {
    fn drop(&mut self) {
        // Dropping a runtime waits for its threads, which async code may not do: an engine may
        // be dropped inside a task.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}
