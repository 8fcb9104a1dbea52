//! Running beyond one machine: files in object storage ([`location`]), a build's generations
//! in a bucket ([`bucket`]), builds that publish there ([`build`]) and read their logs from
//! there ([`inputs`]), and servers that follow a manifest there ([`follow`]), keeping the
//! generation they hold beside the live one on disk ([`kept`]).

pub mod bucket;
pub mod build;
pub mod follow;
pub mod inputs;
pub mod kept;
pub mod location;

pub use location::{Expect, Fetched, Location, RemoteError, Tag, local_path, local_path_of};
