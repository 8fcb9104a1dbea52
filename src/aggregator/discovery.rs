//! Where the aggregator finds its replicas: a backends file (`INDEX ADDR...` lines, fixed), or
//! `dns:NAME:PORT`, a name resolved every few seconds — in Kubernetes a headless Service, whose
//! records are the ready pods.
//!
//! A discovered replica says itself what it serves: each probe asks its `/readyz` for the
//! snapshot versions it has loaded and its key range, and [`partition_of`] groups it under the
//! partition of the active (or pending) generation whose file it has loaded, or else whose range
//! it serves. Scaling up, a rolling update or a lost node needs no restart: an address that
//! appears is probed and joins its partition; one that disappears leaves it, and requests go to
//! the replicas that remain (a request in flight on it still gets its hedge and retries).

use std::net::SocketAddr;
use std::time::Duration;

use super::backends::Range;
use crate::manifest::Manifest;

/// How often a `dns:` name is resolved again.
pub const RESOLVE_EVERY: Duration = Duration::from_secs(2);

/// Where the replicas come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Discovery {
    /// Replica addresses per partition, fixed (a backends file).
    Fixed(Vec<Vec<SocketAddr>>),
    /// Every address `name` resolves to, with `port`.
    Dns {
        /// The name (a headless Service: `typeahead-server.search.svc.cluster.local`).
        name: String,
        /// The replicas' port.
        port: u16,
    },
}

/// Why a `dns:` spec is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not dns:NAME:PORT")]
pub struct BadDnsSpec(pub String);

impl Discovery {
    /// `dns:NAME:PORT` as [`Discovery::Dns`]; `None` when `spec` does not start with `dns:`.
    pub fn parse_dns(spec: &str) -> Option<Result<Discovery, BadDnsSpec>> {
        let rest = spec.strip_prefix("dns:")?;
        let bad = || BadDnsSpec(spec.to_owned());
        let parsed = rest
            .rsplit_once(':')
            .filter(|(name, _)| !name.is_empty() && !name.contains(char::is_whitespace))
            .and_then(|(name, port)| Some((name, port.parse::<u16>().ok()?)))
            .map(|(name, port)| Discovery::Dns { name: name.to_owned(), port })
            .ok_or_else(bad);
        Some(parsed)
    }
}

/// Every address `name:port` resolves to now (the system resolver: `/etc/hosts`, DNS),
/// sorted and without repeats.
pub async fn resolve(name: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
    let mut addrs: Vec<SocketAddr> = tokio::net::lookup_host((name, port)).await?.collect();
    addrs.sort();
    addrs.dedup();
    Ok(addrs)
}

/// The partition a replica serves, by what it last reported (`versions`, `range`): the partition of the active or
/// pending generation whose file is a version it has loaded (current version first), else the
/// active partition whose range equals the range it serves; `None` when neither (not probed
/// yet, or still on a generation the aggregator does not know).
pub fn partition_of(
    versions: &[String],
    range: Option<Range>,
    active: &Manifest,
    pending: Option<&Manifest>,
) -> Option<usize> {
    for version in versions {
        for manifest in std::iter::once(active).chain(pending) {
            if let Some(p) = manifest.partitions.iter().find(|p| p.checksum == *version) {
                return Some(p.index);
            }
        }
    }
    let (start, end) = range?;
    active.partitions.iter().find(|p| p.start == start && p.end == end).map(|p| p.index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_specs_parse() {
        let d = Discovery::parse_dns("dns:typeahead-server.search.svc:8080").unwrap().unwrap();
        assert_eq!(d, Discovery::Dns { name: "typeahead-server.search.svc".into(), port: 8080 });
        assert!(Discovery::parse_dns("backends.txt").is_none());
        for bad in ["dns:", "dns:name", "dns::80", "dns:name:port", "dns:name:99999"] {
            assert!(Discovery::parse_dns(bad).unwrap().is_err(), "{bad}");
        }
    }

    fn manifest(generation: &str, bounds: &[&str], ids: &[&str]) -> Manifest {
        let mut starts = vec![""];
        starts.extend_from_slice(bounds);
        let partitions = ids
            .iter()
            .enumerate()
            .map(|(i, id)| crate::manifest::Partition {
                index: i,
                start: starts[i].to_owned(),
                end: starts.get(i + 1).map(|s| (*s).to_owned()),
                file: format!("part-{i:03}-{id}.snap"),
                bytes: 1,
                checksum: (*id).to_owned(),
                keys: 1,
            })
            .collect();
        Manifest {
            format: crate::manifest::MANIFEST_FORMAT,
            generation: generation.into(),
            created_unix: 0,
            watermark_hour: None,
            partitions,
            rules: None,
        }
    }

    #[test]
    fn a_replica_is_grouped_by_the_file_it_loaded_else_by_its_range() {
        let active = manifest("g1", &["m"], &["a0", "a1"]);
        let pending = manifest("g2", &["n"], &["b0", "b1"]);
        let v = |ids: &[&str]| ids.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let range = |s: &str, e: Option<&str>| Some((s.to_owned(), e.map(str::to_owned)));
        assert_eq!(partition_of(&v(&["a1"]), None, &active, None), Some(1));
        // Loaded the pending generation, the active one kept as its previous.
        assert_eq!(partition_of(&v(&["b0", "a0"]), None, &active, Some(&pending)), Some(0));
        assert_eq!(partition_of(&v(&["b1"]), None, &active, Some(&pending)), Some(1));
        // A generation the aggregator does not know: its range decides, if it is the active's.
        assert_eq!(partition_of(&v(&["zz"]), range("m", None), &active, None), Some(1));
        assert_eq!(partition_of(&v(&["zz"]), range("n", None), &active, None), None);
        assert_eq!(partition_of(&[], None, &active, None), None, "not probed yet");
    }

    #[tokio::test]
    async fn localhost_resolves() {
        let addrs = resolve("localhost", 8080).await.unwrap();
        assert!(addrs.iter().all(|a| a.port() == 8080 && a.ip().is_loopback()), "{addrs:?}");
    }
}
