//! In-memory replicas for the aggregator's tests: a [`Transport`] whose replicas answer
//! `/v1/suggest` and `/readyz` after a set delay on tokio's clock (paused in tests), or fail.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::body::Bytes;
use tokio::time::Instant;

use super::backends::Transport;
use crate::api::{Readiness, SuggestResponse, Suggestion};

/// What a replica does with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// Answers 200 after this long.
    Answers(Duration),
    /// Fails (connection refused) after this long.
    Fails(Duration),
    /// Answers `/readyz` after this long, fails every `/v1/suggest` (a replica whose process
    /// is up but whose answers are broken).
    FailsAnswers(Duration),
    /// Answers `/readyz` after this long, and every `/v1/suggest` with 503 (shedding load).
    Busy(Duration),
}

/// One replica: how it answers, and the snapshot and blocklist versions its `/readyz` reports.
#[derive(Debug, Clone)]
pub struct Replica {
    pub behaviour: Behaviour,
    pub versions: Vec<String>,
    /// The blocklist version its `/readyz` reports; empty: none (a release without the field).
    pub blocklist: String,
    /// Its `/readyz` answers 200 with a body that is no readiness report.
    pub garbled_readyz: bool,
    /// The version every answer carries whatever `version=` asked (a replica behind
    /// something that drops the parameter); `None`: as a server, the version asked if held
    /// (409 if not), the first one when none is asked.
    pub answers_from: Option<String>,
    /// The `max_k` its `/readyz` reports for its current and previous versions.
    pub max_k: [usize; 2],
    /// The release its `/readyz` reports; empty: none (a release without the field).
    pub release: String,
}

#[derive(Debug, Default)]
pub struct World {
    pub replicas: HashMap<SocketAddr, Replica>,
    /// Every `/v1/suggest` request: when it was sent (since the fake was made) and to whom.
    pub calls: Vec<(Duration, SocketAddr)>,
}

/// The transport; clones share one world.
#[derive(Debug, Clone)]
pub struct Fake {
    pub world: Arc<Mutex<World>>,
    epoch: Instant,
}

/// The address of replica `i` (fake: nothing listens there).
pub fn addr(i: usize) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 7000 + i as u16))
}

/// The replica index of a fake address.
pub fn index(addr: SocketAddr) -> usize {
    usize::from(addr.port() - 7000)
}

impl Fake {
    /// Replicas `addr(0)..` behaving as given, each reporting `versions`.
    pub fn new(replicas: &[Behaviour], versions: &[&str]) -> Fake {
        let versions: Vec<String> = versions.iter().map(|v| (*v).to_owned()).collect();
        let replicas = replicas
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let replica = Replica {
                    behaviour: *b,
                    versions: versions.clone(),
                    blocklist: "b0".into(),
                    garbled_readyz: false,
                    answers_from: None,
                    max_k: [10, 10],
                    release: "r1".into(),
                };
                (addr(i), replica)
            })
            .collect();
        let world = World { replicas, calls: Vec::new() };
        Fake { world: Arc::new(Mutex::new(world)), epoch: Instant::now() }
    }

    /// Changes replica `i`.
    pub fn set(&self, i: usize, change: impl FnOnce(&mut Replica)) {
        let mut world = self.world.lock().unwrap();
        change(world.replicas.get_mut(&addr(i)).unwrap());
    }
}

impl Transport for Fake {
    type Error = std::io::Error;

    async fn get(
        &self,
        addr: SocketAddr,
        path: &str,
        _max_bytes: usize,
    ) -> Result<(u16, Bytes), std::io::Error> {
        let replica = {
            let mut world = self.world.lock().unwrap();
            if path.starts_with("/v1/suggest") {
                world.calls.push((self.epoch.elapsed(), addr));
            }
            world.replicas[&addr].clone()
        };
        let (after, fails) = match replica.behaviour {
            Behaviour::Answers(after) => (after, false),
            Behaviour::Fails(after) => (after, true),
            Behaviour::FailsAnswers(after) => (after, !path.starts_with("/readyz")),
            Behaviour::Busy(after) => (after, false),
        };
        tokio::time::sleep(after).await;
        if matches!(replica.behaviour, Behaviour::Busy(_)) && path.starts_with("/v1/suggest") {
            return Ok((503, Bytes::new()));
        }
        if fails {
            return Err(std::io::ErrorKind::ConnectionRefused.into());
        }
        let body = if path.starts_with("/readyz") && replica.garbled_readyz {
            "<html>502 Bad Gateway</html>".to_owned()
        } else if path.starts_with("/readyz") {
            let ready = Readiness {
                ready: true,
                version: replica.versions.first().cloned(),
                previous_version: replica.versions.get(1).cloned(),
                blocklist_version: Some(replica.blocklist.clone()).filter(|b| !b.is_empty()),
                max_k: replica.max_k[0],
                previous_max_k: replica.versions.get(1).map(|_| replica.max_k[1]),
                release: Some(replica.release.clone()).filter(|r| !r.is_empty()),
                ..Readiness::default()
            };
            serde_json::to_string(&ready).expect("serializes")
        } else {
            let asked = path.split(['?', '&']).find_map(|p| p.strip_prefix("version="));
            let version = match (&replica.answers_from, asked) {
                (Some(v), _) => v.clone(),
                (None, Some(v)) if replica.versions.iter().any(|held| held == v) => v.to_owned(),
                (None, Some(_)) => return Ok((409, Bytes::new())),
                (None, None) => replica.versions.first().cloned().unwrap_or_default(),
            };
            let answer = SuggestResponse {
                query: "a".into(),
                suggestions: vec![Suggestion {
                    text: addr.to_string(),
                    score: 1.0,
                    key: None,
                    tier: crate::matching::Match::Prefix,
                    typos: None,
                }],
                version,
                partial: false,
                complete: true,
                cut: None,
            };
            serde_json::to_string(&answer)?
        };
        Ok((200, Bytes::from(body)))
    }
}
