//! `strata token`: make a bearer token and its entry for a token file (`strata serve --tokens`),
//! or hash a token of one's own. The token is printed once, on standard error (or in `--json`);
//! standard output carries only the TOML entry, so `strata token new ... >> tokens.toml` keeps
//! the secret out of the file.

use std::io::{Read, Write};

use anyhow::{Context, bail};

use crate::cli::output::print_json;
use crate::tokens::{self, TokenEntry};

/// `strata token` commands.
#[derive(Debug, clap::Subcommand)]
pub enum TokenCommand {
    /// Make a fresh token: its entry for the token file on standard output, the token itself
    /// on standard error (give it to the client; it is not stored anywhere).
    New {
        /// The client's name (logs and metrics show it, never the token).
        #[arg(long)]
        name: String,
        /// A persona it may act as (repeat for several); `*` for every persona.
        #[arg(long = "persona", required = true)]
        personas: Vec<String>,
        /// It may read and prepare contexts, never write.
        #[arg(long)]
        read_only: bool,
    },
    /// Print the SHA-256 of a token read from standard input (one line), for an entry of a
    /// token you made yourself.
    Hash,
}

/// Runs `strata token`.
pub fn run(command: &TokenCommand, json: bool, out: &mut impl Write) -> anyhow::Result<()> {
    match command {
        TokenCommand::New { name, personas, read_only } => {
            let token = tokens::fresh()?;
            let entry = TokenEntry {
                name: name.clone(),
                sha256: tokens::hex(&tokens::digest(&token)),
                personas: personas.clone(),
                read_only: *read_only,
            };
            // The entry is validated as the server will read it, so a bad persona fails now.
            let toml = entry_toml(&entry)?;
            tokens::Tokens::parse(&toml, std::path::Path::new("the new entry"))?;
            if json {
                print_json(out, &serde_json::json!({"token": token, "entry": entry, "toml": toml}))?;
            } else {
                eprintln!(
                    "strata: token for {name} (shown once; the entry below holds only its hash):\n{token}"
                );
                write!(out, "{toml}")?;
            }
        }
        TokenCommand::Hash => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("cannot read the token from standard input")?;
            let token = text.trim();
            if token.is_empty() {
                bail!("no token on standard input");
            }
            writeln!(out, "{}", tokens::hex(&tokens::digest(token)))?;
        }
    }
    Ok(())
}

/// One `[[token]]` table.
fn entry_toml(entry: &TokenEntry) -> anyhow::Result<String> {
    #[derive(serde::Serialize)]
    struct One<'a> {
        token: [&'a TokenEntry; 1],
    }
    Ok(format!("\n{}", toml::to_string(&One { token: [entry] }).context("cannot write the entry")?))
}
