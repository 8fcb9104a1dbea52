//! The wall clock, in the unit the data uses (unix seconds; milliseconds where ages are short). One function, so that the
//! builder's hours and the servers' ages come from the same place.

/// The current time, unix seconds (0 if the clock is before 1970).
pub fn now_unix() -> i64 {
    now_unix_ms() / 1000
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn now_unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
