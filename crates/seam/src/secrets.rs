//! Secrets kept out of derived text: keys, tokens and passwords masked in what strata writes
//! from the messages (summaries, memories, the recalled block).
//!
//! A user pastes an API key into a chat; the verbatim message keeps it (it is what was said,
//! and only forgetting removes it), but a summary, a memory or the recalled block would repeat
//! it into every later context, to every model the context goes to, and into exports. So the
//! text strata derives passes [`Secrets::mask`] before it is written or shown: the common
//! formats (below) are built in, compiled once; [`Secrets::with_patterns`] adds an operator's
//! own (`[recall] secret_patterns`).

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::{Captures, Regex};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Error, Result};

/// What a masked secret reads as.
pub const MASK: &str = "[masked secret]";

/// The common formats, most specific first. What a match's `label` group holds is kept before
/// the mask (`password=`, `Authorization: Bearer `, `https://user:`), and its `tail` group
/// after it (the `@` of a URL); the rest is the secret. Each is anchored on what the format always holds
/// (a vendor prefix, a PEM armour line, a label before the value), so ordinary prose and code
/// are left alone.
const FORMATS: &[&str] = &[
    // PEM private keys, whole; a key cut off before its END line is masked to the end.
    r"(?s)-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\z)",
    // OpenAI (sk-, sk-proj-, sk-svcacct-, sk-admin-) and Anthropic (sk-ant-) keys.
    r"\bsk-(?:ant-|proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}",
    // An AWS secret access key pasted after its key id (40 base64 characters; alone they
    // could be anything, so only near the id).
    r"(?P<label>\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b[^\n]{0,100}?[^A-Za-z0-9/+=])[A-Za-z0-9/+=]{40}(?P<tail>[^A-Za-z0-9/+=]|\z)",
    // AWS access key ids (long-lived AKIA, temporary ASIA, and the rarer ABIA, ACCA).
    r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b",
    // GitHub tokens: personal, OAuth, user-to-server, server-to-server, refresh; fine-grained.
    r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,}\b",
    r"\bgithub_pat_[A-Za-z0-9_]{22,}",
    // Slack tokens (xoxb-, xoxp-, xoxa-, xoxo-, xoxr-, xoxs-) and incoming webhooks.
    r"\bxox[abposr]-[A-Za-z0-9\-]{10,}",
    r"https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]+",
    // Stripe secret and restricted keys (a publishable pk_ key is meant to be public).
    r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}",
    // Google API keys.
    r"\bAIza[0-9A-Za-z_\-]{35}",
    // JSON Web Tokens: a base64url header and payload (both JSON objects, so `eyJ`) and a signature.
    r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
    // Credentials in an Authorization header, and a bearer token anywhere.
    r"(?i)(?P<label>\bauthorization\s*[:=]\s*(?:bearer|basic|token|bot)\s+)[A-Za-z0-9._~+/=\-]{8,}",
    r"(?i)(?P<label>\bbearer\s+)[A-Za-z0-9._~+/\-]{16,}=*",
    // A password in a URL: `scheme://user:password@host` keeps the user.
    r"(?i)(?P<label>\b[a-z][a-z0-9+.\-]*://[^\s:/@]+:)[^\s@/]+(?P<tail>@)",
    // Assignments to a secret's name: `password=...`, `passwd: ...`, `"api_key": "..."`,
    // `AWS_SECRET_ACCESS_KEY=...`, `token=...`. The value ends at a space, quote, comma or `;`.
    r#"(?i)(?P<label>\b[a-z0-9_.\-]*(?:password|passwd|passphrase|pwd|secret|token|api[_\-]?key|access[_\-]?key|private[_\-]?key|auth[_\-]?key|credentials?)["']?\s*(?::|=|:=|=>)\s*["']?)[^\s"',;<>\[][^\s"',;<>]{2,}"#,
];

static BUILT_IN: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    // The formats are constants, and a unit test checks that every one of them compiles.
    FORMATS.iter().filter_map(|pattern| Regex::new(pattern).ok()).collect()
});

/// The secrets masked in derived text: the built-in formats and an operator's own patterns.
///
/// In TOML it is the list of extra patterns (`secret_patterns = ["corp-[0-9a-f]{32}"]`,
/// regular expressions in the `regex` crate's syntax); each is checked when the settings are
/// read, and what it matches is masked whole.
#[derive(Clone, Debug, Default)]
pub struct Secrets {
    patterns: Vec<String>,
    compiled: Vec<Regex>,
}

impl PartialEq for Secrets {
    fn eq(&self, other: &Secrets) -> bool {
        self.patterns == other.patterns
    }
}

impl Secrets {
    /// The built-in formats and `patterns`; a pattern that is not a regular expression, or
    /// that matches the empty text (it would mask nothing but slip a mask between every two
    /// characters), is refused with its position named.
    pub fn with_patterns(patterns: &[String]) -> Result<Secrets> {
        let mut compiled = Vec::with_capacity(patterns.len());
        for (at, pattern) in patterns.iter().enumerate() {
            let regex = Regex::new(pattern).map_err(|error| {
                Error::invalid(
                    "secret_patterns",
                    format!("pattern {at} ({pattern:?}) does not compile: {error}"),
                )
            })?;
            if regex.is_match("") {
                return Err(Error::invalid(
                    "secret_patterns",
                    format!("pattern {at} ({pattern:?}) matches the empty text"),
                ));
            }
            compiled.push(regex);
        }
        Ok(Secrets { patterns: patterns.to_vec(), compiled })
    }

    /// The operator's patterns, as given.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// `text` with every secret replaced by [`MASK`] (a label before it, such as `password=`
    /// or the user of a URL, kept); borrowed when there is none. An operator's pattern is
    /// masked whole, unless it names `label` or `tail` groups.
    pub fn mask<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut text = Cow::Borrowed(text);
        for regex in BUILT_IN.iter().chain(&self.compiled) {
            text = replace(text, regex);
        }
        text
    }

    /// [`Secrets::mask`] into an owned string, changed in place only when something is masked.
    pub fn mask_in_place(&self, text: &mut String) {
        if let Cow::Owned(masked) = self.mask(text) {
            *text = masked;
        }
    }
}

fn replace<'a>(text: Cow<'a, str>, regex: &Regex) -> Cow<'a, str> {
    if !regex.is_match(&text) {
        return text;
    }
    let masked = regex.replace_all(&text, |captures: &Captures<'_>| {
        let part = |name| captures.name(name).map_or("", |found| found.as_str());
        format!("{}{MASK}{}", part("label"), part("tail"))
    });
    Cow::Owned(masked.into_owned())
}

impl Serialize for Secrets {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        self.patterns.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Secrets {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Secrets, D::Error> {
        let patterns = Vec::<String>::deserialize(deserializer)?;
        Secrets::with_patterns(&patterns).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::{BUILT_IN, FORMATS, MASK, Secrets};

    #[test]
    fn every_built_in_format_compiles() {
        assert_eq!(BUILT_IN.len(), FORMATS.len());
    }

    /// One pasted secret of each common format, and what must be left of its line.
    pub(crate) const PASTED: &[(&str, &str)] = &[
        ("OPENAI_KEY sk-abcdefghijklmnopqrstuvwxyz0123456789ABCD", "sk-abcdefghij"),
        ("project key sk-proj-Ab3dEf6hIj9kLmNoPqRsTuVwXyZ_0123-4567", "Ab3dEf6hIj9k"),
        ("claude: sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_AbCd", "AbCdEfGhIjKlMn"),
        ("aws id AKIAIOSFODNN7EXAMPLE ok", "IOSFODNN7EXAMPLE"),
        ("temp ASIAY34FZKBOKMUTVV7A", "Y34FZKBOKMUTVV7A"),
        ("AKIAIOSFODNN7EXAMPLE and wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY.", "bPxRfiCY"),
        ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI"),
        ("gh ghp_0123456789abcdefghijABCDEFGHIJ012345 done", "ghp_0123456789"),
        ("oauth gho_16C7e42F292c6912E7710c838347Ae178B4a", "16C7e42F292c"),
        ("fine github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEF", "11ABCDEFG0123456789"),
        ("slack xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "1234567890123-AbCd"),
        ("stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWDarjtT1zdp7dc"),
        ("restricted rk_live_51H8abcdefghijklmnopqrst", "51H8abcdefghijkl"),
        ("maps AIzaSyA-1234567890abcdefghijklmnopqrstu", "SyA-1234567890"),
        (
            "jwt eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "dozjgNryP4J3",
        ),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7bq9x2Yq\nZ8kq0p1Q==\n-----END RSA PRIVATE KEY-----",
            "MIIEpAIBAAKCAQEA",
        ),
        ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA", "b3BlbnNzaC1rZXkt"),
        ("db password=hunter2-Secret! then", "hunter2"),
        ("passwd: Tr0ub4dor&3", "Tr0ub4dor"),
        (r#"{"api_key": "a1b2c3d4e5f6g7h8"}"#, "a1b2c3d4e5f6"),
        ("curl -H 'Authorization: Bearer abcDEF123456ghiJKL789' x", "abcDEF123456"),
        ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA"),
        ("postgres://admin:s3cr3t-pw@db.internal:5432/app", "s3cr3t-pw"),
    ];

    #[test]
    fn every_common_format_is_masked_and_its_label_kept() {
        let secrets = Secrets::default();
        for (pasted, secret_part) in PASTED {
            let masked = secrets.mask(pasted);
            assert!(masked.contains(MASK), "{pasted:?} was not masked: {masked:?}");
            assert!(!masked.contains(secret_part), "{pasted:?} kept {secret_part:?}: {masked:?}");
        }
        assert_eq!(secrets.mask("db password=hunter2 then"), format!("db password={MASK} then"));
        assert_eq!(secrets.mask("postgres://admin:pw123@db/app"), format!("postgres://admin:{MASK}@db/app"));
    }

    #[test]
    fn ordinary_text_and_code_are_left_alone() {
        let secrets = Secrets::default();
        for text in [
            "The port is 8080 and the deploy runs at 5pm.",
            "max_tokens=400, summary_target_tokens = 400",
            "Ask for a token budget; the password policy needs 12 characters.",
            "https://example.com/path?q=1 and user@example.com",
            "fn mask(text: &str) -> String { text.to_owned() }",
            "a publishable key pk_live_abcdefghijklmnop is public",
        ] {
            assert_eq!(secrets.mask(text), text);
        }
    }

    #[test]
    fn an_operators_patterns_are_masked_and_bad_ones_refused_by_position() {
        let secrets = Secrets::with_patterns(&["corp-[0-9a-f]{16}".to_owned()]).unwrap();
        assert_eq!(secrets.mask("use corp-0123456789abcdef now"), format!("use {MASK} now"));
        let error = Secrets::with_patterns(&["ok".to_owned(), "(unclosed".to_owned()]).unwrap_err();
        assert!(error.to_string().contains("pattern 1"), "{error}");
        let error = Secrets::with_patterns(&["x*".to_owned()]).unwrap_err();
        assert!(error.to_string().contains("empty text"), "{error}");
        let parsed: Secrets = serde_json::from_str(r#"["corp-[0-9a-f]{16}"]"#).unwrap();
        assert_eq!(parsed, secrets);
        assert!(serde_json::from_str::<Secrets>(r#"["(bad"]"#).is_err());
    }
}
