//! Where a file lives: a local path or an object-store URL (`file://`, `s3://bucket/prefix`,
//! `gs://`, `az://`), through the Apache Arrow project's `object_store` — configured the way its
//! users expect, from the environment (`AWS_ENDPOINT_URL`, `AWS_REGION`,
//! `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`, `AWS_ALLOW_HTTP`; the `GOOGLE_*` and `AZURE_*`
//! equivalents).
//!
//! A location prints as its URL without credentials or query: that is all logs and metrics
//! ever see.

use std::fmt;
use std::sync::Arc;

use std::io::Read as _;

use bytes::Bytes;
use object_store::buffered::BufWriter;
use object_store::path::{Path as StorePath, PathPart};
use object_store::{
    GetOptions, ObjectStore, ObjectStoreExt as _, PutMode, PutOptions, PutPayload, UpdateVersion,
};
use tokio::io::AsyncWriteExt as _;
use url::Url;

/// Bytes per ranged read of a download and per part of an upload.
const CHUNK: u64 = 16 << 20;

/// How many reads of local files (whole objects, listings, metadata; deletes too) may run at
/// once, per location (and the locations derived from it: siblings share the count). Writes
/// are bounded in time only ([`LOCAL_ACCESS_TIMEOUT`]).
///
/// object_store reads local files on blocking threads, which a timeout cannot stop: a read
/// that hangs (a FIFO at the manifest's path, a hung network mount) kept its thread for good,
/// and a poll every few seconds took another, until tokio's blocking pool (512 threads) was
/// used up, and DNS lookups and blocklist reads waited with everything else. Past this many,
/// a read fails at once ([`RemoteError::Hung`]), counted like any failed poll.
pub const MAX_LOCAL_ACCESSES: usize = 4;

/// How long one access to a local file (metadata, a listing, a whole object, one range of a
/// download, a delete; a write, one part of an upload) may take before it fails
/// ([`RemoteError::TimedOut`]) and is retried like any failed read. A remote store's accesses
/// end with its client's timeouts; a local one on a hung network mount never would, and a
/// follower stalled mid-download would say nothing. The thread stays held until the access
/// ends (a blocking read cannot be stopped), counted in [`MAX_LOCAL_ACCESSES`] for all but
/// writes. A 16 MiB range takes well under a second from any working disk.
pub const LOCAL_ACCESS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Why an access to the store (a read, a listing, a delete) failed.
enum AccessError {
    Store(object_store::Error),
    /// The object holds more bytes than the read may take.
    TooLarge {
        /// Its size.
        size: u64,
        /// The most the read may take.
        max: u64,
    },
    /// Every local access permit is held by one that has not ended.
    Hung,
    /// A local access took longer than [`LOCAL_ACCESS_TIMEOUT`].
    TimedOut,
}

/// A remote or local failure, with the location it concerns.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The text is neither a path nor a URL of a supported store.
    #[error(
        "{location:?} is not a path or a supported URL (s3://, gs://, az://, file://): {message}"
    )]
    BadLocation {
        /// What was given.
        location: String,
        /// Why it was refused.
        message: String,
    },
    /// The store refused or failed.
    #[error("{location}: {message}")]
    Store {
        /// Where (no credentials).
        location: String,
        /// The store's error, fit for a log line ([`store_message`]).
        message: String,
    },
    /// A local file could not be read or written.
    #[error("{path}: {source}")]
    Local {
        /// The file.
        path: std::path::PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Earlier accesses to local files (reads, listings, deletes) are still running (a FIFO at
    /// the path, a hung mount): no new one is started ([`MAX_LOCAL_ACCESSES`]).
    #[error(
        "{location}: {MAX_LOCAL_ACCESSES} earlier accesses to local files (reads, listings, \
         deletes) have not finished"
    )]
    Hung {
        /// Where.
        location: String,
    },
    /// The store did not answer in time.
    #[error("{location}: no answer in {seconds} s")]
    TimedOut {
        /// Where.
        location: String,
        /// How long was waited.
        seconds: u64,
    },
    /// A conditional write lost: someone else changed the object first.
    #[error("{location} was changed by someone else")]
    Conflict {
        /// Where.
        location: String,
    },
    /// The object is not the size it must be: larger than a read of its kind may take (a
    /// manifest), or not the size its manifest names (a partition), so it is not fetched; or
    /// its download came out another size than the store announced.
    #[error("{location} holds {size} bytes, {expected}")]
    WrongSize {
        /// Where.
        location: String,
        /// Its size, as the store reports it.
        size: u64,
        /// What was expected ("at most N", "the manifest says N").
        expected: String,
    },
}

/// A file's location.
#[derive(Clone)]
pub struct Location {
    store: Arc<dyn ObjectStore>,
    path: StorePath,
    /// Permits for accesses to local files ([`MAX_LOCAL_ACCESSES`]), shared with derived
    /// locations.
    local_accesses: Arc<tokio::sync::Semaphore>,
    /// How long one access to a local file may take ([`LOCAL_ACCESS_TIMEOUT`]).
    local_access_timeout: std::time::Duration,
    /// `scheme://bucket/path`, for messages.
    shown: String,
}

impl fmt::Debug for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

/// What a conditional read found.
#[derive(Debug)]
pub enum Fetched {
    /// The object differs from the known version: its bytes and ETag.
    Changed(Bytes, Option<String>),
    /// The known version is still current.
    Unchanged,
    /// There is no object.
    Absent,
}

/// Which version of an object was read. Stores compare different fields in a conditional
/// write: S3 and Azure the ETag, GCS the object's generation (`version`), so both are kept;
/// with the ETag alone a second publish to `gs://` failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tag {
    /// The object's ETag.
    pub e_tag: Option<String>,
    /// The store's version of it (GCS: its generation).
    pub version: Option<String>,
}

impl Tag {
    fn of(meta: &object_store::ObjectMeta) -> Tag {
        Tag { e_tag: meta.e_tag.clone(), version: meta.version.clone() }
    }

    /// Whether a conditional write can name this version at all.
    pub fn is_known(&self) -> bool {
        self.e_tag.is_some() || self.version.is_some()
    }
}

/// The version of an object a conditional write expects to replace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// No object may exist yet.
    Absent,
    /// The object read before.
    Tag(Tag),
}

impl Expect {
    fn mode(self) -> PutMode {
        match self {
            Expect::Absent => PutMode::Create,
            Expect::Tag(tag) => {
                PutMode::Update(UpdateVersion { e_tag: tag.e_tag, version: tag.version })
            }
        }
    }
}

impl Location {
    /// Parses a local path or a store URL.
    pub fn parse(text: &str) -> Result<Location, RemoteError> {
        let bad =
            |message: String| RemoteError::BadLocation { location: shown_input(text), message };
        let url = match url_of(text) {
            Some(url) => url,
            None => {
                let absolute = std::path::absolute(text).map_err(|e| bad(e.to_string()))?;
                Url::from_file_path(&absolute).map_err(|()| bad("not an absolute path".into()))?
            }
        };
        // A builder's error may repeat the URL it was given, query (a SAS token) and user info
        // (a password) included: shown as `shown_input` shows it, never as given.
        let built = |e: object_store::Error| {
            let shown = shown_input(text);
            bad(e.to_string().replace(url.as_str(), &shown).replace(text, &shown))
        };
        let (store, path) = match url.scheme() {
            "s3" | "s3a" => {
                let store = object_store::aws::AmazonS3Builder::from_env()
                    .with_url(url.as_str())
                    .build()
                    .map_err(built)?;
                (Arc::new(store) as Arc<dyn ObjectStore>, url_path(&url).map_err(bad)?)
            }
            "gs" => {
                let store = object_store::gcp::GoogleCloudStorageBuilder::from_env()
                    .with_url(url.as_str())
                    .build()
                    .map_err(built)?;
                (Arc::new(store) as Arc<dyn ObjectStore>, url_path(&url).map_err(bad)?)
            }
            "az" | "abfs" | "abfss" | "azure" => {
                let store = object_store::azure::MicrosoftAzureBuilder::from_env()
                    .with_url(url.as_str())
                    .build()
                    .map_err(built)?;
                (Arc::new(store) as Arc<dyn ObjectStore>, url_path(&url).map_err(bad)?)
            }
            "file" => {
                let store = object_store::local::LocalFileSystem::new();
                (Arc::new(store) as Arc<dyn ObjectStore>, url_path(&url).map_err(bad)?)
            }
            other => return Err(bad(format!("unsupported scheme {other:?}"))),
        };
        let host = url.host_str().unwrap_or_default();
        let shown = format!("{}://{host}/{path}", url.scheme());
        let local_accesses = Arc::new(tokio::sync::Semaphore::new(MAX_LOCAL_ACCESSES));
        let local_access_timeout = LOCAL_ACCESS_TIMEOUT;
        Ok(Location { store, path, local_accesses, local_access_timeout, shown })
    }

    /// This location, and those derived from it, with accesses to local files bounded by
    /// `timeout` rather than [`LOCAL_ACCESS_TIMEOUT`].
    pub fn with_local_access_timeout(mut self, timeout: std::time::Duration) -> Location {
        self.local_access_timeout = timeout;
        self
    }

    /// The location of `relative` (`name` or `dir/name`) next to this one (in the same
    /// directory or prefix).
    pub fn sibling(&self, relative: &str) -> Location {
        let mut parts: Vec<PathPart<'_>> = self.path.parts().collect();
        parts.pop();
        let base = self.shown.rsplit_once('/').map_or(self.shown.as_str(), |(b, _)| b);
        self.at(parts, base, relative)
    }

    /// The location of `relative` (`name` or `dir/name`) under this one, taken as a directory
    /// or prefix.
    pub fn join(&self, relative: &str) -> Location {
        self.at(self.path.parts().collect(), self.shown.trim_end_matches('/'), relative)
    }

    /// `parts` + the `/`-separated segments of `relative`, shown as `base/relative`.
    ///
    /// Segments are kept as written: `PathPart::from` would percent-encode `~ % [ ] # ...`,
    /// which names another object (`team~x` is `team%7Ex`, and the parts of a joined path,
    /// encoded once already, twice). Only a segment that cannot be one (`.`, `..`, a control
    /// character) is escaped: a manifest names no `.` or `..` (`Manifest::validate`) and a
    /// builder writes none with control characters, and objects listed are reached by their
    /// listed paths ([`Location::objects`]).
    fn at<'a>(&self, mut parts: Vec<PathPart<'a>>, base: &str, relative: &'a str) -> Location {
        let segments = relative.split('/').filter(|s| !s.is_empty());
        parts.extend(segments.map(|s| PathPart::parse(s).unwrap_or_else(|_| PathPart::from(s))));
        self.at_path(parts.into_iter().collect(), format!("{base}/{relative}"))
    }

    /// The location of `path` in this location's store, shown as `shown`.
    fn at_path(&self, path: StorePath, shown: String) -> Location {
        Location {
            store: Arc::clone(&self.store),
            path,
            local_accesses: Arc::clone(&self.local_accesses),
            local_access_timeout: self.local_access_timeout,
            shown,
        }
    }

    /// The names of the "directories" directly under this prefix, sorted.
    pub async fn children(&self) -> Result<Vec<String>, RemoteError> {
        let (store, path) = (Arc::clone(&self.store), self.path.clone());
        let list =
            async move { store.list_with_delimiter(Some(&path)).await.map_err(AccessError::Store) };
        let listed = self.bounded(list).await.map_err(|e| self.access_failed(e))?;
        let mut names: Vec<String> =
            listed.common_prefixes.iter().filter_map(|p| p.filename().map(str::to_owned)).collect();
        names.sort();
        Ok(names)
    }

    /// Whether there is an object here.
    pub async fn exists(&self) -> Result<bool, RemoteError> {
        Ok(self.head().await?.is_some())
    }

    /// The object's ETag, as the store reports it now (`None`: no object, or no ETag).
    pub async fn e_tag(&self) -> Result<Option<String>, RemoteError> {
        Ok(self.head().await?.and_then(|meta| meta.e_tag))
    }

    /// The object's metadata; `None` when there is no object.
    async fn head(&self) -> Result<Option<object_store::ObjectMeta>, RemoteError> {
        let (store, path) = (Arc::clone(&self.store), self.path.clone());
        match self.bounded(async move { store.head(&path).await.map_err(AccessError::Store) }).await
        {
            Ok(meta) => Ok(Some(meta)),
            Err(AccessError::Store(object_store::Error::NotFound { .. })) => Ok(None),
            Err(e) => Err(self.access_failed(e)),
        }
    }

    /// The last segment of the path (an object's name).
    pub fn name(&self) -> Option<String> {
        self.path.filename().map(str::to_owned)
    }

    /// What names the object whatever scheme named it: two locations with the same id are
    /// one object. Hadoop's `s3a://` is another name of `s3://`. (Azure's URL forms put the
    /// container in different places, so they are told apart as written.)
    pub fn object_id(&self) -> String {
        match self.shown.strip_prefix("s3a://") {
            Some(rest) => format!("s3://{rest}"),
            None => self.shown.clone(),
        }
    }

    /// Every object under this prefix, at any depth: its path relative to it, and its
    /// location exactly as listed (a key may hold what a joined name would escape, a control
    /// character say); sorted by path.
    pub async fn objects(&self) -> Result<Vec<(String, Location)>, RemoteError> {
        let mut found: Vec<(String, Location)> = Vec::new();
        for object in self.listing().await? {
            let Some(parts) = object.location.prefix_match(&self.path) else { continue };
            let relative = parts.map(|p| p.as_ref().to_owned()).collect::<Vec<_>>().join("/");
            let shown = format!("{}/{relative}", self.shown.trim_end_matches('/'));
            found.push((relative, self.at_path(object.location, shown)));
        }
        found.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(found)
    }

    /// When the newest object under this prefix was written, in Unix milliseconds by the
    /// store's clock (which SigV4 keeps within minutes of a client's); `None`: no object.
    pub async fn last_written_ms(&self) -> Result<Option<i64>, RemoteError> {
        Ok(self.listing().await?.iter().map(|o| o.last_modified.timestamp_millis()).max())
    }

    /// Every object under this prefix, at any depth.
    async fn listing(&self) -> Result<Vec<object_store::ObjectMeta>, RemoteError> {
        let mut found = Vec::new();
        let mut pending = vec![self.path.clone()];
        while let Some(prefix) = pending.pop() {
            let listed = self.list_level(prefix).await?;
            pending.extend(listed.common_prefixes);
            found.extend(listed.objects);
        }
        Ok(found)
    }

    /// The objects and common prefixes directly under `prefix`.
    async fn list_level(&self, prefix: StorePath) -> Result<object_store::ListResult, RemoteError> {
        let store = Arc::clone(&self.store);
        let list = async move {
            store.list_with_delimiter(Some(&prefix)).await.map_err(AccessError::Store)
        };
        self.bounded(list).await.map_err(|e| self.access_failed(e))
    }

    /// Deletes every object under this prefix (a generation's directory). Each delete of a
    /// local file is bounded as a read is: an unlink on a hung mount hangs as a read does.
    pub async fn delete_all(&self) -> Result<(), RemoteError> {
        for object in self.list_level(self.path.clone()).await?.objects {
            let store = Arc::clone(&self.store);
            let delete =
                async move { store.delete(&object.location).await.map_err(AccessError::Store) };
            match self.bounded(delete).await {
                Ok(()) | Err(AccessError::Store(object_store::Error::NotFound { .. })) => {}
                Err(e) => return Err(self.access_failed(e)),
            }
        }
        Ok(())
    }

    /// Copies the object into the local file `to` (written atomically, in ranged reads that
    /// all must come from one version of it); `false` when there is no object (or it is
    /// deleted midway). Large files (states, partitions) never sit whole in memory.
    pub async fn download(&self, to: &std::path::Path) -> Result<bool, RemoteError> {
        let Some((staged, _)) = self.download_staged(to, None, &mut 0).await? else {
            return Ok(false);
        };
        off_workers(move || staged.commit())
            .await
            .map_err(|e| RemoteError::Local { path: to.to_owned(), source: e })?;
        Ok(true)
    }

    /// [`Location::download`] without the last step: the complete, fsynced copy waits at
    /// [`crate::atomic::Staged::temp`] for the caller to check it before it replaces `to`.
    /// With `size`, an object of any other size is refused before a byte is written: a file
    /// a manifest names has the size it names, and anything else would only fill the disk.
    /// Each range's bytes are added to `fetched` once it is received, a download that fails
    /// midway's too: they were transferred (and billed) all the same.
    pub async fn download_staged(
        &self,
        to: &std::path::Path,
        size: Option<u64>,
        fetched: &mut u64,
    ) -> Result<Option<(crate::atomic::Staged, Option<String>)>, RemoteError> {
        let Some(meta) = self.head().await? else { return Ok(None) };
        if let Some(expected) = size.filter(|&n| n != meta.size) {
            return Err(self.wrong_size(meta.size, format!("the manifest says {expected}")));
        }
        let io = |e: std::io::Error| RemoteError::Local { path: to.to_owned(), source: e };
        // (Creating it clears the stale temporaries beside it: a directory read, off the workers.)
        let target = to.to_owned();
        let (file, staged) =
            off_workers(move || crate::atomic::staging_file(&target)).await.map_err(io)?;
        let complete = self.fetch_into(file, &meta, to, fetched).await;
        if !matches!(complete, Ok(true)) {
            // Removing a partition-sized file (its room reserved in full) frees its blocks: a
            // while for a file system, and no async worker's to spend.
            let _ = off_workers(move || {
                drop(staged);
                Ok(())
            })
            .await;
            return complete.map(|_| None);
        }
        Ok(Some((staged, meta.e_tag)))
    }

    /// Fills `file` (the temporary copy of `to`) with the object `meta` describes and fsyncs
    /// it, adding each range's bytes to `fetched`; `false` when the object was deleted midway.
    async fn fetch_into(
        &self,
        file: std::fs::File,
        meta: &object_store::ObjectMeta,
        to: &std::path::Path,
        fetched: &mut u64,
    ) -> Result<bool, RemoteError> {
        let io = |e: std::io::Error| RemoteError::Local { path: to.to_owned(), source: e };
        // Room for the whole object first: a full disk fails before a byte is fetched.
        let size = meta.size;
        let mut file = off_workers(move || crate::atomic::reserve(&file, size).map(|()| file))
            .await
            .map_err(io)?;
        let mut at = 0;
        while at < meta.size {
            let end = meta.size.min(at + CHUNK);
            let options = GetOptions {
                range: Some((at..end).into()),
                if_match: meta.e_tag.clone(),
                ..GetOptions::default()
            };
            let (store, path) = (Arc::clone(&self.store), self.path.clone());
            let range = async move {
                let got = store.get_opts(&path, options).await.map_err(AccessError::Store)?;
                got.bytes().await.map_err(AccessError::Store)
            };
            let bytes = match self.bounded(range).await {
                Ok(bytes) => bytes,
                // Deleted since it was looked up (a prune): gone, not a store failure.
                Err(AccessError::Store(object_store::Error::NotFound { .. })) => return Ok(false),
                Err(e) => return Err(self.access_failed(e)),
            };
            *fetched += bytes.len() as u64;
            // A range answered short or long (a store cut off, or one ignoring ranges) would
            // leave a file of the wrong length: logs and the blocklist carry no checksum. The
            // store's failure, not a wrong object (whose size the HEAD above already said).
            if bytes.len() as u64 != end - at {
                let message = format!("a range of {} bytes answered {}", end - at, bytes.len());
                return Err(RemoteError::Store { location: self.shown.clone(), message });
            }
            file = off_workers(move || {
                let mut file = file;
                std::io::Write::write_all(&mut file, &bytes).map(|()| file)
            })
            .await
            .map_err(io)?;
            at = end;
        }
        off_workers(move || file.sync_all()).await.map_err(io)?;
        Ok(true)
    }

    /// Writes the local file `from` here (in parts when it is large), replacing whatever is
    /// there. Readers see the old object or the whole new one. A failure seen while the parts
    /// go up aborts the upload: a multipart upload left open keeps its parts, billed, in the
    /// bucket until a lifecycle rule ends it. Most part failures are only seen at the
    /// completion, though (parts go up eight at a time, the last one at the completion), and a
    /// failed completion cannot be aborted (object_store's writer, once shut down, panics at an
    /// abort): those uploads are the lifecycle rule's.
    pub async fn upload(&self, from: &std::path::Path) -> Result<(), RemoteError> {
        let mut writer = BufWriter::new(Arc::clone(&self.store), self.path.clone());
        if let Err(e) = self.write_parts(from, &mut writer).await {
            let _ = self.timed(writer.abort()).await;
            return Err(e);
        }
        let completed = async {
            writer
                .shutdown()
                .await
                .map_err(|e| object_store::Error::Generic { store: "upload", source: e.into() })
        };
        self.timed(completed).await
    }

    /// [`Self::upload`]'s parts.
    async fn write_parts(
        &self,
        from: &std::path::Path,
        writer: &mut BufWriter,
    ) -> Result<(), RemoteError> {
        let io = |source| RemoteError::Local { path: from.to_owned(), source };
        let mut file = std::fs::File::open(from).map_err(io)?;
        loop {
            let mut chunk = Vec::with_capacity(CHUNK as usize);
            if file.by_ref().take(CHUNK).read_to_end(&mut chunk).map_err(io)? == 0 {
                return Ok(());
            }
            self.timed(writer.put(Bytes::from(chunk))).await?;
        }
    }

    /// `write` to this location's store, waited for [`LOCAL_ACCESS_TIMEOUT`] at most when the
    /// location is local: a builder publishing to a hung mount would otherwise hang for good,
    /// holding its lock, and every later build would fail on it. A write takes none of the
    /// [`MAX_LOCAL_ACCESSES`] permits: only one-shot commands write (a build's publication, a
    /// rollback), and one that times out ends without waiting for its hung thread (the CLI's
    /// `block_on`). (A follower's polls, which go on for ever, only read.)
    async fn timed<T>(
        &self,
        write: impl std::future::Future<Output = Result<T, object_store::Error>>,
    ) -> Result<T, RemoteError> {
        if !self.is_local() {
            return write.await.map_err(|e| self.failed(e));
        }
        match tokio::time::timeout(self.local_access_timeout, write).await {
            Ok(written) => written.map_err(|e| self.failed(e)),
            Err(_) => Err(self.access_failed(AccessError::TimedOut)),
        }
    }

    fn failed(&self, e: object_store::Error) -> RemoteError {
        match e {
            object_store::Error::Precondition { .. }
            | object_store::Error::AlreadyExists { .. } => {
                RemoteError::Conflict { location: self.shown.clone() }
            }
            e => RemoteError::Store { location: self.shown.clone(), message: store_message(&e) },
        }
    }

    fn wrong_size(&self, size: u64, expected: String) -> RemoteError {
        RemoteError::WrongSize { location: self.shown.clone(), size, expected }
    }

    /// The object's body when it holds at most `max` bytes (checked before any is read: the
    /// reader allocates what the store says the object holds), and its metadata.
    async fn read(
        &self,
        options: GetOptions,
        max: u64,
    ) -> Result<(Bytes, object_store::ObjectMeta), AccessError> {
        let (store, path) = (Arc::clone(&self.store), self.path.clone());
        self.bounded(async move {
            let r = store.get_opts(&path, options).await.map_err(AccessError::Store)?;
            if r.meta.size > max {
                return Err(AccessError::TooLarge { size: r.meta.size, max });
            }
            let meta = r.meta.clone();
            Ok((r.bytes().await.map_err(AccessError::Store)?, meta))
        })
        .await
    }

    /// `access`, which for a local location runs in a task of its own that holds one of
    /// [`MAX_LOCAL_ACCESSES`] permits until it ends, and is waited for [`LOCAL_ACCESS_TIMEOUT`]
    /// at most (or what [`Location::with_local_access_timeout`] set).
    async fn bounded<T: Send + 'static>(
        &self,
        access: impl std::future::Future<Output = Result<T, AccessError>> + Send + 'static,
    ) -> Result<T, AccessError> {
        if !self.is_local() {
            return access.await;
        }
        let permit =
            Arc::clone(&self.local_accesses).try_acquire_owned().map_err(|_| AccessError::Hung)?;
        let task = tokio::spawn(async move {
            let _permit = permit;
            access.await
        });
        let joined = tokio::time::timeout(self.local_access_timeout, task).await;
        joined
            .map_err(|_| AccessError::TimedOut)?
            .map_err(|e| AccessError::Store(object_store::Error::JoinError { source: e }))?
    }

    /// The error of a failed access that is neither "not found" nor "not modified".
    fn access_failed(&self, e: AccessError) -> RemoteError {
        match e {
            AccessError::Store(e) => self.failed(e),
            AccessError::TooLarge { size, max } => {
                self.wrong_size(size, format!("at most {max} may be read"))
            }
            AccessError::Hung => RemoteError::Hung { location: self.shown.clone() },
            AccessError::TimedOut => RemoteError::TimedOut {
                location: self.shown.clone(),
                seconds: self.local_access_timeout.as_secs(),
            },
        }
    }

    /// The object's bytes (at most `max` of them) and its version; `None` when there is no
    /// object.
    pub async fn get(&self, max: u64) -> Result<Option<(Bytes, Tag)>, RemoteError> {
        match self.read(GetOptions::default(), max).await {
            Ok((bytes, meta)) => Ok(Some((bytes, Tag::of(&meta)))),
            Err(AccessError::Store(object_store::Error::NotFound { .. })) => Ok(None),
            Err(e) => Err(self.access_failed(e)),
        }
    }

    /// The object (at most `max` bytes) when it differs from the version tagged `known`
    /// (`Unchanged` otherwise): what a poll costs is one conditional request.
    pub async fn get_if_changed(
        &self,
        known: Option<&str>,
        max: u64,
    ) -> Result<Fetched, RemoteError> {
        let options =
            GetOptions { if_none_match: known.map(str::to_owned), ..GetOptions::default() };
        match self.read(options, max).await {
            Ok((bytes, meta)) => Ok(Fetched::Changed(bytes, meta.e_tag)),
            Err(AccessError::Store(object_store::Error::NotModified { .. })) => {
                Ok(Fetched::Unchanged)
            }
            Err(AccessError::Store(object_store::Error::NotFound { .. })) => Ok(Fetched::Absent),
            Err(e) => Err(self.access_failed(e)),
        }
    }

    /// Whether the location is on this machine (a path or `file://`): cheap to poll often.
    pub fn is_local(&self) -> bool {
        self.shown.starts_with("file://")
    }

    /// Writes `bytes`, replacing whatever is there.
    pub async fn put(&self, bytes: Bytes) -> Result<(), RemoteError> {
        let put = self.store.put_opts(&self.path, PutPayload::from(bytes), PutOptions::default());
        self.timed(put).await.map(|_| ())
    }

    /// Writes `bytes` only if the object is still what `expect` says
    /// ([`RemoteError::Conflict`] otherwise): the manifest's publication.
    pub async fn put_if(&self, bytes: Bytes, expect: Expect) -> Result<(), RemoteError> {
        let options = PutOptions { mode: expect.mode(), ..PutOptions::default() };
        let put = self.store.put_opts(&self.path, PutPayload::from(bytes), options);
        self.timed(put).await.map(|_| ())
    }
}

/// Runs a write to the local disk on a blocking thread. A follower downloads while its server
/// answers requests on the same runtime: a 16 MiB write can wait on writeback throttling, and
/// the fsync of a whole partition for seconds, and on an async worker either stalls every
/// request that worker holds.
async fn off_workers<T: Send + 'static>(
    write: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> std::io::Result<T> {
    tokio::task::spawn_blocking(write).await.map_err(std::io::Error::other)?
}

/// What an error may show of a location as given: no user info, query or fragment (those of
/// a presigned URL are credentials, and errors are logged).
fn shown_input(text: &str) -> String {
    match url_of(text) {
        Some(mut url) => {
            // Neither fails for a URL with a host; one without has no user info to clear.
            let _ = url.set_username("");
            let _ = url.set_password(None);
            url.set_query(None);
            url.set_fragment(None);
            url.to_string()
        }
        None => text.to_owned(),
    }
}

/// The schemes [`Location::parse`] opens.
const SCHEMES: [&str; 8] = ["s3", "s3a", "gs", "az", "abfs", "abfss", "azure", "file"];

/// `text` as a URL, when it is one: its scheme is one this module opens, or it is followed by
/// `://` (then [`Location::parse`] says the scheme is unsupported). Anything else is a path,
/// even one the URL grammar accepts: `hour-13:00.tsv` or `snap-2026-01-05T13:00.snap` parse
/// as URLs of the schemes `hour-13` and `snap-2026-01-05t13`, and `C:\logs` as one of `c`.
fn url_of(text: &str) -> Option<Url> {
    let url = Url::parse(text).ok()?;
    let scheme = url.scheme();
    let named = text.get(scheme.len()..).is_some_and(|rest| rest.starts_with("://"));
    (SCHEMES.contains(&scheme) || named).then_some(url)
}

/// `text` as a local path when it names one (a plain path or a `file://` URL); `None` for an
/// object-store URL.
pub fn local_path(text: &str) -> Option<std::path::PathBuf> {
    match url_of(text) {
        Some(url) if url.scheme() == "file" => url.to_file_path().ok(),
        Some(_) => None,
        None => Some(text.into()),
    }
}

/// [`local_path`] of a path given as one (a command-line argument). One that is not UTF-8 is
/// taken as a local path as it is (read lossily, `log\xff.tsv` named another file): an
/// object-store URL is text, and a `file://` URL of such bytes is not supported.
pub fn local_path_of(path: &std::path::Path) -> Option<std::path::PathBuf> {
    match path.to_str() {
        Some(text) => local_path(text),
        None => Some(path.to_owned()),
    }
}

/// The object path of a URL (`s3://bucket/a/b` -> `a/b`). One the store cannot name (an empty
/// segment from `$BUCKET/` + `/prod`, a byte that is not UTF-8) is an error: taken as the
/// bucket's root, a build would publish there and prune its `generations/`.
fn url_path(url: &Url) -> Result<StorePath, String> {
    StorePath::from_url_path(url.path()).map_err(|e| e.to_string())
}

/// The longest store error message kept, in characters.
const MAX_STORE_MESSAGE: usize = 400;

/// What a store's error says, fit for a log line that repeats at every failed poll: the XML
/// error document a store sends back is cut to its `Code` and `Message` (AWS's
/// `SignatureDoesNotMatch` also holds the access key id and the canonical request), and the
/// whole to [`MAX_STORE_MESSAGE`] characters (a misconfigured endpoint may answer anything).
fn store_message(e: &object_store::Error) -> String {
    let full = crate::error::chain(e);
    let (head, body) = full.split_at(full.find('<').unwrap_or(full.len()));
    let mut out = head.trim_end().trim_end_matches(':').to_owned();
    for name in ["Code", "Message"] {
        if let Some(value) = xml_element(body, name) {
            out.push_str(&format!(" ({name}: {value})"));
        }
    }
    match out.char_indices().nth(MAX_STORE_MESSAGE) {
        Some((at, _)) => format!("{}...", &out[..at]),
        None => out,
    }
}

/// The text of the first `<name>...</name>` in `xml`.
fn xml_element<'a>(xml: &'a str, name: &str) -> Option<&'a str> {
    let start = xml.find(&format!("<{name}>"))? + name.len() + 2;
    let len = xml[start..].find(&format!("</{name}>"))?;
    Some(xml[start..start + len].trim())
}

#[cfg(test)]
#[path = "location_tests.rs"]
mod tests;
