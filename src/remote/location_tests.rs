//! Tests of [`super`]: local paths and `file://` URLs read and written for real, local access
//! bounded in time, objects refused by size, and what errors and logs show of a location.
//! (Real object stores are exercised by the SeaweedFS tests in `tests/`.)

use super::*;
use crate::manifest::MAX_MANIFEST_BYTES;

#[tokio::test]
async fn local_paths_and_file_urls_read_and_write_conditionally() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("manifest.json");
    let here = Location::parse(file.to_str().unwrap()).unwrap();
    assert!(here.get(MAX_MANIFEST_BYTES).await.unwrap().is_none());
    here.put_if(Bytes::from_static(b"one"), Expect::Absent).await.unwrap();
    let again = here.put_if(Bytes::from_static(b"two"), Expect::Absent).await;
    assert!(matches!(again, Err(RemoteError::Conflict { .. })), "{again:?}");
    let url = Location::parse(&format!("file://{}", file.display())).unwrap();
    let (bytes, _) = url.get(MAX_MANIFEST_BYTES).await.unwrap().unwrap();
    assert_eq!(&bytes[..], b"one");
    let part = url.sibling("part-000.snap");
    part.put(Bytes::from_static(b"snap")).await.unwrap();
    assert_eq!(std::fs::read(dir.path().join("part-000.snap")).unwrap(), b"snap");
    assert!(part.to_string().ends_with("/part-000.snap"), "{part}");
}

/// Reads of a local manifest that hang (a FIFO at its path) hold at most
/// [`MAX_LOCAL_ACCESSES`] threads; past them a read fails at once, and once they end (here:
/// a writer opens the FIFO) reads work again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hung_local_reads_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("manifest.json");
    assert!(std::process::Command::new("mkfifo").arg(&path).status().unwrap().success());
    let here = Location::parse(path.to_str().unwrap()).unwrap();
    let wait = std::time::Duration::from_millis(100);
    for _ in 0..MAX_LOCAL_ACCESSES {
        let read = tokio::time::timeout(wait, here.get(MAX_MANIFEST_BYTES)).await;
        assert!(read.is_err(), "the FIFO answered: {read:?}");
    }
    let sibling = here.sibling("manifest.json");
    let refused = tokio::time::timeout(wait, sibling.get_if_changed(None, 10)).await;
    assert!(matches!(refused, Ok(Err(RemoteError::Hung { .. }))), "{refused:?}");
    // A writer lets every blocked open through; a regular file then takes the FIFO's place.
    let writer = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    drop(writer);
    std::fs::remove_file(&path).unwrap();
    std::fs::write(&path, b"{}").unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match here.get(MAX_MANIFEST_BYTES).await {
            Ok(Some((bytes, _))) => break assert_eq!(&bytes[..], b"{}"),
            Err(RemoteError::Hung { .. }) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            other => panic!("{other:?}"),
        }
    }
}

/// A local read that hangs (a FIFO at the path stands for a hung network mount) fails
/// after the timeout: nothing else bounds a follower's download. (A timeout of seconds;
/// paused time does not advance while a blocking read runs.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_local_read_times_out() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p0.snap");
    assert!(std::process::Command::new("mkfifo").arg(&path).status().unwrap().success());
    let timeout = std::time::Duration::from_secs(1);
    let here = Location::parse(path.to_str().unwrap()).unwrap().with_local_access_timeout(timeout);
    let started = std::time::Instant::now();
    let read = here.sibling("p0.snap").get(MAX_MANIFEST_BYTES).await;
    assert!(matches!(read, Err(RemoteError::TimedOut { seconds: 1, .. })), "{read:?}");
    assert!(started.elapsed() >= timeout);
    // Lets the blocked open through, so that its thread ends with the test.
    drop(std::fs::OpenOptions::new().write(true).open(&path).unwrap());
}

/// Writes to a local file are bounded in time too: a builder publishing to a hung mount
/// fails instead of hanging with its lock held. (A write that never ends stands for the
/// hung mount: no local file system here can be made to hang.)
#[tokio::test]
async fn local_writes_are_bounded_in_time() {
    let dir = tempfile::tempdir().unwrap();
    let timeout = std::time::Duration::from_millis(50);
    let here = Location::parse(dir.path().join("manifest.json").to_str().unwrap())
        .unwrap()
        .with_local_access_timeout(timeout);
    let hung = std::future::pending::<Result<(), object_store::Error>>();
    let written = here.sibling("p0.snap").timed(hung).await;
    assert!(matches!(written, Err(RemoteError::TimedOut { .. })), "{written:?}");
    // An upload whose completion fails is an error, not a panic (it aborted the writer
    // it had shut down): here the object's path is a directory.
    let from = dir.path().join("built.snap");
    std::fs::write(&from, b"snapshot").unwrap();
    std::fs::create_dir(dir.path().join("p1.snap")).unwrap();
    let upload = here.sibling("p1.snap").upload(&from).await;
    assert!(matches!(upload, Err(RemoteError::Store { .. })), "{upload:?}");
    // A write that ends is what it was.
    here.put(Bytes::from_static(b"{}")).await.unwrap();
    let again = here.put_if(Bytes::from_static(b"{}"), Expect::Absent).await;
    assert!(matches!(again, Err(RemoteError::Conflict { .. })), "{again:?}");
}

/// A store's XML error document keeps its code and message in the log, not the access
/// key id or the canonical request, and no message is longer than a log line should be.
#[test]
fn store_errors_keep_their_code_and_lose_the_request() {
    let body = "<?xml version=\"1.0\"?><Error><Code>SignatureDoesNotMatch</Code>\
        <Message>The request signature we calculated does not match</Message>\
        <AWSAccessKeyId>AKIATESTKEY</AWSAccessKeyId><StringToSign>AWS4</StringToSign></Error>";
    let e = object_store::Error::Generic {
        store: "S3",
        source: format!("Client error with status 403 Forbidden: {body}").into(),
    };
    let message = store_message(&e);
    assert!(!message.contains("AKIATESTKEY") && !message.contains("AWS4"), "{message}");
    assert!(message.contains("403 Forbidden"), "{message}");
    assert!(message.contains("(Code: SignatureDoesNotMatch)"), "{message}");
    assert!(message.contains("(Message: The request signature"), "{message}");
    let huge = object_store::Error::Generic { store: "S3", source: "x".repeat(1 << 20).into() };
    assert!(store_message(&huge).chars().count() <= MAX_STORE_MESSAGE + 3);
}

/// GCS replaces an object conditionally on its generation, S3 and Azure on its ETag: the
/// write names both as read, where it once named the ETag alone and every publish to
/// `gs://` after the first failed (`MissingVersion`).
#[test]
fn a_conditional_write_names_the_version_as_well_as_the_etag() {
    let meta = object_store::ObjectMeta {
        location: object_store::path::Path::from("manifest.json"),
        last_modified: Default::default(),
        size: 3,
        e_tag: Some("\"abc\"".into()),
        version: Some("1700000000000001".into()),
    };
    let tag = Tag::of(&meta);
    assert!(tag.is_known());
    let PutMode::Update(update) = Expect::Tag(tag).mode() else { panic!("not an update") };
    assert_eq!(update.e_tag.as_deref(), Some("\"abc\""));
    assert_eq!(update.version.as_deref(), Some("1700000000000001"));
    assert!(matches!(Expect::Absent.mode(), PutMode::Create));
    assert!(!Tag { e_tag: None, version: None }.is_known());
}

/// An object larger than the disk's free space is not fetched: the download fails at
/// once, as a local failure (a full disk is not the store's), and leaves no file behind.
/// (The object is sparse: it takes no room itself.)
#[tokio::test]
async fn an_object_the_disk_cannot_hold_is_not_fetched() {
    let dir = tempfile::tempdir().unwrap();
    let object = dir.path().join("p0.snap");
    let file = std::fs::File::create(&object).unwrap();
    let free = crate::atomic::available_bytes(&file).unwrap().expect("a disk of some size");
    file.set_len(free.saturating_mul(2).saturating_add(1 << 30)).unwrap();
    let here = Location::parse(object.to_str().unwrap()).unwrap();
    let to = dir.path().join("cache").join("live.snap");
    std::fs::create_dir(dir.path().join("cache")).unwrap();
    // Bounded: a download that went ahead would write until the disk was full (dropped,
    // it removes what it wrote).
    let wait = std::time::Duration::from_secs(10);
    let got = tokio::time::timeout(wait, here.download_staged(&to, None, &mut 0)).await;
    let Ok(Err(RemoteError::Local { source, .. })) = got else { panic!("{got:?}") };
    assert_eq!(source.kind(), std::io::ErrorKind::StorageFull, "{source}");
    assert!(source.to_string().contains("bytes needed"), "{source}");
    assert_eq!(std::fs::read_dir(dir.path().join("cache")).unwrap().count(), 0);
}

/// A manifest larger than a manifest can be, or a partition of another size than its
/// manifest names, is refused before it is read: nothing fills memory or the disk.
#[tokio::test]
async fn objects_of_the_wrong_size_are_refused_unread() {
    let dir = tempfile::tempdir().unwrap();
    let here = Location::parse(dir.path().join("manifest.json").to_str().unwrap()).unwrap();
    here.put(Bytes::from(vec![b' '; 100])).await.unwrap();
    let big = here.get(99).await;
    assert!(matches!(big, Err(RemoteError::WrongSize { size: 100, .. })), "{big:?}");
    assert!(matches!(here.get_if_changed(None, 99).await, Err(RemoteError::WrongSize { .. })));
    assert_eq!(here.get(100).await.unwrap().unwrap().0.len(), 100);
    let to = dir.path().join("copy");
    let mut fetched = 0;
    let other = here.download_staged(&to, Some(10), &mut fetched).await;
    assert!(matches!(other, Err(RemoteError::WrongSize { size: 100, .. })), "{other:?}");
    let names = |d: &std::path::Path| std::fs::read_dir(d).unwrap().count();
    assert_eq!((names(dir.path()), fetched), (1, 0), "no temporary file was made");
    let (staged, _) = here.download_staged(&to, Some(100), &mut fetched).await.unwrap().unwrap();
    assert_eq!(fetched, 100);
    staged.commit().unwrap();
    assert_eq!(std::fs::read(&to).unwrap().len(), 100);
}

#[test]
fn paths_and_file_urls_are_local_and_buckets_are_not() {
    assert_eq!(local_path("out/serve"), Some("out/serve".into()));
    assert_eq!(local_path("file:///tmp/serve"), Some("/tmp/serve".into()));
    assert_eq!(local_path("s3://bucket/typeahead"), None);
    assert_eq!(local_path("gs://bucket/typeahead"), None);
    // Colons in file names are not schemes.
    for path in ["hour-13:00.tsv", "snap-2026-01-05T13:00.snap", "logs/a:b", "c:x"] {
        assert_eq!(local_path(path), Some(path.into()), "{path}");
    }
    assert_eq!(local_path("https://host/x"), None, "a URL of a scheme not opened");
    // A path that is not UTF-8 is itself, not its lossy reading.
    use std::os::unix::ffi::OsStrExt;
    let odd = std::path::Path::new(std::ffi::OsStr::from_bytes(b"log\xff.tsv"));
    assert_eq!(local_path_of(odd), Some(odd.to_owned()));
    assert_eq!(local_path_of(std::path::Path::new("s3://b/x")), None);
    assert_eq!(local_path("S3://bucket/x"), None, "schemes are case-insensitive");
}

#[test]
fn join_and_sibling_take_relative_paths() {
    let root = Location::parse("s3://bucket/typeahead").unwrap();
    let part = root.join("generations/1-ab/part-000-ab.snap");
    assert_eq!(part.to_string(), "s3://bucket/typeahead/generations/1-ab/part-000-ab.snap");
    assert_eq!(part.path.parts().count(), 4, "one object path segment per name");
    let manifest = root.join("manifest.json");
    let again = manifest.sibling("generations/1-ab/part-000-ab.snap");
    assert_eq!(again.path, part.path);
}

/// Names with the characters `PathPart::from` escapes (`~ % [ ] #`) name the same
/// objects however a location is reached: `team~x` was `team%7Ex` once joined, and
/// `team%257Ex` joined twice, so a bucket build published where no server looked.
#[test]
fn joined_names_are_kept_as_written() {
    let root = Location::parse("s3://bucket/team~x/a%25b").unwrap();
    assert_eq!(root.path.as_ref(), "team~x/a%b");
    let part = root.join("generations/1~ab/part[0]#1.snap");
    assert_eq!(part.path.as_ref(), "team~x/a%b/generations/1~ab/part[0]#1.snap");
    let manifest = root.join("manifest.json");
    assert_eq!(manifest.sibling("generations/1~ab/part[0]#1.snap").path, part.path);
    assert_eq!(part.sibling("x~y").sibling("x~y").path.as_ref(), "team~x/a%b/generations/1~ab/x~y");
    assert_eq!(root.join("..").path.as_ref(), "team~x/a%b/%2E%2E", "never a way up");
}

/// Objects listed under a prefix with such names are fetched by the names listed.
#[tokio::test]
async fn listed_names_with_escapable_characters_download() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("team~x");
    std::fs::create_dir_all(logs.join("d%41y")).unwrap();
    for name in ["h1.tsv", "weird[1].tsv", "13%3A00.tsv", "d%41y/h~3.tsv"] {
        std::fs::write(logs.join(name), name).unwrap();
    }
    let prefix = Location::parse(logs.to_str().unwrap()).unwrap();
    let listed = prefix.objects().await.unwrap();
    let names: Vec<&str> = listed.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["13%3A00.tsv", "d%41y/h~3.tsv", "h1.tsv", "weird[1].tsv"]);
    for (name, at) in &listed {
        let to = dir.path().join("fetched");
        assert_eq!(at.path, prefix.join(name).path, "{name}: joined names reach it too");
        assert!(at.download(&to).await.unwrap(), "{name} not found");
        assert_eq!(std::fs::read(&to).unwrap(), name.as_bytes(), "{name}");
    }
}

/// Other names of one store's URLs name the same objects; other stores do not.
#[test]
fn scheme_aliases_name_the_same_object() {
    let id = |url: &str| Location::parse(url).unwrap().object_id();
    assert_eq!(id("s3a://bucket/logs/h1.tsv"), id("s3://bucket/logs/h1.tsv"));
    assert_eq!(id("s3a://bucket/logs/"), "s3://bucket/logs");
    assert_ne!(id("gs://bucket/logs/h1.tsv"), id("s3://bucket/logs/h1.tsv"));
}

#[test]
fn a_prefix_the_store_cannot_name_is_refused_not_taken_as_the_root() {
    for url in ["s3://bucket/prod//manifest.json", "s3://bucket/a/%FF/x", "s3://bucket//"] {
        let refused = Location::parse(url);
        assert!(matches!(refused, Err(RemoteError::BadLocation { .. })), "{url}: {refused:?}");
    }
    let trailing = Location::parse("s3://bucket/prod/").unwrap();
    assert_eq!(trailing.join("manifest.json").to_string(), "s3://bucket/prod/manifest.json");
}

#[test]
fn what_is_shown_has_no_credentials() {
    let l = Location::parse("s3://bucket/typeahead/manifest.json?secret=x").unwrap();
    assert_eq!(l.to_string(), "s3://bucket/typeahead/manifest.json");
    assert!(Location::parse("ftp://host/x").is_err());
    let presigned = "https://u:pw@h/x?X-Amz-Credential=AKIA&X-Amz-Signature=abc#frag";
    let refused = Location::parse(presigned).unwrap_err().to_string();
    for secret in ["pw", "AKIA", "abc", "frag"] {
        assert!(!refused.contains(secret), "{refused}");
    }
    assert!(refused.contains("https://h/x"), "{refused}");
    // A URL a store's builder refuses, and repeats in its error (Azure: no dots in a
    // container name): the token in its query is not in the message either.
    let refused = Location::parse("az://my.container/x/manifest.json?sv=1&sig=SECRET");
    let refused = refused.unwrap_err();
    assert!(matches!(refused, RemoteError::BadLocation { .. }), "{refused:?}");
    let message = crate::error::chain(&refused);
    assert!(!message.contains("SECRET"), "{message}");
}
