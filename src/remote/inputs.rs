//! `typeahead build --input s3://bucket/logs/`: log files in object storage, downloaded into a
//! scratch directory before the build reads them (the builder reads local files only, in
//! parallel and more than once when it counts lines first).
//!
//! A URL names one object or a prefix; every object under a prefix is fetched, keeping its
//! relative name (the extension says how it is compressed). Lines at or before the state's
//! watermark are skipped by the build as for local files, so a bucket lifecycle rule that
//! expires old logs keeps each hourly download small.

use std::path::{Path, PathBuf};

use super::{Location, RemoteError, local_path_of};

/// The local paths of `inputs`: paths as they are, URLs downloaded under `scratch`.
pub async fn fetch(inputs: &[PathBuf], scratch: &Path) -> Result<Vec<PathBuf>, RemoteError> {
    let mut local = Vec::with_capacity(inputs.len());
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
            let name = location.name().unwrap_or_else(|| "log".to_owned());
            let to = dir.join(name);
            create_parent(&to)?;
            if !location.download(&to).await? {
                return Err(not_found(input.clone(), "no such object"));
            }
        }
        for (name, object) in listed {
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
        }
        local.push(dir);
    }
    Ok(local)
}

fn not_found(path: PathBuf, why: &str) -> RemoteError {
    RemoteError::Local { path, source: std::io::Error::new(std::io::ErrorKind::NotFound, why) }
}

fn create_parent(path: &Path) -> Result<(), RemoteError> {
    let parent = path.parent().unwrap_or(path);
    std::fs::create_dir_all(parent)
        .map_err(|source| RemoteError::Local { path: parent.to_owned(), source })
}
