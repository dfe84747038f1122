//! cairn: a Redis/Valkey-compatible in-memory data server whose persistence never forks.
//!
//! See ARCHITECTURE.md for the bird's-eye view and the invariants.

pub mod arena;
pub mod collections;
pub mod commands;
pub mod config;
pub mod keyspace;
pub mod log;
pub mod persistence;
pub mod protocol;
pub mod server;
pub mod tls;
pub mod util;
