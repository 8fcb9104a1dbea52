//! `typeahead build --input s3://bucket/logs/`: log files in object storage, downloaded into a
//! scratch directory before the build reads them (the builder reads local files only, in
//! parallel and more than once when it counts lines first).
//!
//! A URL names one object or a prefix; every object under a prefix is fetched, keeping its
//! relative name (the extension says how it is compressed). Lines at or before the state's
//! watermark are skipped by the build as for local files, so a bucket lifecycle rule that
//! expires old logs keeps each hourly download small.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::{Location, RemoteError, local_path_of};

/// The local paths of `inputs`: paths as they are, URLs downloaded under `scratch`.
///
/// An object named more than once (a URL repeated, a prefix and one of its objects, `logs` and
/// `logs/`, `s3://` and `s3a://`: [`Location::object_id`]) is fetched once, at its first place, as
/// a local file named twice is read once: fetched twice, into two files, its searches would count
/// double, and for good once a state holds its hours. Objects under a prefix whose name starts with
/// a dot are not fetched: in a local directory such a file is not read either.
pub async fn fetch(inputs: &[PathBuf], scratch: &Path) -> Result<Vec<PathBuf>, RemoteError> {
    let mut local = Vec::with_capacity(inputs.len());
    let mut fetched = HashSet::new();
    for (n, input) in inputs.iter().enumerate() {
        if let Some(path) = local_path_of(input) {
            local.push(path);
            continue;
        }
        let location = Location::parse(&input.to_string_lossy())?;
        let dir = scratch.join(format!("input-{n}"));
        let listed = location.objects().await?;
        if listed.is_empty() {
            // Not a prefix: one object (or nothing, which the build reports as missing).
            if !first_time(&mut fetched, &location) {
                continue;
            }
            let name = location.name().unwrap_or_else(|| "log".to_owned());
            let to = dir.join(name);
            create_parent(&to)?;
            if !location.download(&to).await? {
                return Err(not_found(input.clone(), "no such object"));
            }
            // The file itself: named, it is read whatever its name (as a local one is).
            local.push(to);
            continue;
        }
        let mut any = false;
        for (name, object) in listed {
            if name.split('/').any(|part| part.starts_with('.')) {
                tracing::warn!(object = %object, "hidden object (a name starting with a dot) not read, as a hidden file is not");
                continue;
            }
            if !first_time(&mut fetched, &object) {
                continue;
            }
            let to = dir.join(&name);
            create_parent(&to)?;
            // Listed but not found: a build without it would count its hours short, and a
            // state would then take them as late for good. The next run fetches it again.
            if !object.download(&to).await? {
                return Err(not_found(
                    input.join(&name),
                    "listed under the prefix, but gone when fetched",
                ));
            }
            any = true;
        }
        if any {
            local.push(dir);
        }
    }
    Ok(local)
}

/// Whether `object` is fetched for the first time (and from now on, it was); says so when not.
fn first_time(fetched: &mut HashSet<String>, object: &Location) -> bool {
    let first = fetched.insert(object.object_id());
    if !first {
        tracing::warn!(object = %object, "input named more than once; it is read once");
    }
    first
}

fn not_found(path: PathBuf, why: &str) -> RemoteError {
    RemoteError::Local { path, source: std::io::Error::new(std::io::ErrorKind::NotFound, why) }
}

fn create_parent(path: &Path) -> Result<(), RemoteError> {
    let parent = path.parent().unwrap_or(path);
    std::fs::create_dir_all(parent)
        .map_err(|source| RemoteError::Local { path: parent.to_owned(), source })
}
