//! End-to-end tests of the `strata` binary and the engine.

mod util;

mod background;
mod cli_args;
mod cli_chat;
mod cli_compact;
mod cli_demo;
mod cli_eval;
mod cli_export;
mod cli_forget;
mod cli_mcp;
mod cli_recall;
mod cli_store;
mod crash;
mod embed_remote;
mod interop;
mod llm_recorded;
mod mcp_http;
mod memory_life;
mod otel;
mod postgres;
mod recalled;
mod reliability;
mod secrets;
mod serve;
mod summaries;
mod tool_names;
mod validity;
