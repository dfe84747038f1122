//! Bit and string-algorithm commands (Redis's `bitops.c`, LCS): SETBIT, GETBIT, BITCOUNT,
//! BITPOS, BITOP, BITFIELD, BITFIELD_RO, LCS.

use super::CommandSpec;

pub static COMMANDS: &[CommandSpec] = &[];
