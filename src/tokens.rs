//! Bearer tokens bound to personas: who may act as whom over HTTP (`strata serve`, `strata mcp
//! --http --tokens`).
//!
//! A token file is TOML, one `[[token]]` table per client:
//!
//! ```toml
//! [[token]]
//! name = "support-bot"        # shown in logs and metrics, never the token itself
//! sha256 = "9f86d08..."       # SHA-256 of the token, in hex: the file holds no secret
//! personas = ["support"]      # the personas it may act as; ["*"] for every one
//! read_only = false           # true: it may read and prepare contexts, never write
//! ```
//!
//! Only digests are stored, so a leaked file (or a backup of it) gives no one access; a
//! request's token is hashed and looked up. `strata token new` makes a token and its entry.
//! A file is validated whole when loaded: a bad entry refuses the file, naming the entry, and
//! the server does not start.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use sha2::{Digest, Sha256};

/// Why a token file was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// The file cannot be read.
    #[error("cannot read the token file {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// The file is not TOML of the expected shape.
    #[error("the token file {} is not valid", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What the TOML reader said.
        #[source]
        source: toml::de::Error,
    },
    /// An entry breaks a rule.
    #[error("token {name:?} in {}: {reason}", path.display())]
    Entry {
        /// The file.
        path: PathBuf,
        /// The entry's name (or its position, when it has none).
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The file names no token: a server would refuse every request.
    #[error("the token file {} has no [[token]] entry", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// The system's random source could not be read.
    #[error("cannot read /dev/urandom for a token")]
    Random(#[source] std::io::Error),
}

/// The file as written.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenFile {
    #[serde(default)]
    token: Vec<TokenEntry>,
}

/// One `[[token]]` table.
#[derive(Debug, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct TokenEntry {
    /// The client's name (logs, metrics).
    pub name: String,
    /// The token's SHA-256, 64 hex digits.
    pub sha256: String,
    /// The personas it may act as; `*` alone for all.
    pub personas: Vec<String>,
    /// Reads only.
    #[serde(default)]
    pub read_only: bool,
}

/// What a token allows: the personas it may act as, and whether it may write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The token's name.
    pub name: String,
    /// `None`: every persona.
    personas: Option<BTreeSet<String>>,
    /// It may not write (append, memories, proposals, forget).
    pub read_only: bool,
}

impl Grant {
    /// A grant of every persona, for writing: the one shared token of `strata mcp --token`.
    pub fn everything(name: &str) -> Grant {
        Grant { name: name.to_owned(), personas: None, read_only: false }
    }

    /// Whether it may act as `persona`.
    pub fn may_act_as(&self, persona: &str) -> bool {
        self.personas.as_ref().is_none_or(|personas| personas.contains(persona))
    }
}

/// The tokens a server accepts, by digest. Clones share one table, which
/// [`Tokens::replace_with`] swaps whole: a server reloads its token file (SIGHUP) without a
/// restart, and every clone (REST, MCP) sees the new table from its next request on.
#[derive(Clone, Debug)]
pub struct Tokens {
    by_digest: Arc<RwLock<Table>>,
}

type Table = Arc<HashMap<[u8; 32], Arc<Grant>>>;

impl Tokens {
    /// Reads and validates a token file.
    pub fn load(path: &Path) -> Result<Tokens, TokenError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| TokenError::Read { path: path.to_owned(), source })?;
        Tokens::parse(&text, path)
    }

    /// Validates the text of a token file (`path` names it in errors).
    pub fn parse(text: &str, path: &Path) -> Result<Tokens, TokenError> {
        let file: TokenFile =
            toml::from_str(text).map_err(|source| TokenError::Parse { path: path.to_owned(), source })?;
        if file.token.is_empty() {
            return Err(TokenError::Empty { path: path.to_owned() });
        }
        let mut by_digest = HashMap::new();
        let mut names = BTreeSet::new();
        for (index, entry) in file.token.into_iter().enumerate() {
            let name =
                if entry.name.trim().is_empty() { format!("#{}", index + 1) } else { entry.name.clone() };
            let refuse =
                |reason: String| TokenError::Entry { path: path.to_owned(), name: name.clone(), reason };
            if entry.name.trim().is_empty() {
                return Err(refuse("the name is empty".into()));
            }
            if !names.insert(entry.name.clone()) {
                return Err(refuse("another entry has the same name".into()));
            }
            let digest = parse_digest(&entry.sha256).ok_or_else(|| {
                refuse("sha256 must be the token's SHA-256 as 64 hex digits (`strata token hash`)".into())
            })?;
            let personas = parse_personas(&entry.personas).map_err(refuse)?;
            let grant = Grant { name: entry.name, personas, read_only: entry.read_only };
            if by_digest.insert(digest, Arc::new(grant)).is_some() {
                return Err(refuse("another entry has the same token".into()));
            }
        }
        Ok(Tokens::from_table(by_digest))
    }

    /// One token that may act as every persona and write (`strata mcp --token`).
    pub fn shared(token: &str) -> Tokens {
        let grant = Arc::new(Grant::everything("shared"));
        Tokens::from_table(HashMap::from([(digest(token), grant)]))
    }

    fn from_table(table: HashMap<[u8; 32], Arc<Grant>>) -> Tokens {
        Tokens { by_digest: Arc::new(RwLock::new(Arc::new(table))) }
    }

    /// The table in force. A poisoned lock still holds a whole table: a swap is one store.
    fn table(&self) -> Table {
        self.by_digest.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Makes `fresh`'s tokens the ones this table and every clone of it accept, at once: a
    /// request sees the old table or the new one, never a mix.
    pub fn replace_with(&self, fresh: &Tokens) {
        let table = fresh.table();
        *self.by_digest.write().unwrap_or_else(std::sync::PoisonError::into_inner) = table;
    }

    /// How many tokens are accepted.
    pub fn count(&self) -> usize {
        self.table().len()
    }

    /// What `token` allows, or `None` for a token this server does not know.
    pub fn grant(&self, token: &str) -> Option<Arc<Grant>> {
        if token.is_empty() {
            return None;
        }
        // A lookup by digest: timing reveals at most which digests exist, not a token.
        self.table().get(&digest(token)).cloned()
    }

    /// The grant of a request's `Authorization` header (`Bearer <token>`), if it carries a
    /// known token.
    pub fn authorize(&self, authorization: Option<&[u8]>) -> Option<Arc<Grant>> {
        let value = std::str::from_utf8(authorization?).ok()?;
        let token = value.strip_prefix("Bearer ").or_else(|| value.strip_prefix("bearer "))?;
        self.grant(token.trim())
    }
}

fn parse_personas(personas: &[String]) -> Result<Option<BTreeSet<String>>, String> {
    if personas.is_empty() {
        return Err("personas is empty: name the personas it may act as, or [\"*\"]".into());
    }
    if personas.iter().any(|persona| persona == "*") {
        if personas.len() > 1 {
            return Err("\"*\" stands for every persona and must be alone".into());
        }
        return Ok(None);
    }
    let mut set = BTreeSet::new();
    for persona in personas {
        strata_seam::backend::validate_persona(persona).map_err(|error| error.to_string())?;
        set.insert(persona.clone());
    }
    Ok(Some(set))
}

/// The SHA-256 of a token.
pub fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// A digest as 64 lowercase hex digits.
pub fn hex(digest: &[u8]) -> String {
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn parse_digest(text: &str) -> Option<[u8; 32]> {
    let text = text.trim();
    if text.len() != 64 || !text.is_ascii() {
        return None;
    }
    let mut digest = [0u8; 32];
    for (i, byte) in digest.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(digest)
}

/// A fresh token: 32 bytes from the system's random source, in hex.
pub fn fresh() -> Result<String, TokenError> {
    use std::io::Read;
    let mut random = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut source| source.read_exact(&mut random))
        .map_err(TokenError::Random)?;
    Ok(hex(&random))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(entries: &str) -> Result<Tokens, TokenError> {
        Tokens::parse(entries, Path::new("tokens.toml"))
    }

    #[test]
    fn a_token_acts_only_as_its_personas_and_is_stored_hashed() {
        let text = format!(
            "[[token]]\nname = \"a\"\nsha256 = \"{}\"\npersonas = [\"alice\"]\n\n\
             [[token]]\nname = \"all\"\nsha256 = \"{}\"\npersonas = [\"*\"]\nread_only = true\n",
            hex(&digest("secret-a")),
            hex(&digest("secret-all"))
        );
        let tokens = file(&text).unwrap();
        let a = tokens.grant("secret-a").unwrap();
        assert!(a.may_act_as("alice") && !a.may_act_as("bob") && !a.read_only);
        let all = tokens.grant("secret-all").unwrap();
        assert!(all.may_act_as("bob") && all.read_only);
        assert!(tokens.grant("secret-b").is_none());
        assert!(tokens.grant("").is_none());
        // The digest itself is not a token.
        assert!(tokens.grant(&hex(&digest("secret-a"))).is_none());
    }

    #[test]
    fn a_bad_entry_refuses_the_file_naming_it() {
        let good = hex(&digest("x"));
        let cases = [
            ("", "no [[token]]"),
            ("[[token]]\nname = \"a\"\nsha256 = \"abc\"\npersonas = [\"p\"]\n", "64 hex digits"),
            (&format!("[[token]]\nname = \"a\"\nsha256 = \"{good}\"\npersonas = []\n"), "personas is empty"),
            (&format!("[[token]]\nname = \"a\"\nsha256 = \"{good}\"\npersonas = [\"*\", \"p\"]\n"), "alone"),
            (
                &format!("[[token]]\nname = \"a\"\nsha256 = \"{good}\"\npersonas = [\"p\"]\ntoken = \"x\"\n"),
                "unknown field",
            ),
            (
                &format!(
                    "[[token]]\nname = \"a\"\nsha256 = \"{good}\"\npersonas = [\"p\"]\n[[token]]\nname = \"b\"\nsha256 = \"{good}\"\npersonas = [\"q\"]\n"
                ),
                "same token",
            ),
        ];
        for (text, expected) in cases {
            let error = file(text).unwrap_err();
            let message = strata_seam::error_chain(&error);
            assert!(message.contains(expected), "{message:?} should say {expected:?}");
        }
    }
}
