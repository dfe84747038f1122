//! Persistence: the RDB value codec (shared by DUMP/RESTORE and the RDB file loader), the
//! RDB file loader (a Redis `dump.rdb` at startup), the snapshot engine (SAVE, BGSAVE,
//! restart from an image) and the append-only log.

pub mod aof;
pub mod rdb_file;
pub mod rdb_value;
pub mod repl_backlog;
pub mod snapshot;
pub mod tiered;
pub mod write_behind;
