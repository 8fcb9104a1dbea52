//! Names the release a binary was built from: `TYPEAHEAD_RELEASE`, the crate version and a
//! digest of the sources that shape an answer (the `.rs` files of this crate's `src` and of
//! `core/src`, and `Cargo.lock` for the libraries). Only `.rs` files: an editor's backup or a
//! stray temporary file must not make two builds of the same sources two releases.
//!
//! An answer's ETag carries it ([`typeahead::http::etag`]): a snapshot's id says what data an
//! answer comes from, not how it was matched, so a release with a new look-alike table or a
//! tier fix kept every tag, and a CDN revalidating a cached answer got `304 Not Modified` and
//! kept the old body. Not a git commit: the container build has no `.git`, and a tree with
//! changes not yet committed is another release too.

use std::path::{Path, PathBuf};

fn main() {
    let mut files = Vec::new();
    for dir in ["src", "core/src"] {
        println!("cargo:rerun-if-changed={dir}");
        collect(Path::new(dir), &mut files);
    }
    println!("cargo:rerun-if-changed=Cargo.lock");
    files.push(PathBuf::from("Cargo.lock"));
    files.sort();
    // FNV-1a, 64 bits, over each file's path and contents.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for file in &files {
        let contents = std::fs::read(file).unwrap_or_default();
        let name = file.to_string_lossy();
        for &byte in name.as_bytes().iter().chain([0u8].iter()).chain(contents.iter()) {
            hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    println!("cargo:rustc-env=TYPEAHEAD_RELEASE={version}+{hash:016x}");
}

/// Every `.rs` file under `dir`, at any depth.
fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        // The entry's own type: a symbolic link is not followed (a loop would never end).
        let Ok(kind) = entry.file_type() else { continue };
        let path = entry.path();
        if kind.is_dir() {
            collect(&path, files);
        } else if kind.is_file() && path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}
