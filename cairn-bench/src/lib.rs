//! cairn-bench: a load generator for RESP2 servers (see README.md).
pub mod aof_seed;
pub mod cli;
pub mod compare;
pub mod engine;
pub mod evloop;
pub mod keys;
pub mod plot;
pub mod procmem;
pub mod replica_vs;
pub mod report;
pub mod resp;
pub mod scenario;
pub mod stats;
pub mod tiering_vs;
pub mod uffd_probe;
pub mod values;
