//! The store against a model: random sequences of reloads (new, repeated and corrupt files),
//! blocklist changes and version-pinned lookups, checked after every step against what the
//! rules say should be served:
//!
//! - a reload of a new version makes it current and the old current the previous one, unless
//!   an aggregator pinned the previous one and none the old current (an aggregator that stays
//!   on an older generation: that one stays); a reload of the version already served, or of a
//!   corrupt file, changes nothing;
//! - `version(v)` finds exactly the current and the previous generation;
//! - every generation hides what the live blocklist blocks plus what the *newest* held build
//!   blocked (by build time: a rollback keeps the newer build's entries out while it is
//!   held), and answers exactly like a brute-force scan of its entries without those.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;

use super::{ActiveBlocklist, Store};
use crate::blocklist::Blocklist;
use crate::metrics::ServerMetrics as Metrics;
use crate::snapshot::{self, BuildInfo, Entry, Snapshot};

/// The snapshots a step may publish: overlapping keys, different scores, and a build-time
/// blocklist in the last one.
fn generation(i: usize) -> (Vec<Entry>, Vec<String>) {
    let words = ["cap", "capital", "captain", "car", "cart", "cat", "bad word", "bad cat", "dog"];
    let mut entries: Vec<Entry> = words
        .iter()
        .enumerate()
        .filter(|(w, _)| !(w + i).is_multiple_of(4))
        .map(|(w, key)| Entry {
            key: (*key).to_owned(),
            display: None,
            score: ((w * 7 + i * 3) % 10) as f64 + 1.0,
        })
        .collect();
    entries.sort_by(|a, b| a.key.cmp(&b.key));
    let build_blocked = if i == 2 { vec!["dog".to_owned()] } else { Vec::new() };
    (entries, build_blocked)
}

const BLOCKLISTS: [&str; 3] = ["", "bad word\n", "cat\ncapital\n"];
const PREFIXES: [&str; 5] = ["", "c", "ca", "cap", "b"];

#[derive(Debug, Clone)]
enum Step {
    /// Write generation `i` over the served path and reload.
    Publish(usize),
    /// Reload without changing the file (a `touch`, a repeated `/admin/reload`).
    Reload,
    /// Write a corrupt file over the served path and reload.
    Corrupt,
    /// Apply blocklist `j`.
    Blocklist(usize),
    /// An aggregator's probe naming generation `i` as the one it answers from.
    Pin(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0usize..3).prop_map(Step::Publish),
        1 => Just(Step::Reload),
        1 => Just(Step::Corrupt),
        2 => (0usize..3).prop_map(Step::Blocklist),
        2 => (0usize..3).prop_map(Step::Pin),
    ]
}

fn write_generation(path: &Path, i: usize) -> String {
    let (entries, blocklist) = generation(i);
    // Generation i was built i seconds in: a publication of a lower one is a rollback.
    let info = BuildInfo { blocklist, build_time_unix: i as i64, ..BuildInfo::default() };
    snapshot::write_file(path, &entries, &info).unwrap().id
}

/// What the rules say is served.
#[derive(Debug)]
struct Model {
    current: usize,
    previous: Option<usize>,
    blocklist: usize,
    /// Whether an aggregator pinned the current, the previous generation (since it was loaded).
    pinned: (bool, bool),
}

impl Model {
    /// Everything hidden from every generation: the live list plus the newest held build's
    /// (generation i was built at time i).
    fn hidden(&self) -> Blocklist {
        let mut text = BLOCKLISTS[self.blocklist].to_owned();
        let newest = self.current.max(self.previous.unwrap_or(0));
        for entry in generation(newest).1 {
            text.push_str(&entry);
            text.push('\n');
        }
        Blocklist::parse(&text).unwrap()
    }

    /// The brute-force answer of generation `i` for `prefix`.
    fn answer(&self, i: usize, prefix: &str) -> Vec<(String, f64)> {
        let hidden = self.hidden();
        let mut all: Vec<(String, f64)> = generation(i)
            .0
            .into_iter()
            .filter(|e| e.key.starts_with(prefix) && !hidden.blocks(&e.key))
            .map(|e| (e.key, e.score))
            .collect();
        all.sort_by(|a, b| crate::rank::cmp(a.1, a.0.as_bytes(), b.1, b.0.as_bytes()));
        all.truncate(3);
        all
    }
}

fn answer(served: &super::Served, prefix: &str) -> Vec<(String, f64)> {
    served.suggest(prefix, 3).into_iter().map(|s| (s.key, s.score)).collect()
}

fn check(store: &Store, model: &Model, ids: &[String; 3]) -> Result<(), TestCaseError> {
    let current = store.current();
    prop_assert_eq!(current.snapshot.id(), ids[model.current].as_str());
    let previous = store.previous();
    prop_assert_eq!(
        previous.as_ref().map(|p| p.snapshot.id()),
        model.previous.map(|p| ids[p].as_str())
    );
    for (i, id) in ids.iter().enumerate() {
        let held = i == model.current || Some(i) == model.previous;
        prop_assert_eq!(store.version(id).is_some(), held, "version {} ({})", i, id);
    }
    for prefix in PREFIXES {
        prop_assert_eq!(answer(&current, prefix), model.answer(model.current, prefix));
        if let (Some(p), Some(i)) = (&previous, model.previous) {
            prop_assert_eq!(answer(p, prefix), model.answer(i, prefix), "previous, {:?}", prefix);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn the_store_serves_what_the_model_says(steps in proptest::collection::vec(step(), 1..12)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("live.snap");
        // Each generation's id, from writing it once aside.
        let ids: [String; 3] =
            std::array::from_fn(|i| write_generation(&dir.path().join(format!("{i}.snap")), i));
        write_generation(&path, 0);
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let metrics = Arc::new(Metrics::default());
        let store = Store::open(&path, ActiveBlocklist::empty(), Duration::from_secs(30), metrics)
            .unwrap();
        let mut model = Model { current: 0, previous: None, blocklist: 0, pinned: (false, false) };
        check(&store, &model, &ids)?;
        for step in steps {
            match step {
                Step::Publish(i) => {
                    write_generation(&path, i);
                    prop_assert!(runtime.block_on(store.reload()).is_ok());
                    if i != model.current {
                        let (current, previous) = model.pinned;
                        let keep_previous =
                            previous && !current && model.previous.is_some_and(|p| p != i);
                        if !keep_previous {
                            model.previous = Some(model.current);
                            model.pinned.1 = current;
                        }
                        model.current = i;
                        model.pinned.0 = false;
                    }
                }
                Step::Reload => prop_assert!(runtime.block_on(store.reload()).is_ok()),
                Step::Corrupt => {
                    crate::atomic::write(&path, b"not a snapshot").unwrap();
                    prop_assert!(runtime.block_on(store.reload()).is_err());
                    // The next Reload step reads the corrupt file again: put a good one back
                    // the way an operator would, with the version being served.
                    write_generation(&path, model.current);
                }
                Step::Blocklist(j) => {
                    let list = Blocklist::parse(BLOCKLISTS[j]).unwrap();
                    let active = ActiveBlocklist::new(list, format!("list {j}"));
                    prop_assert!(runtime.block_on(store.set_blocklist(active)).is_ok());
                    model.blocklist = j;
                }
                Step::Pin(i) => {
                    prop_assert_eq!(store.pin(&ids[i]), store.version(&ids[i]).is_some());
                    if i == model.current {
                        model.pinned.0 = true;
                    } else if Some(i) == model.previous {
                        model.pinned.1 = true;
                    }
                }
            }
            check(&store, &model, &ids)?;
        }
        prop_assert!(Snapshot::open(&path).is_ok());
    }
}

/// A store serving generation 0 from `live.snap` in a fresh directory.
struct Fixture {
    dir: tempfile::TempDir,
    path: std::path::PathBuf,
    first: String,
    runtime: tokio::runtime::Runtime,
    metrics: Arc<Metrics>,
    store: Store,
}

fn fixture(load_timeout: Duration) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.snap");
    let first = write_generation(&path, 0);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let metrics = Arc::new(Metrics::default());
    let store =
        Store::open(&path, ActiveBlocklist::empty(), load_timeout, Arc::clone(&metrics)).unwrap();
    Fixture { dir, path, first, runtime, metrics, store }
}

/// A load out of time changes nothing and is worth trying again; a rejected file is not.
#[test]
fn a_load_out_of_time_is_transient_and_a_corrupt_file_is_not() {
    let Fixture { dir: _dir, path, first, runtime, metrics, store } = fixture(Duration::ZERO);
    // Large enough that no loader thread reads and verifies it before its first poll.
    let entries: Vec<Entry> = (0..50_000)
        .map(|i| Entry {
            key: format!("key {i:06}"),
            display: None,
            score: f64::from(i % 97) + 1.0,
        })
        .collect();
    snapshot::write_file(&path, &entries, &BuildInfo::default()).unwrap();
    let out_of_time = runtime.block_on(store.reload()).unwrap_err();
    assert!(out_of_time.is_transient(), "{out_of_time}");
    assert_eq!(store.current().snapshot.id(), first);
    assert_eq!(metrics.swaps_failed.get(), 1);
    let patient =
        Store::open(&path, ActiveBlocklist::empty(), Duration::from_secs(30), metrics).unwrap();
    crate::atomic::write(&path, b"not a snapshot").unwrap();
    assert!(!runtime.block_on(patient.reload()).unwrap_err().is_transient());
}

/// Overwrites `path` in place with `bytes` of the same length and puts its modification time
/// back: the same identity (inode, size, time) with other contents, which only a read notices.
fn overwrite_keeping_identity(path: &Path, bytes: &[u8]) {
    let modified = std::fs::metadata(path).unwrap().modified().unwrap();
    let mut file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    std::io::Write::write_all(&mut file, bytes).unwrap();
    file.set_modified(modified).unwrap();
}

/// The file last verified, and the one a follower verified and adopted, are not read again
/// while their identity stays; once it changes (here only the time) they are.
#[test]
fn a_verified_file_is_not_read_again_until_it_changes() {
    let Fixture { dir, path, first, runtime, metrics, store } = fixture(Duration::from_secs(30));
    let mut flipped = std::fs::read(&path).unwrap();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x55;
    overwrite_keeping_identity(&path, &flipped);
    assert_eq!(runtime.block_on(store.reload()).unwrap().snapshot.id(), first, "not read");
    // A new time is a new file: read, and rejected.
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(std::time::SystemTime::now())
        .unwrap();
    assert!(runtime.block_on(store.reload()).is_err());
    assert_eq!(metrics.swaps_failed.get(), 1);

    // A follower's download: verified aside, renamed into place and adopted.
    let staged = dir.path().join("staged.snap");
    let second = write_generation(&staged, 1);
    let loaded = super::Preloaded::open(&staged).unwrap();
    let live = path.clone();
    let place = move || std::fs::rename(&staged, &live);
    assert_eq!(runtime.block_on(store.adopt(loaded, place)).unwrap().snapshot.id(), second);
    assert_eq!(store.previous().unwrap().snapshot.id(), first);
    let mut flipped = std::fs::read(&path).unwrap();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x55;
    overwrite_keeping_identity(&path, &flipped);
    assert_eq!(runtime.block_on(store.reload()).unwrap().snapshot.id(), second, "not read");
    assert_eq!(metrics.swaps.get(), 1);
}

/// The watcher sees a follower's file as soon as it is renamed into place, before the store
/// has published it: its reload waits for the adoption and then has nothing to read. (The
/// file is changed in place after the rename, keeping its identity: a reload that read it
/// would reject it.)
#[test]
fn a_reload_during_an_adoption_reads_nothing() {
    let Fixture { dir, path, first, runtime, metrics, store } = fixture(Duration::from_secs(30));
    let staged = dir.path().join("staged.snap");
    let second = write_generation(&staged, 1);
    assert_ne!(first, second);
    let loaded = super::Preloaded::open(&staged).unwrap();
    let (renamed, seen) = tokio::sync::oneshot::channel();
    let live = path.clone();
    let place = move || {
        std::fs::rename(&staged, &live)?;
        let mut flipped = std::fs::read(&live)?;
        let mid = flipped.len() / 2;
        flipped[mid] ^= 0x55;
        overwrite_keeping_identity(&live, &flipped);
        let _ = renamed.send(());
        Ok(())
    };
    let (adopted, reloaded) = runtime.block_on(async {
        let watcher = async {
            seen.await.unwrap();
            store.reload().await
        };
        tokio::join!(store.adopt(loaded, place), watcher)
    });
    assert_eq!(adopted.unwrap().snapshot.id(), second);
    assert_eq!(reloaded.unwrap().snapshot.id(), second, "not read");
    assert_eq!((metrics.swaps.get(), metrics.swaps_failed.get()), (1, 0));
}

/// An aggregator pinned to generation 0 (another partition cannot load the newer ones) keeps
/// getting answers from it while this partition loads 1 and then 2; once an aggregator pins
/// the current generation, the next reload keeps that one as before.
#[test]
fn a_generation_an_aggregator_pinned_outlives_two_reloads() {
    let Fixture { dir, path, first, runtime, store, .. } = fixture(Duration::from_secs(30));
    let ids: Vec<String> =
        (1..3).map(|i| write_generation(&dir.path().join(format!("{i}.snap")), i)).collect();
    assert!(store.pin(&first));
    for i in 1..3 {
        write_generation(&path, i);
        runtime.block_on(store.reload()).unwrap();
        assert!(store.version(&first).is_some(), "generation 0 dropped at reload {i}");
    }
    assert!(store.version(&ids[0]).is_none(), "generation 1 was never pinned");
    assert!(store.pin(&ids[1]), "the aggregator moves to the current generation");
    write_generation(&path, 1);
    runtime.block_on(store.reload()).unwrap();
    assert_eq!(store.previous().map(|p| p.snapshot.id().to_owned()), Some(ids[1].clone()));
}

/// A pin counts for [`super::Pinned::FRESH`]: an aggregator that went away, or a client that
/// named a version once, does not decide what reloads keep for the life of the process.
#[test]
fn a_pin_counts_for_ten_seconds() {
    use super::Pinned;
    let pin = Pinned::default();
    assert!(!pin.is_fresh(), "never pinned");
    pin.now();
    assert!(pin.is_fresh());
    let fresh = Pinned::FRESH.as_millis() as u64;
    let now = 5 * fresh;
    assert!(Pinned::fresh(now - fresh + 1, now), "pinned just under ten seconds ago");
    assert!(!Pinned::fresh(now - fresh, now), "pinned ten seconds ago");
    assert!(!Pinned::fresh(0, 1), "never pinned");
}
