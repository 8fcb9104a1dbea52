//! The backends file of a fixed cluster: one line per partition, its index and its replicas'
//! addresses. (A discovered cluster finds its replicas by DNS instead: [`super::discovery`].)

use std::net::SocketAddr;

/// What is wrong with a backends file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendsFileError {
    /// A line does not start with a partition index.
    #[error("line {line}: expected a partition index")]
    NoIndex {
        /// 1-based line number.
        line: usize,
    },
    /// A field is not a socket address.
    #[error("line {line}: {field:?} is not an address like 127.0.0.1:7001")]
    BadAddress {
        /// 1-based line number.
        line: usize,
        /// The field as written.
        field: String,
    },
    /// A partition line names no replica.
    #[error("line {line}: partition {index} has no replica")]
    NoReplica {
        /// 1-based line number.
        line: usize,
        /// The partition.
        index: usize,
    },
    /// Partitions are missing, repeated or not numbered from 0.
    #[error("partitions must be listed once each, numbered from 0")]
    Numbering,
}

/// Parses a backends file: one line per partition, `INDEX ADDR [ADDR...]`; `#` comments.
pub fn parse_backends(text: &str) -> Result<Vec<Vec<SocketAddr>>, BackendsFileError> {
    let mut partitions: Vec<(usize, Vec<SocketAddr>)> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line_no = n + 1;
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut fields = line.split_whitespace();
        let index: usize = fields
            .next()
            .and_then(|f| f.parse().ok())
            .ok_or(BackendsFileError::NoIndex { line: line_no })?;
        let addrs = fields
            .map(|f| {
                f.parse().map_err(|_| BackendsFileError::BadAddress {
                    line: line_no,
                    field: f.to_owned(),
                })
            })
            .collect::<Result<Vec<SocketAddr>, _>>()?;
        if addrs.is_empty() {
            return Err(BackendsFileError::NoReplica { line: line_no, index });
        }
        partitions.push((index, addrs));
    }
    partitions.sort_by_key(|p| p.0);
    if partitions.iter().enumerate().any(|(i, p)| p.0 != i) {
        return Err(BackendsFileError::Numbering);
    }
    Ok(partitions.into_iter().map(|p| p.1).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_backend_files() {
        let text =
            "# partition replicas\n1 127.0.0.1:7003\n0 127.0.0.1:7001 127.0.0.1:7002  # two\n";
        let p = parse_backends(text).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].len(), 2);
        assert!(parse_backends("0 nowhere").is_err());
        assert!(parse_backends("1 127.0.0.1:1").is_err());
        assert!(parse_backends("0").is_err());
    }
}
