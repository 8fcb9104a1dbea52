//! A build's output in object storage: generations under their own prefix, the live manifest
//! at the root, replaced only by a conditional put.
//!
//! ```text
//! s3://bucket/typeahead/
//!   manifest.json                              the live generation (the commit point)
//!   generations/<ms>-<generation>/part-NNN-<id>.snap
//!   generations/<ms>-<generation>/manifest.json   written once it is live: "complete"
//! ```
//!
//! Publishing uploads a generation's files first (new names: nothing live changes), then the
//! live manifest, whose file names carry the generation's prefix, with a conditional put: it
//! only replaces the manifest the builder read before building; and last the generation's own
//! manifest, which marks it complete (kept, a rollback's target) only once it has been live.
//! Two builders can never both publish from the same live generation, and a reader never sees
//! a manifest naming files that are not all there. Rolling back is one more
//! conditional put of an older generation's manifest. Pruning keeps the newest complete
//! generations and the live one; an incomplete one (a builder killed mid-upload) goes once its
//! newest file's Last-Modified (the store's) is an hour old, never sooner, as a builder may still be
//! uploading it.

use std::path::Path;

use typeahead_builder::publish::{id_of, time_of};

use super::{Expect, Location, RemoteError, Tag};
use crate::generation::{MANIFEST_FILE, check_rules, rules_in_force};
use crate::manifest::{MAX_MANIFEST_BYTES, Manifest, Partition};

/// Where generations live under the root (the aggregator's fallback reads them there too).
pub(crate) const GENERATIONS: &str = "generations";

/// An incomplete generation younger than this may still be being uploaded.
const UPLOAD_GRACE_MS: i64 = 60 * 60 * 1000;

/// The partitions of `manifest` whose file is not under `base` (the manifest names them
/// relative to it: the root for a live manifest, the generation's directory for its own).
async fn missing<'m>(
    base: &Location,
    manifest: &'m Manifest,
) -> Result<Vec<&'m Partition>, BucketError> {
    let mut gone = Vec::new();
    for p in &manifest.partitions {
        if !base.join(&p.file).exists().await? {
            gone.push(p);
        }
    }
    Ok(gone)
}

/// Why a bucket operation did nothing (or, for [`BucketError::Conflict`], lost a race).
#[derive(Debug, thiserror::Error)]
pub enum BucketError {
    /// The store failed.
    #[error(transparent)]
    Remote(#[from] RemoteError),
    /// A manifest in the bucket is not one.
    #[error("manifest {location} is malformed: {message}")]
    Manifest {
        /// Where.
        location: String,
        /// What is wrong.
        message: String,
    },
    /// The live manifest changed since it was read: another builder (or a rollback) published.
    #[error(
        "{0} changed while this build ran (another builder or a rollback published first); \
         nothing of this build is live and its state was not saved"
    )]
    Conflict(String),
    /// The rollback's target was built under older rules than the live generation.
    #[error(transparent)]
    OlderRules(#[from] crate::generation::OlderRules),
    /// The store gave neither an ETag nor a version, so the manifest cannot be replaced conditionally.
    #[error("{0} has neither an ETag nor a version: the store cannot replace it conditionally")]
    NoTag(String),
    /// A local file of the generation could not be read.
    #[error("cannot read {path}")]
    Local {
        /// The file.
        path: std::path::PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Nothing to roll back to.
    #[error("no generation to roll back to (live {live}; complete ones kept: {kept})")]
    NoTarget {
        /// The live generation.
        live: String,
        /// The complete generations kept, oldest first.
        kept: String,
    },
    /// There is no live manifest.
    #[error("no manifest at {0}")]
    NoManifest(String),
    /// A file the live manifest names is not there.
    #[error("the live manifest names {0}, which is not there")]
    MissingFile(String),
    /// The rollback's target was deleted (by a prune racing it) before the live manifest named
    /// it; the manifest rolled back from was put back.
    #[error("generation {0} was pruned while the rollback ran; the live manifest is unchanged")]
    TargetPruned(String),
    /// As [`BucketError::TargetPruned`], but the manifest rolled back from was malformed, so
    /// there was none to put back: the live manifest names the pruned generation.
    #[error(
        "generation {0} was pruned while the rollback ran, and the live manifest (malformed \
         before) now names it: publish a build or roll back to another generation"
    )]
    PrunedLive(String),
}

/// What [`Bucket::live_as_found`] found.
#[derive(Debug)]
pub enum Found {
    /// No live manifest yet.
    Absent,
    /// A live manifest.
    Live(Live),
    /// An object that is not a manifest: its version, and why.
    Damaged(Tag, BucketError),
}

/// The live manifest as read, with the version a later conditional put must match.
#[derive(Debug, Clone)]
pub struct Live {
    /// The manifest (its files relative to the root).
    pub manifest: Manifest,
    /// Its version.
    pub tag: Tag,
}

impl Live {
    /// The name of the generation directory the live manifest's files are in.
    pub fn dir(&self) -> Option<&str> {
        Self::dir_of(&self.manifest)
    }

    /// The name of the generation directory `manifest`'s files are in.
    fn dir_of(manifest: &Manifest) -> Option<&str> {
        let file = &manifest.partitions.first()?.file;
        file.strip_prefix(GENERATIONS)?.strip_prefix('/')?.split_once('/').map(|(d, _)| d)
    }
}

/// The `--out` of builds that publish to object storage.
#[derive(Debug, Clone)]
pub struct Bucket {
    root: Location,
}

impl Bucket {
    /// The bucket prefix `root` (`s3://bucket/typeahead`).
    pub fn new(root: Location) -> Bucket {
        Bucket { root }
    }

    /// The live manifest's location.
    pub fn manifest(&self) -> Location {
        self.root.join(MANIFEST_FILE)
    }

    fn generation(&self, dir: &str) -> Location {
        self.root.join(&format!("{GENERATIONS}/{dir}"))
    }

    fn parse(location: &Location, bytes: &[u8]) -> Result<Manifest, BucketError> {
        Manifest::parse(bytes)
            .map_err(|message| BucketError::Manifest { location: location.to_string(), message })
    }

    /// The live manifest and its version; `None` before the first publication, an error when
    /// it is malformed.
    pub async fn live(&self) -> Result<Option<Live>, BucketError> {
        match self.live_as_found().await? {
            Found::Absent => Ok(None),
            Found::Live(live) => Ok(Some(live)),
            Found::Damaged(_, error) => Err(error),
        }
    }

    /// What is at the live manifest's place, a malformed one included with its version: what a
    /// build (or a rollback given its target) replaces it from, conditionally on that tag.
    /// Without this, a damaged manifest stopped every build and rollback until someone
    /// overwrote the object by hand.
    pub async fn live_as_found(&self) -> Result<Found, BucketError> {
        let location = self.manifest();
        let Some((bytes, tag)) = location.get(MAX_MANIFEST_BYTES).await? else {
            return Ok(Found::Absent);
        };
        if !tag.is_known() {
            return Err(BucketError::NoTag(location.to_string()));
        }
        Ok(match Self::parse(&location, &bytes) {
            Ok(manifest) => Found::Live(Live { manifest, tag }),
            Err(error) => Found::Damaged(tag, error),
        })
    }

    /// Downloads the live generation into `dir` as a local partitioned output (the manifest
    /// and its files side by side), for the regression gate.
    pub async fn download(&self, live: &Live, dir: &Path) -> Result<(), BucketError> {
        let local = |source| BucketError::Local { path: dir.to_owned(), source };
        std::fs::create_dir_all(dir).map_err(local)?;
        let mut manifest = live.manifest.clone();
        for p in &mut manifest.partitions {
            let name = p.file.rsplit('/').next().unwrap_or_default().to_owned();
            let file = self.root.join(&p.file);
            if !file.download(&dir.join(&name)).await? {
                return Err(BucketError::MissingFile(file.to_string()));
            }
            p.file = name;
        }
        let json = manifest.to_json().map_err(|e| local(std::io::Error::other(e)))?;
        crate::atomic::write(&dir.join(MANIFEST_FILE), &json).map_err(local)
    }

    /// Publishes the sealed local generation directory `sealed` (its manifest and partition
    /// files, named `<ms>-<generation>`): uploads it, then replaces the live manifest if it is
    /// still what `expect` says.
    ///
    /// The generation's own manifest, which makes it complete (a kept generation, a
    /// rollback's target), goes up only once it is live. A builder killed or failing before
    /// then leaves an incomplete upload, pruned once it is an hour old: complete, a generation
    /// that was never live would be the next build's `rollback` default, a near copy of it.
    pub async fn publish(&self, sealed: &Path, expect: Expect) -> Result<Manifest, BucketError> {
        let local = |source| BucketError::Local { path: sealed.to_owned(), source };
        let name = sealed.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let manifest_bytes = std::fs::read(sealed.join(MANIFEST_FILE)).map_err(local)?;
        let dir = self.generation(&name);
        let mut manifest = Self::parse(&dir, &manifest_bytes)?;
        for p in &manifest.partitions {
            dir.join(&p.file).upload(&sealed.join(&p.file)).await?;
        }
        // An upload that took over an hour looked abandoned to another builder's prune (a file
        // going up is not listed until it is complete), which may have deleted the files
        // already up: they go up again before the manifest names them.
        self.upload_missing(&dir, sealed, &manifest).await?;
        let local_names = manifest.clone();
        for p in &mut manifest.partitions {
            p.file = format!("{GENERATIONS}/{name}/{}", p.file);
        }
        if let Err(e) = self.put_live(&manifest, expect).await {
            if matches!(e, BucketError::Conflict(_)) {
                // Lost to another publisher: never live, so nothing to keep.
                if let Err(cleanup) = dir.delete_all().await {
                    tracing::warn!(error = %cleanup, generation = %name, "cannot delete a generation that lost the race to publish");
                }
            }
            return Err(e);
        }
        // A prune that read the live manifest before the put, and deleted the generation's
        // files after the check above, left the live manifest naming files that are gone.
        // Live already, so a failure here does not fail the publication (the state must
        // follow the live generation); the next one replaces it.
        if let Err(e) = self.upload_missing(&dir, sealed, &local_names).await {
            // Not complete, then: a rollback target with files missing would be the default
            // one after the next publication, and refused.
            tracing::error!(error = %crate::error::chain(&e), generation = %name, "generation is live, but its missing files could not be checked or uploaded again: followers may refuse it until the next publication, and it is no rollback target");
            return Ok(manifest);
        }
        // Live now; without its manifest it only cannot be rolled back to once it is replaced.
        if let Err(e) = dir.join(MANIFEST_FILE).put(manifest_bytes.into()).await {
            tracing::warn!(error = %crate::error::chain(&e), generation = %name, "generation is live, but its own manifest was not written: it cannot be rolled back to later");
        }
        Ok(manifest)
    }

    /// Uploads again the files of the generation in `sealed` that are not in its directory
    /// `dir` (`manifest` names them relative to it).
    async fn upload_missing(
        &self,
        dir: &Location,
        sealed: &Path,
        manifest: &Manifest,
    ) -> Result<(), BucketError> {
        for p in missing(dir, manifest).await? {
            let file = dir.join(&p.file);
            tracing::warn!(file = %file, "a file of the generation being published was deleted (pruned as abandoned?); it goes up again");
            file.upload(&sealed.join(&p.file)).await?;
        }
        Ok(())
    }

    /// Conditionally replaces the live manifest with `manifest`.
    async fn put_live(&self, manifest: &Manifest, expect: Expect) -> Result<(), BucketError> {
        let json = manifest.to_json().map_err(|e| BucketError::Local {
            path: MANIFEST_FILE.into(),
            source: std::io::Error::other(e),
        })?;
        let location = self.manifest();
        match location.put_if(json.into(), expect).await {
            Err(RemoteError::Conflict { .. }) => {
                // A put the store committed but answered with a 5xx is tried again, and its
                // own first try makes the retry fail its condition: then the live manifest
                // already is this one.
                // When that read fails the outcome is unknown, and that is not a conflict: the
                // caller deletes a generation that lost, and this one may be live.
                match self.live().await? {
                    Some(live) if live.manifest == *manifest => Ok(()),
                    _ => Err(BucketError::Conflict(location.to_string())),
                }
            }
            other => Ok(other?),
        }
    }

    /// The generation directories, oldest first, each with whether it is complete.
    pub async fn generations(&self) -> Result<Vec<(String, bool)>, BucketError> {
        let mut all = Vec::new();
        for name in self.root.join(GENERATIONS).children().await? {
            let complete = self.generation(&name).join(MANIFEST_FILE).exists().await?;
            all.push((name, complete));
        }
        Ok(all)
    }

    /// The newest time (unix milliseconds) any generation directory is named by, 0 if none.
    pub async fn newest_time(&self) -> Result<u128, BucketError> {
        let names = self.root.join(GENERATIONS).children().await?;
        Ok(names.iter().filter_map(|n| time_of(n)).max().unwrap_or(0))
    }

    /// Whether every file `manifest` names is in the bucket.
    async fn all_present(&self, manifest: &Manifest) -> Result<bool, BucketError> {
        Ok(missing(&self.root, manifest).await?.is_empty())
    }

    /// Deletes all but the newest `keep` complete generations, and incomplete ones older than
    /// an hour. Returns the directories deleted.
    ///
    /// Never deletes `mine` (the directory the caller just published) nor the directory the
    /// live manifest names when the pruning starts, complete or not: a rollback since the
    /// caller published may have made an older generation live again, and deleting it would
    /// leave the manifest naming files that are gone (and a generation whose own manifest was
    /// lost, to a delete cut short say, is still live).
    pub async fn prune(&self, keep: usize, mine: &str) -> Result<Vec<String>, BucketError> {
        let live = self.live().await?;
        let live = live.as_ref().and_then(Live::dir);
        let all = self.generations().await?;
        // A complete generation published again later (a build with no new hour makes the live
        // one again) is kept once, as its newest copy: every copy counted pushed an older
        // generation out, until `rollback` had nothing to go back to.
        let superseded: Vec<bool> = (0..all.len())
            .map(|i| {
                let (name, complete) = &all[i];
                *complete && all[i + 1..].iter().any(|(n, c)| *c && id_of(n) == id_of(name))
            })
            .collect();
        let distinct = all.iter().zip(&superseded).filter(|((_, c), s)| *c && !**s).count();
        let mut excess = distinct.saturating_sub(keep.max(1));
        let now = crate::clock::now_unix_ms();
        let mut deleted = Vec::new();
        for ((name, complete), superseded) in all.into_iter().zip(superseded) {
            let go = if superseded {
                name != mine
            } else if complete {
                let old = excess > 0;
                excess = excess.saturating_sub(1);
                old && name != mine
            } else {
                // Aged by when its newest file was written (Last-Modified, the store's clock,
                // against ours: SigV4 refuses clocks more than 15 minutes off): the time in its
                // name is its builder's, taken before the upload began, and a builder whose
                // clock lags, or an upload of many files that takes long, would lose files
                // still going up. (One file that takes over an hour is not listed until done.)
                let written = self.generation(&name).last_written_ms().await?;
                written.is_some_and(|ms| now.saturating_sub(ms) > UPLOAD_GRACE_MS)
            };
            let go = go && Some(name.as_str()) != live;
            // Read again just before deleting: a rollback (or a publication) since the prune
            // began may have made this generation live, and deleting it would leave the live
            // manifest naming files that are gone. (The window left is this read to the
            // delete; the rollback and the publication check their files after their put.)
            if go && !self.is_live(&name).await? {
                self.generation(&name).delete_all().await?;
                deleted.push(name);
            }
        }
        Ok(deleted)
    }

    /// Whether the live manifest, read now, names the generation directory `name`.
    async fn is_live(&self, name: &str) -> Result<bool, BucketError> {
        Ok(self.live().await?.as_ref().and_then(Live::dir) == Some(name))
    }

    /// The rules each of the generation directories `names` recorded (`None` for one whose
    /// manifest is gone, malformed, or records none); those of `known` (a directory name and
    /// its rules) as already read. A failed read fails: skipped, it could lower the floor a
    /// rollback is held to.
    async fn recorded_rules(
        &self,
        names: &[String],
        known: (&str, Option<u32>),
    ) -> Result<Vec<Option<u32>>, BucketError> {
        let mut rules = Vec::with_capacity(names.len());
        for name in names {
            if name == known.0 {
                rules.push(known.1);
                continue;
            }
            let location = self.generation(name).join(MANIFEST_FILE);
            let read = location.get(MAX_MANIFEST_BYTES).await?;
            rules.push(read.and_then(|(bytes, _)| Manifest::parse(&bytes).ok()?.rules));
        }
        Ok(rules)
    }

    /// Publishes generation `to` again (by id), or by default the complete one before the
    /// live one. Returns (from, to) generation ids.
    ///
    /// A malformed live manifest is replaced too when `to` names the target (there is no
    /// "generation before it" to default to). A target built under older rules than those in
    /// force ([`rules_in_force`]: the live generation's, else the newest the kept ones
    /// recorded, else this build's) is refused unless `force` ([`check_rules`]).
    pub async fn rollback(
        &self,
        to: Option<&str>,
        force: bool,
    ) -> Result<(String, String), BucketError> {
        // The manifest rolled back from (none when it is malformed), and its tag.
        let (previous, tag) = match self.live_as_found().await? {
            Found::Absent => return Err(BucketError::NoManifest(self.manifest().to_string())),
            Found::Damaged(_, error) if to.is_none() => return Err(error),
            Found::Damaged(tag, _) => (None, tag),
            Found::Live(Live { manifest, tag }) => (Some(manifest), tag),
        };
        let from = previous.as_ref().map_or_else(|| "(malformed)".into(), |m| m.generation.clone());
        let complete: Vec<String> =
            self.generations().await?.into_iter().filter(|(_, c)| *c).map(|(n, _)| n).collect();
        let target = match to {
            Some(id) => complete.iter().rev().find(|n| id_of(n) == id),
            None => before_live(&complete, previous.as_ref().and_then(Live::dir_of)),
        };
        let Some(name) = target else {
            let kept: Vec<&str> = complete.iter().map(|n| id_of(n)).collect();
            return Err(BucketError::NoTarget { live: from, kept: kept.join(", ") });
        };
        let location = self.generation(name).join(MANIFEST_FILE);
        let (bytes, _) = location
            .get(MAX_MANIFEST_BYTES)
            .await?
            .ok_or_else(|| BucketError::NoManifest(location.to_string()))?;
        let mut manifest = Self::parse(&location, &bytes)?;
        if !force {
            let live = previous.as_ref().and_then(|p| p.rules);
            let kept = match live {
                Some(_) => Vec::new(),
                None => self.recorded_rules(&complete, (name, manifest.rules)).await?,
            };
            check_rules(&manifest.generation, manifest.rules, rules_in_force(live, kept))?;
        }
        for p in &mut manifest.partitions {
            p.file = format!("{GENERATIONS}/{name}/{}", p.file);
        }
        // Checked before the put (a target pruned earlier) and after it: a prune that read
        // the live manifest before the put keeps only what was live then, so it may delete
        // the target meanwhile, and a manifest naming files that are gone would stop every
        // follower. Found gone after the put, the previous manifest is put back.
        if !self.all_present(&manifest).await? {
            return Err(BucketError::TargetPruned(manifest.generation));
        }
        self.put_live(&manifest, Expect::Tag(tag)).await?;
        if !self.all_present(&manifest).await? {
            let now = self.live().await?.filter(|now| now.manifest == manifest);
            match (now, &previous) {
                (Some(now), Some(previous)) => {
                    self.put_live(previous, Expect::Tag(now.tag)).await?
                }
                // Malformed before, there is nothing to put back: say what is live.
                (Some(_), None) => return Err(BucketError::PrunedLive(manifest.generation)),
                // Another publisher replaced it meanwhile: not ours to undo.
                (None, _) => {}
            }
            return Err(BucketError::TargetPruned(manifest.generation));
        }
        Ok((from, manifest.generation))
    }
}

/// A default rollback's target among the complete generation directories (oldest first): the
/// newest before the live one, and of another generation. A copy of the live generation left
/// before it (a build of the live generation again, whose prune was cut short) would roll back
/// to itself.
fn before_live<'a>(complete: &'a [String], live_dir: Option<&str>) -> Option<&'a String> {
    let at = complete.iter().position(|n| Some(n.as_str()) == live_dir);
    let live_id = live_dir.map(id_of);
    complete[..at.unwrap_or(complete.len())].iter().rev().find(|n| Some(id_of(n)) != live_id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::normalize::RULES_VERSION;

    /// A complete generation directory `dir` in the bucket at `root`, with a manifest naming
    /// one partition file in it.
    fn generation_at(root: &Path, dir: &str) -> Manifest {
        generation_under(root, dir, Some(RULES_VERSION))
    }

    /// [`generation_at`], built under `rules`.
    fn generation_under(root: &Path, dir: &str, rules: Option<u32>) -> Manifest {
        let files = root.join(GENERATIONS).join(dir);
        std::fs::create_dir_all(&files).unwrap();
        std::fs::write(files.join("part-000.snap"), b"snap").unwrap();
        let manifest = |file: String| Manifest {
            format: crate::manifest::MANIFEST_FORMAT,
            generation: id_of(dir).to_owned(),
            created_unix: 0,
            watermark_hour: None,
            partitions: vec![crate::manifest::Partition {
                index: 0,
                start: String::new(),
                end: None,
                file,
                bytes: 4,
                checksum: id_of(dir).to_owned(),
                keys: 1,
            }],
            rules,
        };
        let own = serde_json::to_vec(&manifest("part-000.snap".into())).unwrap();
        std::fs::write(files.join(MANIFEST_FILE), own).unwrap();
        manifest(format!("{GENERATIONS}/{dir}/part-000.snap"))
    }

    /// A rollback to a generation built under older rules than the live one's (or before
    /// rules were recorded) needs `force`: it may hold what the newer rules withhold.
    #[tokio::test]
    async fn a_rollback_to_older_rules_needs_force() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let names = ["000000000000001-aaaa", "000000000000002-bbbb", "000000000000003-cccc"];
        // The live generation under the rules before today's, so that a floor taken from it
        // cannot be told apart from this build's by chance.
        let (older, oldest) = (RULES_VERSION - 1, RULES_VERSION - 2);
        generation_under(root, names[0], None);
        generation_under(root, names[1], Some(oldest));
        let live = generation_under(root, names[2], Some(older));
        std::fs::write(root.join(MANIFEST_FILE), serde_json::to_vec(&live).unwrap()).unwrap();
        let bucket = Bucket::new(Location::parse(&format!("file://{}", root.display())).unwrap());
        let floor_of = |refused: &BucketError| match refused {
            BucketError::OlderRules(o) => Some((o.id.clone(), o.floor)),
            _ => None,
        };
        let refused = bucket.rollback(None, false).await.unwrap_err();
        assert_eq!(floor_of(&refused), Some(("bbbb".into(), older)), "{refused:?}");
        let refused = bucket.rollback(Some("aaaa"), false).await.unwrap_err();
        assert!(matches!(&refused, BucketError::OlderRules(o) if o.built.is_none()), "{refused:?}");
        assert_eq!(bucket.live().await.unwrap().unwrap().manifest.generation, "cccc");
        // Live but unrecorded (an older binary published it): the newest rules recorded among
        // the kept generations are in force, not none.
        let unrecorded = Manifest { rules: None, ..live };
        let bytes = serde_json::to_vec(&unrecorded).unwrap();
        std::fs::write(root.join(MANIFEST_FILE), bytes).unwrap();
        let refused = bucket.rollback(None, false).await.unwrap_err();
        assert_eq!(floor_of(&refused), Some(("bbbb".into(), older)), "{refused:?}");
        // Forced, it gets as far as the conditional put, which a local directory cannot do
        // (`it::bucket` runs it against a real store).
        let forced = bucket.rollback(None, true).await.unwrap_err();
        assert!(matches!(forced, BucketError::Remote(_)), "{forced:?}");
    }

    /// Pruning keeps the generation that is live when it runs, even when it is not the
    /// newest: a rollback after the caller published made it live again.
    #[tokio::test]
    async fn pruning_never_deletes_the_live_generation() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let names = ["000000000000001-aaaa", "000000000000002-bbbb", "000000000000003-cccc"];
        let manifests: Vec<Manifest> = names.iter().map(|n| generation_at(root, n)).collect();
        // Rolled back to the oldest after the newest was published.
        let live = serde_json::to_vec(&manifests[0]).unwrap();
        std::fs::write(root.join(MANIFEST_FILE), live).unwrap();
        let bucket = Bucket::new(Location::parse(&format!("file://{}", root.display())).unwrap());
        let deleted = bucket.prune(1, names[2]).await.unwrap();
        assert_eq!(deleted, [names[1]]);
        let left = bucket.generations().await.unwrap();
        let complete: Vec<&str> =
            left.iter().filter(|(_, c)| *c).map(|(n, _)| n.as_str()).collect();
        assert_eq!(complete, [names[0], names[2]]);
    }

    /// A generation published again (a build with no new hour) is kept once, as its newest
    /// copy: the copies used to count each, pushing the generation before out of the bucket
    /// until `rollback` had nothing to go back to.
    #[tokio::test]
    async fn a_generation_published_again_is_kept_once() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let names = [
            "000000000000001-aaaa",
            "000000000000002-bbbb",
            "000000000000003-bbbb",
            "000000000000004-bbbb",
        ];
        let manifests: Vec<Manifest> = names.iter().map(|n| generation_at(root, n)).collect();
        std::fs::write(root.join(MANIFEST_FILE), serde_json::to_vec(&manifests[3]).unwrap())
            .unwrap();
        let bucket = Bucket::new(Location::parse(&format!("file://{}", root.display())).unwrap());
        let deleted = bucket.prune(2, names[3]).await.unwrap();
        assert_eq!(deleted, [names[1], names[2]]);
        let left = bucket.generations().await.unwrap();
        let complete: Vec<&str> =
            left.iter().filter(|(_, c)| *c).map(|(n, _)| n.as_str()).collect();
        assert_eq!(complete, [names[0], names[3]], "aaaa is still a rollback target");
    }

    /// An upload of over an hour looks abandoned to another builder's prune, which deletes the
    /// files already up: publishing uploads them again rather than make a manifest naming
    /// files that are gone live. Also: the newest name in the bucket orders the next one.
    #[tokio::test]
    async fn files_deleted_while_publishing_go_up_again() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("bucket");
        let names = ["000000000000001-aaaa", "000000000000007-bbbb"];
        let manifests: Vec<Manifest> = names.iter().map(|n| generation_at(&root, n)).collect();
        let bucket = Bucket::new(Location::parse(&format!("file://{}", root.display())).unwrap());
        assert_eq!(bucket.newest_time().await.unwrap(), 7);
        let sealed = dir.path().join("sealed");
        std::fs::create_dir_all(&sealed).unwrap();
        std::fs::write(sealed.join("part-000.snap"), b"snap").unwrap();
        let in_bucket = root.join(GENERATIONS).join(names[1]).join("part-000.snap");
        std::fs::remove_file(&in_bucket).unwrap();
        let generation = bucket.generation(names[1]);
        // As the sealed directory names them: relative to the generation's directory.
        let mut local = manifests[1].clone();
        local.partitions[0].file = "part-000.snap".into();
        bucket.upload_missing(&generation, &sealed, &local).await.unwrap();
        assert_eq!(std::fs::read(&in_bucket).unwrap(), b"snap");
        // Nothing missing: nothing uploaded (the sealed copy would show if it were).
        std::fs::write(sealed.join("part-000.snap"), b"other").unwrap();
        bucket.upload_missing(&generation, &sealed, &local).await.unwrap();
        assert_eq!(std::fs::read(&in_bucket).unwrap(), b"snap");
    }

    #[test]
    fn a_default_rollback_skips_copies_of_the_live_generation() {
        let names: Vec<String> = ["1-aaaa", "2-bbbb", "3-bbbb", "4-cccc"].map(String::from).into();
        assert_eq!(before_live(&names, Some("3-bbbb")).map(String::as_str), Some("1-aaaa"));
        assert_eq!(before_live(&names, Some("4-cccc")).map(String::as_str), Some("3-bbbb"));
        assert_eq!(before_live(&names, Some("1-aaaa")), None);
        // A live directory not among them (malformed or pruned): the newest.
        assert_eq!(before_live(&names, None).map(String::as_str), Some("4-cccc"));
    }

    /// A live generation whose own manifest is gone (a delete cut short) looked like an
    /// upload abandoned long ago, and pruning deleted the files the live manifest names.
    #[tokio::test]
    async fn pruning_keeps_a_live_generation_without_its_own_manifest() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let names = ["000000000000001-aaaa", "000000000000002-bbbb"];
        let manifests: Vec<Manifest> = names.iter().map(|n| generation_at(root, n)).collect();
        std::fs::write(root.join(MANIFEST_FILE), serde_json::to_vec(&manifests[0]).unwrap())
            .unwrap();
        std::fs::remove_file(root.join(GENERATIONS).join(names[0]).join(MANIFEST_FILE)).unwrap();
        let bucket = Bucket::new(Location::parse(&format!("file://{}", root.display())).unwrap());
        assert!(bucket.prune(1, names[1]).await.unwrap().is_empty());
        assert!(root.join(GENERATIONS).join(names[0]).join("part-000.snap").exists());
    }
}
