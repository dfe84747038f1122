//! Persistence: the RDB value codec (shared by DUMP/RESTORE and, next, the RDB file loader
//! and saver) and the snapshot engine (SAVE, BGSAVE, restart from an image).

pub mod aof;
pub mod rdb_value;
pub mod snapshot;
