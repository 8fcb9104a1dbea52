//! The wall clock, in the unit the data uses (unix seconds). One function, so that the
//! builder's hours and the servers' ages come from the same place.

/// The current time, unix seconds (0 if the clock is before 1970).
pub fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}
