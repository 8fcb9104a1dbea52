//! Running beyond one machine: files in object storage ([`location`]) and servers that follow
//! a manifest there ([`follow`]).

pub mod follow;
pub mod location;

pub use location::{Expect, Fetched, Location, RemoteError};
