//! `typeahead build --out s3://bucket/typeahead [--state s3://bucket/state | --state DIR]`:
//! the hourly build with its output, and optionally its EMA state, in object storage, so an
//! hourly job needs no disk that survives it.
//!
//! The build itself is the local one ([`build::run`], with its crash-safety protocol), run in
//! a scratch directory: the state is downloaded into it first, and the live generation too
//! when the regression gate needs it. Then, in this order:
//!
//! 1. the new generation is published to the bucket ([`Bucket::publish`]: its files, then the
//!    live manifest with a conditional put — the commit point — and then the generation's own
//!    manifest, which makes it a kept generation);
//! 2. only then the new state replaces the old one.
//!
//! A build whose generation has the live one's content (the gate finds that, as for a local
//! build) publishes nothing. It saves its state only if the live manifest it compared with is
//! still live and the state changed (a re-run that caught up hours the state lacked): a state
//! read and written back unchanged is not uploaded again.
//!
//! A build killed before 1 leaves the bucket's live generation and state untouched (at most an
//! incomplete generation directory that nothing names, pruned later); killed between 1 and 2,
//! the state is the old one and the next run repeats the same hours from it, which gives the
//! same result. The state is written without a condition: only the builder that won the
//! manifest's conditional put writes it (or one that publishes nothing, found the manifest
//! unchanged just before, and changed the state: a narrow window), and a state that is older
//! than the live generation is only ever re-processed, never wrong.

use std::path::{Path, PathBuf};
use std::time::Duration;

use typeahead_builder::build::{self, BuildError, BuildOptions, BuildSummary};
use typeahead_builder::partition::Partitioning;
use typeahead_builder::publish;
use typeahead_builder::state::{self, Lock, StateError};

use super::bucket::{Bucket, BucketError, Found};
use super::{Expect, Location, RemoteError};
use crate::manifest::Manifest;

/// Where the EMA state of a build into a bucket is kept.
#[derive(Debug, Clone)]
pub enum StateAt {
    /// A local state directory (locked for the build, as for local builds).
    Local(PathBuf),
    /// The state file's object (`<--state>/state.bin`).
    Remote(Location),
}

/// A build whose output goes to a bucket.
#[derive(Debug, Clone)]
pub struct BucketBuild {
    /// The `--out` prefix.
    pub out: Bucket,
    /// The state, if the build keeps one.
    pub state: Option<StateAt>,
    /// Fault injection for tests: a pause between building and publishing, so another builder
    /// can publish first.
    pub publish_delay: Duration,
}

/// Why a build into a bucket published nothing (or, for a failed state save, published but
/// kept the old state).
#[derive(Debug, thiserror::Error)]
pub enum BucketBuildError {
    /// The local build failed.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// The bucket failed or refused.
    #[error(transparent)]
    Bucket(#[from] BucketError),
    /// The store failed (the state).
    #[error(transparent)]
    Remote(#[from] RemoteError),
    /// The local state directory is locked or unreadable.
    #[error(transparent)]
    State(#[from] StateError),
    /// The scratch directory or a local state file failed.
    #[error("cannot write {path}")]
    Local {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The generation was published, but the new state could not be saved: the next build
    /// repeats these hours.
    #[error(
        "generation {generation} is live, but its state was not saved (the next build repeats these hours)"
    )]
    StateNotSaved {
        /// The live generation.
        generation: String,
        /// Why.
        #[source]
        source: Box<BucketBuildError>,
    },
}

/// Copies an operator's file as every reader of one opens it ([`typeahead_core::file`]): not
/// blocking, and only if it is a regular file (a FIFO named as the state hung the build).
fn copy_regular(from: &Path, to: &Path) -> std::io::Result<()> {
    let (mut source, _) = typeahead_core::file::open_regular(from)?;
    let mut copy = std::fs::File::create(to)?;
    std::io::copy(&mut source, &mut copy)?;
    Ok(())
}

fn local(path: &Path) -> impl FnOnce(std::io::Error) -> BucketBuildError + use<> {
    let path = path.to_owned();
    move |source| BucketBuildError::Local { path, source }
}

/// Runs one build of `opts` (whose `out` and `state_dir` are ignored) into `target`. Returns
/// the summary and the live manifest as published.
pub async fn run(
    mut opts: BuildOptions,
    target: &BucketBuild,
) -> Result<(BuildSummary, Manifest), BucketBuildError> {
    let scratch = tempfile::tempdir().map_err(local(&std::env::temp_dir()))?;
    let out = scratch.path().join("out");
    let (live, expect) = match target.out.live_as_found().await? {
        Found::Absent => (None, Expect::Absent),
        Found::Live(live) => {
            let expect = Expect::Tag(live.tag.clone());
            (Some(live), expect)
        }
        // As a local build repairs an unreadable live generation: no gate, and the put
        // replaces exactly the object read.
        Found::Damaged(tag, error) => {
            tracing::warn!(error = %error, "the live manifest is malformed; the gate is skipped and this build replaces it");
            (None, Expect::Tag(tag))
        }
    };
    if let (Some(_), Some(live)) = (&opts.gate, &live) {
        target.out.download(live, &out).await?;
    }
    let state = match &target.state {
        Some(at) => Some(Fetched::fetch(at.clone(), &scratch.path().join("state")).await?),
        None => None,
    };
    opts.out.clone_from(&out);
    opts.state_dir = state.as_ref().map(|s| s.dir.clone());
    opts.partitioning.get_or_insert(Partitioning::Count(1));
    let keep = opts.keep_generations;
    let summary = tokio::task::spawn_blocking(move || build::run(&opts))
        .await
        .map_err(|e| local(&out)(std::io::Error::other(e)))??;
    tokio::time::sleep(target.publish_delay).await;
    // The live generation (downloaded for the gate) already has this content: the bucket
    // keeps it, and only the state moves on. With no conditional put to lose, the build saves
    // its state only if the manifest it compared with is still live, and only if it changed.
    let (manifest, dir) = match live.filter(|_| summary.unchanged) {
        Some(live) => {
            match target.out.live().await? {
                Some(now) if now.tag == live.tag => {}
                _ => return Err(BucketError::Conflict(target.out.manifest().to_string()).into()),
            }
            let dir = live.dir().unwrap_or_default().to_owned();
            (live.manifest, dir)
        }
        None => {
            let sealed = sealed_dir(&out, &summary.generation).map_err(local(&out))?;
            // Named by this builder's clock, but ordered among the bucket's generations: one
            // named before its predecessor (a clock behind another builder's) was what a
            // default rollback and the pruning took for the older of the two.
            let newest = target.out.newest_time().await?;
            let sealed = publish::seal_after(&sealed, newest).map_err(local(&out))?;
            let manifest = target.out.publish(&sealed, expect).await?;
            let dir = sealed.file_name().map(|n| n.to_string_lossy().into_owned());
            (manifest, dir.unwrap_or_default())
        }
    };
    if let Some(state) = state {
        state.save().await.map_err(|e| BucketBuildError::StateNotSaved {
            generation: manifest.generation.clone(),
            source: Box::new(e),
        })?;
    }
    match target.out.prune(keep, &dir).await {
        Ok(deleted) if !deleted.is_empty() => tracing::info!(?deleted, "pruned generations"),
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %crate::error::chain(&e), "pruning the bucket failed"),
    }
    Ok((summary, manifest))
}

/// The sealed directory of the generation just built in the scratch output.
fn sealed_dir(out: &Path, generation: &str) -> std::io::Result<PathBuf> {
    publish::generations(&publish::history_dir(out, true))
        .into_iter()
        .rev()
        .find(|(name, _)| publish::id_of(name) == generation)
        .map(|(_, path)| path)
        .ok_or_else(|| std::io::Error::other(format!("generation {generation} was not written")))
}

/// The state copied into the scratch directory, and how to put the new one back.
struct Fetched {
    at: StateAt,
    /// The scratch state directory the build uses.
    dir: PathBuf,
    /// Held for the whole build when the state is local.
    _lock: Option<Lock>,
    /// The fetched state's [`state::fingerprint`] (`None`: there was none).
    fetched: Option<(u64, u32)>,
}

impl Fetched {
    async fn fetch(at: StateAt, dir: &Path) -> Result<Fetched, BucketBuildError> {
        std::fs::create_dir_all(dir).map_err(local(dir))?;
        let file = dir.join(state::STATE_FILE);
        let lock = match &at {
            StateAt::Local(source) => {
                let lock = Lock::acquire(source)?;
                let from = source.join(state::STATE_FILE);
                if from.exists() {
                    copy_regular(&from, &file).map_err(local(&from))?;
                }
                Some(lock)
            }
            StateAt::Remote(location) => {
                location.download(&file).await?;
                None
            }
        };
        let fetched = state::fingerprint(&file).map_err(local(&file))?;
        Ok(Fetched { at, dir: dir.to_owned(), _lock: lock, fetched })
    }

    /// Replaces the kept state with the one the build committed in the scratch directory,
    /// unless it is the one fetched: a build with nothing new leaves the kept state alone, so
    /// it cannot overwrite a newer one another builder saved meanwhile.
    async fn save(self) -> Result<(), BucketBuildError> {
        let file = self.dir.join(state::STATE_FILE);
        if self.fetched.is_some()
            && state::fingerprint(&file).map_err(local(&file))? == self.fetched
        {
            return Ok(());
        }
        match &self.at {
            StateAt::Local(dir) => {
                let to = dir.join(state::STATE_FILE);
                crate::atomic::write_with(&to, |out| {
                    std::io::copy(&mut std::fs::File::open(&file)?, out).map(|_| ())
                })
                .map_err(local(&to))
            }
            StateAt::Remote(location) => Ok(location.upload(&file).await?),
        }
    }
}
