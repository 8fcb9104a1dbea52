//! Printing an error with its causes. Library errors keep their cause as `source()` rather
//! than formatting it into their own message (which would print it twice in a chain); a log
//! line, which prints one value, uses [`chain`] to show all of it.

/// An error with its causes, `outer: inner: root`.
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        out.push_str(": ");
        out.push_str(&e.to_string());
        source = e.source();
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn prints_every_cause_once() {
        let root = std::io::Error::other("disk on fire");
        let manifest = crate::manifest::Error::Io { path: "m.json".into(), source: root };
        assert_eq!(super::chain(&manifest), "cannot read manifest m.json: disk on fire");
    }
}
