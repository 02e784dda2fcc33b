//! Time bounds of the search tools.
//!
//! A bound is RFC 3339 (`2024-05-01T09:30:00Z`, `2024-05-01T11:30:00+02:00`), the same without
//! a zone (read as UTC), or a date (`2024-05-01`, read as UTC). `start_time` is inclusive and
//! `end_time` exclusive; a date-only `end_time` means the end of that day, so
//! `start_time = end_time = 2024-05-01` is the whole of May 1st.

use chrono::{DateTime, Duration, NaiveDate, NaiveDateTime, Utc};

use crate::error::{Error, Result};

/// Which side of the range a bound is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// Inclusive lower bound.
    Start,
    /// Exclusive upper bound (a date means the end of that day).
    End,
}

/// Parses a time bound; the error names the field and the accepted formats.
pub fn parse_bound(field: &'static str, text: &str, bound: Bound) -> Result<DateTime<Utc>> {
    let text = text.trim();
    if let Ok(time) = DateTime::parse_from_rfc3339(text) {
        return Ok(time.with_timezone(&Utc));
    }
    for format in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M"] {
        if let Ok(time) = NaiveDateTime::parse_from_str(text, format) {
            return Ok(time.and_utc());
        }
    }
    if let Ok(date) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        let midnight = date.and_hms_opt(0, 0, 0).expect("midnight exists").and_utc();
        return match bound {
            Bound::Start => Ok(midnight),
            // The last representable day has no end of day; refuse it rather than overflow.
            Bound::End => midnight.checked_add_signed(Duration::days(1)).ok_or_else(|| {
                Error::invalid(field, format!("{text:?} is past the last date this can represent"))
            }),
        };
    }
    let shown: String = text.chars().take(60).collect();
    Err(Error::invalid(
        field,
        format!("{shown:?} is not a time; use RFC 3339 (2024-05-01T09:30:00Z) or a date (2024-05-01)"),
    ))
}

/// An optional inclusive start and exclusive end.
pub type TimeRange = (Option<DateTime<Utc>>, Option<DateTime<Utc>>);

/// Parses both optional bounds and checks that the range is not empty.
pub fn parse_range(start: Option<&str>, end: Option<&str>) -> Result<TimeRange> {
    let start = start
        .filter(|s| !s.trim().is_empty())
        .map(|s| parse_bound("start_time", s, Bound::Start))
        .transpose()?;
    let end =
        end.filter(|s| !s.trim().is_empty()).map(|s| parse_bound("end_time", s, Bound::End)).transpose()?;
    if let (Some(start), Some(end)) = (start, end)
        && start >= end
    {
        return Err(Error::invalid(
            "end_time",
            format!("the range is empty: end_time ({end}) must be after start_time ({start})"),
        ));
    }
    Ok((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        let t = |s, b| parse_bound("t", s, b).unwrap().to_rfc3339();
        assert_eq!(t("2024-05-01T09:30:00Z", Bound::Start), "2024-05-01T09:30:00+00:00");
        assert_eq!(t("2024-05-01T11:30:00+02:00", Bound::End), "2024-05-01T09:30:00+00:00");
        assert_eq!(t("2024-05-01 09:30", Bound::Start), "2024-05-01T09:30:00+00:00");
        assert_eq!(t("2024-05-01", Bound::Start), "2024-05-01T00:00:00+00:00");
        assert_eq!(t("2024-05-01", Bound::End), "2024-05-02T00:00:00+00:00");
        assert!(
            parse_bound("start_time", "yesterday", Bound::Start)
                .unwrap_err()
                .to_string()
                .contains("RFC 3339")
        );
        assert!(parse_range(Some("2024-05-02"), Some("2024-05-01")).is_err());
        assert!(parse_range(Some("2024-05-01"), Some("2024-05-01")).is_ok());
    }
}
