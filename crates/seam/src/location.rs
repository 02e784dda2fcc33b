//! Database locations as the user gives them: a SQLite file's path or a PostgreSQL url. Every
//! crate that opens a database or names one in a message asks here, so a url's password is
//! kept out of messages, logs and `repr` the same way everywhere.

/// Whether a database location is a PostgreSQL url rather than a SQLite file's path.
pub fn is_postgres_url(location: &str) -> bool {
    location.starts_with("postgres://") || location.starts_with("postgresql://")
}

/// A database location for messages and logs: a url's password replaced by `***`, anything
/// else as it is.
pub fn without_password(location: &str) -> String {
    match (location.find("://"), location.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = &location[scheme + 3..at];
            match credentials.find(':') {
                Some(colon) => {
                    format!("{}{}:***{}", &location[..scheme + 3], &credentials[..colon], &location[at..])
                }
                None => location.to_owned(),
            }
        }
        _ => location.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_shown_without_its_password() {
        assert_eq!(
            without_password("postgres://bot:s3cret@db:5432/strata"),
            "postgres://bot:***@db:5432/strata"
        );
        assert_eq!(without_password("postgres://db/strata"), "postgres://db/strata");
        assert_eq!(without_password("/var/lib/bot@home/strata.db"), "/var/lib/bot@home/strata.db");
        assert!(is_postgres_url("postgresql://db/strata") && !is_postgres_url("strata.db"));
    }
}
