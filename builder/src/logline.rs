//! Parsing of single input lines: raw query-log lines and pre-aggregated count lines.
//!
//! This is the ingestion hot path (every line of every log passes through it), so the parsers
//! work on borrowed bytes, never allocate, and hand back slices into the caller's buffer.
//! Timestamps are parsed by hand with fixed-position field checks and the days-from-civil
//! algorithm instead of a date library: we only need a handful of exact formats, and a
//! general-purpose parser would cost more than the rest of the line handling combined.
//!
//! Malformed lines are not fatal: each parser returns a [`LineError`] so the caller can count
//! skipped lines per reason and keep going. Queries are returned exactly as found (only UTF-8
//! validated); normalization is the caller's job.

/// Hours since the Unix epoch (UTC hour bucket): floor(unix_seconds / 3600).
pub type Hour = u32;

/// One parsed raw log line: `timestamp<TAB>query[<TAB>user]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogLine<'a> {
    /// UTC hour bucket of the timestamp.
    pub hour: Hour,
    /// The query text, unnormalized.
    pub query: &'a str,
    /// The user id, if present and non-empty.
    pub user: Option<&'a str>,
}

/// One parsed pre-aggregated line: `query<TAB>count[<TAB>distinct_users]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CountLine<'a> {
    /// The query text, unnormalized.
    pub query: &'a str,
    /// How often the query was issued (0 is allowed; callers ignore such lines).
    pub count: u64,
    /// Number of distinct users, if the field is present and non-empty.
    pub distinct_users: Option<u64>,
}

/// Why a line was skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, thiserror::Error)]
pub enum LineError {
    /// The line has no tab, so it has no field separator at all.
    #[error("no tab separator")]
    NoTab,
    /// The timestamp field is in no accepted format, out of range, or before 1970.
    #[error("unparseable or out-of-range timestamp")]
    BadTimestamp,
    /// The query or user field is not valid UTF-8.
    #[error("invalid UTF-8")]
    InvalidUtf8,
    /// A count field is not a decimal `u64`.
    #[error("invalid count")]
    BadCount,
}

impl LineError {
    /// Every variant, in declaration order, for building per-reason summaries.
    pub const ALL: [LineError; 4] =
        [LineError::NoTab, LineError::BadTimestamp, LineError::InvalidUtf8, LineError::BadCount];

    /// Stable snake_case name, used as a key in summaries and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            LineError::NoTab => "no_tab",
            LineError::BadTimestamp => "bad_timestamp",
            LineError::InvalidUtf8 => "invalid_utf8",
            LineError::BadCount => "bad_count",
        }
    }
}

const SECS_PER_HOUR: i64 = 3600;
const SECS_PER_DAY: i64 = 86_400;

/// Parses `timestamp<TAB>query[<TAB>user]` (trailing `\n` already removed by the caller).
///
/// The user is the third field, ASCII spaces trimmed; an empty (or all-space) user is `None`.
/// Fields after it are ignored: the AOL release has click columns there, which once made
/// "u1" and "u1<TAB>3<TAB>http://..." two users. The timestamp is checked before UTF-8
/// validation because it is the cheaper check and the more common fault.
pub fn parse_log_line(line: &[u8]) -> Result<LogLine<'_>, LineError> {
    let line = strip_cr(line);
    let (timestamp, rest) = split_tab(line).ok_or(LineError::NoTab)?;
    let hour = parse_timestamp_bytes(timestamp).and_then(hour_of).ok_or(LineError::BadTimestamp)?;
    let (query, user) = match split_tab(rest) {
        Some((query, rest)) => (query, split_tab(rest).map_or(rest, |(user, _)| user)),
        None => (rest, &[][..]),
    };
    let user = non_empty(trim_spaces(user)).map(utf8).transpose()?;
    Ok(LogLine { hour, query: utf8(query)?, user })
}

/// Parses `query<TAB>count[<TAB>distinct_users]` (trailing `\n` already removed by the caller).
///
/// Numbers may be surrounded by ASCII spaces; an empty (or all-space) distinct-users field
/// is `None`.
pub fn parse_count_line(line: &[u8]) -> Result<CountLine<'_>, LineError> {
    let line = strip_cr(line);
    let (query, rest) = split_tab(line).ok_or(LineError::NoTab)?;
    let (count, users) = match split_tab(rest) {
        Some((count, users)) => (count, users),
        None => (rest, &[][..]),
    };
    let count = parse_u64(trim_spaces(count)).ok_or(LineError::BadCount)?;
    let distinct_users = non_empty(trim_spaces(users))
        .map(|u| parse_u64(u).ok_or(LineError::BadCount))
        .transpose()?;
    Ok(CountLine { query: utf8(query)?, count, distinct_users })
}

/// Parses a timestamp into Unix seconds (UTC); surrounding ASCII spaces are ignored.
///
/// Accepted: non-negative Unix seconds with optional fraction (`1700000000.25`),
/// `YYYY-MM-DD HH:MM:SS[.frac]` (UTC), and RFC 3339 `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`
/// (`T` may be lowercase or a space). Fractions are floored away; leap second 60 counts as 59.
pub fn parse_timestamp(s: &str) -> Option<i64> {
    parse_timestamp_bytes(s.as_bytes())
}

/// The hour bucket of a Unix time: `None` before 1970 or past the `u32` hour range.
pub fn hour_of(unix_seconds: i64) -> Option<Hour> {
    if unix_seconds < 0 {
        return None;
    }
    Hour::try_from(unix_seconds / SECS_PER_HOUR).ok()
}

/// Parses an hour for a `--hour` CLI flag, truncating to the hour.
///
/// Accepts everything [`parse_timestamp`] does, plus the short forms `YYYY-MM-DD HH` and
/// `YYYY-MM-DDTHH` (UTC), since a whole hour is what the user means.
pub fn parse_hour(s: &str) -> Option<Hour> {
    let bytes = trim_spaces(s.as_bytes());
    match parse_timestamp_bytes(bytes) {
        Some(secs) => hour_of(secs),
        None => parse_short_hour(bytes),
    }
}

/// Formats a Unix time as `YYYY-MM-DD HH:MM:SS` (UTC), the plain form [`parse_timestamp`] reads.
///
/// Years outside `0..=9999` are written as `{year:04}` would (a sign or more digits); such
/// text does not parse back.
pub fn format_timestamp(unix_seconds: i64) -> String {
    let mut out = Vec::with_capacity(19);
    push_timestamp(&mut out, unix_seconds);
    String::from_utf8(out).expect("timestamps are ASCII")
}

/// Appends [`format_timestamp`]'s text to `out` without allocating (for writers of many lines).
pub fn push_timestamp(out: &mut Vec<u8>, unix_seconds: i64) {
    let (year, month, day) = civil_from_days(unix_seconds.div_euclid(SECS_PER_DAY));
    let secs_of_day = unix_seconds.rem_euclid(SECS_PER_DAY);
    push_year(out, year);
    out.push(b'-');
    push_two_digits(out, month);
    out.push(b'-');
    push_two_digits(out, day);
    out.push(b' ');
    push_two_digits(out, secs_of_day / 3600);
    out.push(b':');
    push_two_digits(out, secs_of_day / 60 % 60);
    out.push(b':');
    push_two_digits(out, secs_of_day % 60);
}

use typeahead_core::clock::now_unix;

/// The hour bucket of the current time.
pub fn current_hour() -> Hour {
    hour_of(now_unix()).unwrap_or(Hour::MAX)
}

/// Formats an hour bucket as RFC 3339: `YYYY-MM-DDTHH:00:00Z`.
pub fn format_hour(h: Hour) -> String {
    let (year, month, day) = civil_from_days(i64::from(h / 24));
    let hour = h % 24;
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:00:00Z")
}

// ---------------------------------------------------------------------------------------------
// Field splitting

fn strip_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Splits at the first tab, excluding the tab itself.
fn split_tab(s: &[u8]) -> Option<(&[u8], &[u8])> {
    let tab = s.iter().position(|&b| b == b'\t')?;
    Some((&s[..tab], &s[tab + 1..]))
}

fn trim_spaces(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|&b| b != b' ').unwrap_or(s.len());
    let end = s.iter().rposition(|&b| b != b' ').map_or(start, |i| i + 1);
    &s[start..end]
}

fn non_empty(s: &[u8]) -> Option<&[u8]> {
    (!s.is_empty()).then_some(s)
}

fn utf8(s: &[u8]) -> Result<&str, LineError> {
    std::str::from_utf8(s).map_err(|_| LineError::InvalidUtf8)
}

/// Decimal `u64`; unlike `str::parse` it rejects a leading `+` and needs no UTF-8 check.
fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    s.iter().try_fold(0u64, |acc, &b| {
        let digit = ascii_digit(b)?;
        acc.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

fn ascii_digit(b: u8) -> Option<u8> {
    b.is_ascii_digit().then(|| b - b'0')
}

/// Appends `v` (`0..100`) as two ASCII digits.
fn push_two_digits(out: &mut Vec<u8>, v: i64) {
    debug_assert!((0..100).contains(&v), "{v} is not two digits");
    out.extend_from_slice(&[b'0' + (v / 10) as u8, b'0' + (v % 10) as u8]);
}

/// Appends a year as `{year:04}` would, with a fast path for the four-digit years.
fn push_year(out: &mut Vec<u8>, year: i64) {
    if (0..10_000).contains(&year) {
        push_two_digits(out, year / 100);
        push_two_digits(out, year % 100);
    } else {
        use std::io::Write as _;
        write!(out, "{year:04}").expect("writing to a Vec cannot fail");
    }
}

/// Value of a short all-digit field (2 or 4 digits here); `None` if any byte is not a digit.
fn fixed_digits(s: &[u8]) -> Option<u32> {
    s.iter().try_fold(0u32, |acc, &b| Some(acc * 10 + u32::from(ascii_digit(b)?)))
}

// ---------------------------------------------------------------------------------------------
// Timestamps

fn parse_timestamp_bytes(s: &[u8]) -> Option<i64> {
    let s = trim_spaces(s);
    // A dash at index 4 can only be a date; Unix seconds are digits and at most one dot.
    let t = if s.get(4) == Some(&b'-') { parse_datetime(s) } else { parse_unix(s) }?;
    // Past year 9999 no format can print the time back (found by fuzzing `fuzz/checks.rs`).
    (t <= MAX_TIMESTAMP).then_some(t)
}

/// 9999-12-31 23:59:59 UTC: the last second the `YYYY-MM-DD` formats can express.
const MAX_TIMESTAMP: i64 = 253_402_300_799;

/// `digits[.digits]`, floored to whole seconds.
fn parse_unix(s: &[u8]) -> Option<i64> {
    let (int, frac) = match s.iter().position(|&b| b == b'.') {
        Some(dot) => (&s[..dot], Some(&s[dot + 1..])),
        None => (s, None),
    };
    let frac_ok = frac.is_none_or(|f| !f.is_empty() && f.iter().all(u8::is_ascii_digit));
    if !frac_ok {
        return None;
    }
    i64::try_from(parse_u64(int)?).ok()
}

/// `YYYY-MM-DD<sep>HH:MM:SS[.frac][zone]`; a zone is required unless `sep` is a space.
fn parse_datetime(s: &[u8]) -> Option<i64> {
    let (date, rest) = s.split_at_checked(10)?;
    let days = parse_date(date)?;
    let (&sep, rest) = rest.split_first()?;
    let (secs_of_day, rest) = parse_time(rest)?;
    let zone = skip_fraction(rest)?;
    let offset = match (sep, zone) {
        (b' ', []) => 0,
        (b' ' | b'T' | b't', zone) => parse_zone(zone)?,
        _ => return None,
    };
    Some(days * SECS_PER_DAY + secs_of_day - offset)
}

/// `YYYY-MM-DD` (exactly 10 bytes) to days since 1970-01-01, validating month and day.
fn parse_date(s: &[u8]) -> Option<i64> {
    let [y0, y1, y2, y3, b'-', m0, m1, b'-', d0, d1] = *s else {
        return None;
    };
    let year = i64::from(fixed_digits(&[y0, y1, y2, y3])?);
    let month = fixed_digits(&[m0, m1])?;
    let day = fixed_digits(&[d0, d1])?;
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    Some(days_from_civil(year, month, day))
}

/// `HH:MM:SS` prefix to seconds of the day, plus the unparsed remainder.
fn parse_time(s: &[u8]) -> Option<(i64, &[u8])> {
    let (time, rest) = s.split_at_checked(8)?;
    let [h0, h1, b':', m0, m1, b':', s0, s1] = *time else {
        return None;
    };
    let hour = fixed_digits(&[h0, h1])?;
    let minute = fixed_digits(&[m0, m1])?;
    let second = fixed_digits(&[s0, s1])?;
    if hour >= 24 || minute >= 60 || second > 60 {
        return None;
    }
    // A leap second is reported as the last ordinary second of its minute, keeping it in
    // the same hour bucket instead of spilling into the next minute (or hour).
    let second = second.min(59);
    Some((i64::from(hour * 3600 + minute * 60 + second), rest))
}

/// Skips an optional `.digits` fraction (at least one digit), returning what follows.
fn skip_fraction(s: &[u8]) -> Option<&[u8]> {
    let Some(frac) = s.strip_prefix(b".") else {
        return Some(s);
    };
    let digits = frac.iter().take_while(|b| b.is_ascii_digit()).count();
    (digits > 0).then(|| &frac[digits..])
}

/// `Z`, `z` or `±HH:MM` to the offset from UTC in seconds (local = UTC + offset).
fn parse_zone(s: &[u8]) -> Option<i64> {
    match *s {
        [b'Z' | b'z'] => Some(0),
        [sign @ (b'+' | b'-'), h0, h1, b':', m0, m1] => {
            let hours = fixed_digits(&[h0, h1])?;
            let minutes = fixed_digits(&[m0, m1])?;
            if hours >= 24 || minutes >= 60 {
                return None;
            }
            let offset = i64::from(hours * 3600 + minutes * 60);
            Some(if sign == b'-' { -offset } else { offset })
        }
        _ => None,
    }
}

/// `YYYY-MM-DD HH` or `YYYY-MM-DDTHH` to an hour bucket.
fn parse_short_hour(s: &[u8]) -> Option<Hour> {
    let (date, rest) = s.split_at_checked(10)?;
    let days = parse_date(date)?;
    let [b' ' | b'T' | b't', h0, h1] = *rest else {
        return None;
    };
    let hour = fixed_digits(&[h0, h1])?;
    if hour >= 24 {
        return None;
    }
    hour_of((days * 24 + i64::from(hour)) * SECS_PER_HOUR)
}

fn is_leap_year(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if is_leap_year(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
///
/// Shifting the year to start in March puts the leap day last, so day-of-year is a simple
/// linear formula of the month.
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let march_month = i64::from((month + 9) % 12);
    let day_of_year = (153 * march_month + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// Inverse of [`days_from_civil`]: (year, month, day) of a day count since 1970-01-01.
pub(crate) fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let march_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * march_month + 2) / 5 + 1;
    let month = if march_month < 10 { march_month + 3 } else { march_month - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Seconds since the epoch by counting whole years and months: slow but obviously right.
    fn reference_secs(y: i64, m: u32, d: u32, h: u32, mi: u32, s: u32) -> i64 {
        let mut days: i64 = (1970..y).map(|yy| if is_leap_year(yy) { 366 } else { 365 }).sum();
        days += (1..m).map(|mm| i64::from(days_in_month(y, mm))).sum::<i64>();
        days += i64::from(d) - 1;
        days * 86_400 + i64::from(h * 3600 + mi * 60 + s)
    }

    fn hour_at(date_time: &str) -> Hour {
        parse_hour(date_time).unwrap()
    }

    /// `scripts/oracle_check.py --self-test` checks its own reader against this table: the
    /// line times both accept (a time before 1970 is a line skipped, as `hour_of` does).
    #[test]
    fn the_oracle_reads_line_times_as_the_builder_does() {
        let cases: &[(&str, Option<i64>)] = &[
            ("1700000000", Some(1_700_000_000)),
            (" 1700000000.25 ", Some(1_700_000_000)),
            ("2023-11-14 22:13:20", Some(1_700_000_000)),
            ("2023-11-14T22:13:20Z", Some(1_700_000_000)),
            ("2023-11-14t22:13:20.5+01:00", Some(1_699_996_400)),
            ("2023-11-14 22:13:60", Some(1_700_000_039)),
            ("1969-12-31 23:30:00-01:00", Some(1800)),
            ("9999-12-31 23:59:59", Some(253_402_300_799)),
            ("2023-11-14T22:13:20", None),
            ("2006-5-1 1:2:3", None),
            ("\u{661}\u{662}\u{663}", None),
            ("\u{b2}", None),
            ("2023-02-29 00:00:00", None),
            ("1.", None),
            (".5", None),
            ("0000-01-01 00:00:00", None),
            ("2023-11-14 24:00:00", None),
            ("2023-11-14 22:13:20+24:00", None),
            ("99999999999999999999", None),
            ("9999999999999999999999999", None),
        ];
        for &(text, want) in cases {
            let got = parse_timestamp(text).filter(|&t| hour_of(t).is_some());
            assert_eq!(got, want, "{text:?}");
        }
    }

    #[test]
    fn timestamp_formats() {
        let cases: &[(&str, i64)] = &[
            ("0", 0),
            ("1700000000", 1_700_000_000),
            ("1700000000.999", 1_700_000_000),
            ("  1700000000  ", 1_700_000_000),
            ("1970-01-01 00:00:00", 0),
            ("2023-11-14 22:13:20", 1_700_000_000),
            ("2023-11-14 22:13:20.123", 1_700_000_000),
            (" 2023-11-14 22:13:20 ", 1_700_000_000),
            ("2023-11-14T22:13:20Z", 1_700_000_000),
            ("2023-11-14t22:13:20z", 1_700_000_000),
            ("2023-11-14T22:13:20.5Z", 1_700_000_000),
            ("2023-11-14 22:13:20Z", 1_700_000_000),
            ("2023-11-14T23:13:20+01:00", 1_700_000_000),
            ("2023-11-14T21:13:20-01:00", 1_700_000_000),
            ("2023-11-14 22:13:20-00:00", 1_700_000_000),
            ("2023-11-14T22:13:20.999999999+00:00", 1_700_000_000),
            ("2016-12-31T23:59:60Z", 1_483_228_799),
            ("2016-12-31 23:59:59", 1_483_228_799),
            // Before the epoch parses; only `hour_of` rejects it.
            ("1969-12-31T23:59:59Z", -1),
        ];
        for &(input, want) in cases {
            assert_eq!(parse_timestamp(input), Some(want), "{input:?}");
        }
    }

    #[test]
    fn timestamp_rejects() {
        let cases = [
            "",
            "   ",
            "-1",
            "+5",
            "12a",
            "1.",
            ".5",
            "1.2.3",
            "99999999999999999999",
            "11474321197432", // year 365576: found by fuzzing; nothing could print it back
            "253402300800",
            "9999-12-31 23:59:59-01:00",
            "2023-11-14",
            "2023-11-14T22:13:20", // RFC 3339 needs a zone
            "2023-11-14X22:13:20Z",
            "2023-11-14 22:13",
            "2023-11-14 22:13:2",
            "2023-11-14 22:13:20.",
            "2023-11-14 22:13:20.Z",
            "2023-13-01 00:00:00",
            "2023-00-01 00:00:00",
            "2023-01-00 00:00:00",
            "2023-01-32 00:00:00",
            "2023-04-31 00:00:00",
            "2023-02-29 00:00:00",
            "1900-02-29 00:00:00",
            "2023-01-01 24:00:00",
            "2023-01-01 00:60:00",
            "2023-01-01 00:00:61",
            "2023-01-01T00:00:00+24:00",
            "2023-01-01T00:00:00+01:60",
            "2023-01-01T00:00:00+0100",
            "2023-01-01T00:00:00+01",
            "2023-01-01T00:00:00ZZ",
            "2023-01-01T00:00:00 Z",
            "2023/01/01 00:00:00",
            "20a3-01-01 00:00:00",
            "2023-01-01 00:00:00\u{e9}",
        ];
        for input in cases {
            assert_eq!(parse_timestamp(input), None, "{input:?}");
        }
    }

    #[test]
    fn leap_years() {
        for (date, ok) in [
            ("2000-02-29 00:00:00", true),
            ("2004-02-29 00:00:00", true),
            ("2024-02-29 00:00:00", true),
            ("1900-02-29 00:00:00", false),
            ("2100-02-29 00:00:00", false),
            ("2023-02-29 00:00:00", false),
        ] {
            assert_eq!(parse_timestamp(date).is_some(), ok, "{date}");
        }
        assert_eq!(
            parse_timestamp("2024-03-01 00:00:00"),
            parse_timestamp("2024-02-29 00:00:00").map(|t| t + 86_400)
        );
        assert_eq!(
            parse_timestamp("2000-03-01 00:00:00"),
            Some(reference_secs(2000, 3, 1, 0, 0, 0))
        );
    }

    #[test]
    fn offsets_shift_into_utc_hours() {
        assert_eq!(parse_hour("2006-03-01T05:30:00+05:30"), parse_hour("2006-03-01 00:00:00"));
        assert_eq!(parse_hour("2006-02-28T19:00:00-05:00"), parse_hour("2006-03-01T00:00:00Z"));
        // +05:45 lands mid-hour in UTC: floor to the containing hour.
        assert_eq!(
            parse_timestamp("2006-03-01T06:00:00+05:45"),
            parse_timestamp("2006-03-01T00:15:00Z")
        );
    }

    #[test]
    fn hour_of_bounds() {
        assert_eq!(hour_of(0), Some(0));
        assert_eq!(hour_of(3599), Some(0));
        assert_eq!(hour_of(3600), Some(1));
        assert_eq!(hour_of(-1), None);
        assert_eq!(hour_of(i64::from(u32::MAX) * 3600 + 3599), Some(u32::MAX));
        assert_eq!(hour_of((i64::from(u32::MAX) + 1) * 3600), None);
        assert_eq!(hour_of(i64::MAX), None);
    }

    #[test]
    fn parse_hour_forms() {
        let want = hour_at("2024-05-06T07:00:00Z");
        for input in [
            "2024-05-06 07",
            "2024-05-06T07",
            "2024-05-06t07",
            " 2024-05-06T07 ",
            "2024-05-06 07:59:59",
            "2024-05-06T07:30:00Z",
            "2024-05-06T09:30:00+02:00",
        ] {
            assert_eq!(parse_hour(input), Some(want), "{input:?}");
        }
        let secs = i64::from(want) * 3600 + 1234;
        assert_eq!(parse_hour(&secs.to_string()), Some(want));
        for bad in [
            "2024-05-06",
            "2024-05-06 7",
            "2024-05-06 24",
            "2024-05-06X07",
            "2024-02-30 07",
            "1969-12-31 23",
            "",
        ] {
            assert_eq!(parse_hour(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn format_hour_examples() {
        assert_eq!(format_hour(0), "1970-01-01T00:00:00Z");
        assert_eq!(hour_at("2024-02-29T23"), 474_791);
        assert_eq!(format_hour(474_791), "2024-02-29T23:00:00Z");
        assert_eq!(format_hour(472_222), "2023-11-14T22:00:00Z");
        // Far end of the range still formats (a five-digit year).
        assert!(format_hour(u32::MAX).starts_with("491"));
    }

    #[test]
    fn format_timestamp_examples() {
        let cases: &[(i64, &str)] = &[
            (0, "1970-01-01 00:00:00"),
            (1_700_000_000, "2023-11-14 22:13:20"),
            (1_767_571_200, "2026-01-05 00:00:00"),
            (951_868_799, "2000-02-29 23:59:59"),
            (951_868_800, "2000-03-01 00:00:00"),
            (-1, "1969-12-31 23:59:59"),
            (4_107_542_399, "2100-02-28 23:59:59"),
            (4_107_542_400, "2100-03-01 00:00:00"),
            (253_402_300_799, "9999-12-31 23:59:59"),
            (-62_167_219_200, "0000-01-01 00:00:00"),
            // Outside four-digit years: `{year:04}`, as `format_hour` writes.
            (253_402_300_800, "10000-01-01 00:00:00"),
            (-62_167_219_201, "-001-12-31 23:59:59"),
        ];
        for &(secs, want) in cases {
            assert_eq!(format_timestamp(secs), want, "{secs}");
        }
        // The buffer form appends.
        let mut out = b"x\t".to_vec();
        push_timestamp(&mut out, 1_700_000_000);
        assert_eq!(out, b"x\t2023-11-14 22:13:20");
        // Any i64 formats without overflow.
        assert!(format_timestamp(i64::MAX).ends_with(" 15:30:07"));
        assert!(format_timestamp(i64::MIN).starts_with('-'));
    }

    #[test]
    fn format_timestamp_leap_days() {
        for year in (1972..2100).step_by(4) {
            let text = format!("{year}-02-29 12:34:56");
            let secs = parse_timestamp(&text).unwrap();
            assert_eq!(format_timestamp(secs), text);
            assert_eq!(format_timestamp(secs + 86_400), format!("{year}-03-01 12:34:56"));
        }
        // Century years: 2000 is a leap year, 1900 and 2100 are not.
        let feb28 = |year: i64| parse_timestamp(&format!("{year}-02-28 00:00:00")).unwrap();
        assert_eq!(format_timestamp(feb28(2000) + 86_400), "2000-02-29 00:00:00");
        assert_eq!(format_timestamp(feb28(2100) + 86_400), "2100-03-01 00:00:00");
        assert_eq!(format_timestamp(feb28(1900) + 86_400), "1900-03-01 00:00:00");
    }

    #[test]
    fn log_line_fields() {
        let hour = hour_at("2023-11-14T22");
        let cases: &[(&[u8], LogLine<'_>)] = &[
            (b"1700000000\tfoo bar\tu1", LogLine { hour, query: "foo bar", user: Some("u1") }),
            (b"1700000000\tfoo", LogLine { hour, query: "foo", user: None }),
            (b"1700000000\tfoo\t", LogLine { hour, query: "foo", user: None }),
            (b"1700000000\tfoo\r", LogLine { hour, query: "foo", user: None }),
            (b"1700000000\tfoo\tu1\r", LogLine { hour, query: "foo", user: Some("u1") }),
            (b"1700000000\t\t", LogLine { hour, query: "", user: None }),
            // Columns after the user (the AOL release's clicks) are not part of it, and
            // spaces around it are not either.
            (b"1700000000\tfoo\tu\t2", LogLine { hour, query: "foo", user: Some("u") }),
            (b"1700000000\tfoo\tu1\t3\thttp://x", LogLine { hour, query: "foo", user: Some("u1") }),
            (b"1700000000\tfoo\t u1 \t", LogLine { hour, query: "foo", user: Some("u1") }),
            (b"1700000000\tfoo\t  \tu2", LogLine { hour, query: "foo", user: None }),
            // The query is not trimmed or normalized here.
            (b" 1700000000 \t  Foo  \t", LogLine { hour, query: "  Foo  ", user: None }),
            (
                "2023-11-14T22:13:20Z\tcaf\u{e9} \u{1f600}\t\u{7528}\u{6237}".as_bytes(),
                LogLine { hour, query: "caf\u{e9} \u{1f600}", user: Some("\u{7528}\u{6237}") },
            ),
            (b"2023-11-14 22:13:20.5\tq\tu", LogLine { hour, query: "q", user: Some("u") }),
        ];
        for &(input, want) in cases {
            assert_eq!(parse_log_line(input), Ok(want), "{:?}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn log_line_errors() {
        let cases: &[(&[u8], LineError)] = &[
            (b"", LineError::NoTab),
            (b"1700000000 foo", LineError::NoTab),
            (b"\r", LineError::NoTab),
            (b"\tfoo", LineError::BadTimestamp),
            (b"yesterday\tfoo", LineError::BadTimestamp),
            (b"1969-12-31 23:59:59\tfoo", LineError::BadTimestamp),
            (b"99999999999999999\tfoo", LineError::BadTimestamp),
            (b"1700000000\tfo\xffo", LineError::InvalidUtf8),
            (b"1700000000\tfoo\t\xc3", LineError::InvalidUtf8),
            (b"17\xff\tfoo", LineError::BadTimestamp),
        ];
        for &(input, want) in cases {
            assert_eq!(parse_log_line(input), Err(want), "{:?}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn count_line_fields() {
        let cases: &[(&[u8], CountLine<'_>)] = &[
            (b"foo\t12", CountLine { query: "foo", count: 12, distinct_users: None }),
            (b"foo\t12\r", CountLine { query: "foo", count: 12, distinct_users: None }),
            (b"foo\t 12 \t 3 ", CountLine { query: "foo", count: 12, distinct_users: Some(3) }),
            (b"foo\t12\t", CountLine { query: "foo", count: 12, distinct_users: None }),
            (b"foo\t12\t  ", CountLine { query: "foo", count: 12, distinct_users: None }),
            (b"foo\t0", CountLine { query: "foo", count: 0, distinct_users: None }),
            (
                b"foo\t18446744073709551615\t7\r",
                CountLine { query: "foo", count: u64::MAX, distinct_users: Some(7) },
            ),
            (
                " \u{fc}ber \t5".as_bytes(),
                CountLine { query: " \u{fc}ber ", count: 5, distinct_users: None },
            ),
        ];
        for &(input, want) in cases {
            assert_eq!(parse_count_line(input), Ok(want), "{:?}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn count_line_errors() {
        let cases: &[(&[u8], LineError)] = &[
            (b"foo", LineError::NoTab),
            (b"foo\t", LineError::BadCount),
            (b"foo\t  ", LineError::BadCount),
            (b"foo\t-1", LineError::BadCount),
            (b"foo\t+1", LineError::BadCount),
            (b"foo\t1.5", LineError::BadCount),
            (b"foo\t18446744073709551616", LineError::BadCount),
            (b"foo\t1 2", LineError::BadCount),
            (b"foo\t1\tx", LineError::BadCount),
            (b"foo\t1\t2\t3", LineError::BadCount),
            (b"fo\xffo\t1", LineError::InvalidUtf8),
        ];
        for &(input, want) in cases {
            assert_eq!(parse_count_line(input), Err(want), "{:?}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn error_names_are_stable_and_distinct() {
        let names: Vec<_> = LineError::ALL.iter().map(|e| e.as_str()).collect();
        assert_eq!(names, ["no_tab", "bad_timestamp", "invalid_utf8", "bad_count"]);
        assert_eq!(LineError::NoTab.to_string(), "no tab separator");
        for e in LineError::ALL {
            assert!(!e.to_string().is_empty());
        }
    }

    proptest! {
        #[test]
        fn formats_agree_with_reference(
            y in 1970i64..2100,
            m in 1u32..=12,
            d in 1u32..=31,
            h in 0u32..24,
            mi in 0u32..60,
            s in 0u32..60,
            frac in proptest::option::of("[0-9]{1,9}"),
        ) {
            let d = d.min(days_in_month(y, m));
            let want = reference_secs(y, m, d, h, mi, s);
            let frac = frac.map_or(String::new(), |f| format!(".{f}"));
            let plain = format!("{y:04}-{m:02}-{d:02} {h:02}:{mi:02}:{s:02}{frac}");
            let rfc = format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}{frac}Z");
            let unix = format!("{want}{frac}");
            prop_assert_eq!(format_timestamp(want), &plain[..19]);
            prop_assert_eq!(parse_timestamp(&plain), Some(want));
            prop_assert_eq!(parse_timestamp(&rfc), Some(want));
            prop_assert_eq!(parse_timestamp(&unix), Some(want));
            let hour = hour_of(want).unwrap();
            prop_assert_eq!(parse_hour(&format!("{y:04}-{m:02}-{d:02}T{h:02}")), Some(hour));
            let line = format!("{rfc}\tq");
            prop_assert_eq!(parse_log_line(line.as_bytes()).map(|l| l.hour), Ok(hour));
        }

        #[test]
        fn offsets_agree_with_utc(
            secs in 86_400i64..4_000_000_000,
            off_h in 0u32..24,
            off_m in 0u32..60,
            negative in any::<bool>(),
        ) {
            let offset = i64::from(off_h * 3600 + off_m * 60) * if negative { -1 } else { 1 };
            let local = secs + offset;
            prop_assume!(local >= 0);
            let (y, mo, d) = civil_from_days(local.div_euclid(86_400));
            let tod = local.rem_euclid(86_400);
            let (h, mi, s) = (tod / 3600, tod / 60 % 60, tod % 60);
            let sign = if negative { '-' } else { '+' };
            let text = format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}{sign}{off_h:02}:{off_m:02}");
            prop_assert_eq!(parse_timestamp(&text), Some(secs));
        }

        #[test]
        fn format_and_parse_timestamp_round_trip(secs in 0i64..4_102_444_800) {
            // 1970-01-01 up to (not including) 2100-01-01.
            let text = format_timestamp(secs);
            prop_assert_eq!(text.len(), 19);
            prop_assert_eq!(parse_timestamp(&text), Some(secs));
            prop_assert_eq!(parse_hour(&text), hour_of(secs));
        }

        #[test]
        fn format_and_parse_hour_round_trip(h in 0u32..70_000_000) {
            // 70M hours is about year 9955, within four-digit years.
            prop_assert_eq!(parse_hour(&format_hour(h)), Some(h));
        }

        #[test]
        fn civil_round_trip(days in -800_000i64..3_000_000) {
            let (y, m, d) = civil_from_days(days);
            let m = u32::try_from(m).unwrap();
            let d = u32::try_from(d).unwrap();
            prop_assert!(d >= 1 && d <= days_in_month(y, m));
            prop_assert_eq!(days_from_civil(y, m, d), days);
        }

        #[test]
        fn never_panics_on_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = parse_log_line(&bytes);
            let _ = parse_count_line(&bytes);
        }

        #[test]
        fn never_panics_on_timestamp_like_text(s in "[0-9 :.Tt+Zz-]{0,40}") {
            let _ = parse_timestamp(&s);
            let _ = parse_hour(&s);
            let line = format!("{s}\tq\tu");
            let _ = parse_log_line(line.as_bytes());
        }

        #[test]
        fn never_panics_on_strings(s in ".{0,40}") {
            let _ = parse_timestamp(&s);
            let _ = parse_hour(&s);
        }
    }
}
