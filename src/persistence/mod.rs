//! Persistence formats. For now the RDB value codec, shared by DUMP/RESTORE and (next) the
//! RDB file loader and saver, so that both speak exactly Redis's serialization.

pub mod aof;
pub mod rdb_value;
