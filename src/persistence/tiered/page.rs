//! The tier file's page and record format.
//!
//! The file is a sequence of 4 KiB pages. Each page starts with an 8-byte header:
//! a CRC-32C (iSCSI polynomial) of the page's other 4092 bytes, then the magic `CTP1`;
//! the remaining [`PAYLOAD_BYTES`] are payload. The payloads of consecutive pages form
//! one stream, in which records sit: `[key_len u32 LE][value_len u32 LE][key][value]`.
//! A record of up to [`PAYLOAD_BYTES`] shares a page with others; a longer one starts
//! at the payload start of its own first page and runs on through the following ones.
//! Keeping the key with the value lets a compactor find the owning entry from a file
//! offset alone; on every read it also proves the record is the one the entry points to.

use crate::keyspace::tiered::ColdStub;

pub const PAGE_BYTES: usize = 4096;
pub const PAGE_HEADER_BYTES: usize = 8;
pub const PAYLOAD_BYTES: usize = PAGE_BYTES - PAGE_HEADER_BYTES;
pub const RECORD_HEADER_BYTES: usize = 8;
// The image validator checks stubs with the keyspace's copies of these figures.
const _: () = assert!(PAYLOAD_BYTES == crate::keyspace::tiered::TIER_PAGE_PAYLOAD_BYTES);
const _: () = assert!(RECORD_HEADER_BYTES == crate::keyspace::tiered::TIER_RECORD_HEADER_BYTES);
const MAGIC: &[u8; 4] = b"CTP1";

/// A record's length for a key and value.
pub fn record_bytes(key_len: usize, value_len: usize) -> usize {
    RECORD_HEADER_BYTES + key_len + value_len
}

/// Writes a record's bytes into `payload` (exactly its length).
pub fn encode_record(payload: &mut [u8], key: &[u8], value: &[u8]) {
    payload[0..4].copy_from_slice(&(key.len() as u32).to_le_bytes());
    payload[4..8].copy_from_slice(&(value.len() as u32).to_le_bytes());
    payload[8..8 + key.len()].copy_from_slice(key);
    payload[8 + key.len()..8 + key.len() + value.len()].copy_from_slice(value);
}

fn crc(page: &[u8]) -> u32 {
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, &page[4..PAGE_BYTES]) as u32
}

/// Seals every page of `buf` (whole pages): magic and checksum.
pub fn seal_pages(buf: &mut [u8]) {
    for page in buf.chunks_exact_mut(PAGE_BYTES) {
        page[4..8].copy_from_slice(MAGIC);
        let c = crc(page);
        page[0..4].copy_from_slice(&c.to_le_bytes());
    }
}

/// Why a read of `want` bytes at page `first_page` returned only `got`: the file ends
/// before the record (it was truncated under the server).
pub fn short_read(first_page: u32, got: i64, want: i64) -> String {
    format!(
        "short read ({got} of {want} bytes at offset {}): the tier file ends before the record (truncated)",
        first_page as u64 * PAGE_BYTES as u64
    )
}

/// Checks one page's magic and checksum (`page` names it in the error).
pub fn check_page(buf: &[u8], page: u32) -> Result<(), String> {
    if buf.len() < PAGE_BYTES {
        return Err("short read".into());
    }
    let stored = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if &buf[4..8] != MAGIC || stored != crc(&buf[..PAGE_BYTES]) {
        return Err(format!("checksum mismatch in tier file page {page}"));
    }
    Ok(())
}

/// A record found in a shared page: where it starts in the payload, its key and value.
pub struct PageRecord<'a> {
    pub offset: u32,
    pub key: &'a [u8],
    pub value: &'a [u8],
}

/// The records of a shared page (checked with [`check_page`] first), in order: they are
/// packed from the payload's start; the stream ends at a zero header (never a record's:
/// a tiered value is at least one byte) or where the next header or record would run
/// past the payload.
pub fn page_records(buf: &[u8]) -> Vec<PageRecord<'_>> {
    let mut out = Vec::new();
    if buf.len() < PAGE_BYTES {
        return out;
    }
    let payload = &buf[PAGE_HEADER_BYTES..PAGE_BYTES];
    let mut at = 0usize;
    while at + RECORD_HEADER_BYTES <= payload.len() {
        let w = |i: usize| {
            u32::from_le_bytes([payload[i], payload[i + 1], payload[i + 2], payload[i + 3]])
                as usize
        };
        let (kl, vl) = (w(at), w(at + 4));
        if kl == 0 && vl == 0 {
            break;
        }
        let Some(end) = (at + RECORD_HEADER_BYTES)
            .checked_add(kl)
            .and_then(|x| x.checked_add(vl))
            .filter(|&e| e <= payload.len())
        else {
            break;
        };
        let k0 = at + RECORD_HEADER_BYTES;
        out.push(PageRecord {
            offset: at as u32,
            key: &payload[k0..k0 + kl],
            value: &payload[k0 + kl..end],
        });
        at = end;
    }
    out
}

/// Pages a read of `stub`'s record covers.
pub fn pages_of(stub: ColdStub) -> u32 {
    ((stub.offset as usize + stub.record_bytes as usize).div_ceil(PAYLOAD_BYTES)).max(1) as u32
}

/// Checks the pages read for `stub` (their checksums) and returns the value of the
/// record, after checking it is `key`'s and as long as the stub says.
pub fn decode_value(buf: &[u8], stub: ColdStub, key: &[u8]) -> Result<Vec<u8>, String> {
    let pages = pages_of(stub) as usize;
    if buf.len() < pages * PAGE_BYTES {
        return Err("short read".into());
    }
    for (i, page) in buf[..pages * PAGE_BYTES]
        .chunks_exact(PAGE_BYTES)
        .enumerate()
    {
        let stored = u32::from_le_bytes([page[0], page[1], page[2], page[3]]);
        if &page[4..8] != MAGIC || stored != crc(page) {
            return Err(format!(
                "checksum mismatch in tier file page {}",
                stub.page as u64 + i as u64
            ));
        }
    }
    // The record's bytes, gathered from the pages' payloads.
    let (start, len) = (stub.offset as usize, stub.record_bytes as usize);
    let mut rec = Vec::with_capacity(len);
    let mut pos = start;
    while rec.len() < len {
        let (page, within) = (pos / PAYLOAD_BYTES, pos % PAYLOAD_BYTES);
        let take = (PAYLOAD_BYTES - within).min(len - rec.len());
        let from = page * PAGE_BYTES + PAGE_HEADER_BYTES + within;
        rec.extend_from_slice(&buf[from..from + take]);
        pos += take;
    }
    if rec.len() < RECORD_HEADER_BYTES {
        return Err("tier record too short".into());
    }
    let kl = u32::from_le_bytes([rec[0], rec[1], rec[2], rec[3]]) as usize;
    let vl = u32::from_le_bytes([rec[4], rec[5], rec[6], rec[7]]) as usize;
    if RECORD_HEADER_BYTES as u64 + kl as u64 + vl as u64 != len as u64
        || vl != stub.value_bytes as usize
        || &rec[8..8 + kl] != key
    {
        return Err("tier record does not belong to this key".into());
    }
    rec.drain(..8 + kl);
    Ok(rec)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(stub: ColdStub, key: &[u8], value: &[u8]) -> Vec<u8> {
        let pages = pages_of(stub) as usize;
        let mut payload = vec![0u8; pages * PAYLOAD_BYTES];
        let at = stub.offset as usize;
        encode_record(
            &mut payload[at..at + stub.record_bytes as usize],
            key,
            value,
        );
        let mut buf = vec![0u8; pages * PAGE_BYTES];
        for (i, chunk) in payload.chunks(PAYLOAD_BYTES).enumerate() {
            buf[i * PAGE_BYTES + PAGE_HEADER_BYTES..(i + 1) * PAGE_BYTES].copy_from_slice(chunk);
        }
        seal_pages(&mut buf);
        buf
    }

    #[test]
    fn records_round_trip_within_and_across_pages() {
        for (offset, vlen) in [(0usize, 10usize), (4000, 50), (0, 3 * PAYLOAD_BYTES)] {
            let value: Vec<u8> = (0..vlen).map(|i| (i * 7) as u8).collect();
            let stub = ColdStub {
                page: 5,
                offset: offset as u32,
                record_bytes: record_bytes(3, vlen) as u32,
                value_bytes: vlen as u32,
            };
            let buf = build(stub, b"key", &value);
            assert_eq!(decode_value(&buf, stub, b"key").unwrap(), value);
            assert!(
                decode_value(&buf, stub, b"kez").is_err(),
                "another key's record"
            );
        }
    }

    #[test]
    fn a_shared_page_lists_its_records_and_stops_at_the_end_or_at_garbage() {
        let mut buf = vec![0u8; PAGE_BYTES];
        let mut at = PAGE_HEADER_BYTES;
        for (k, v) in [
            (&b"a"[..], &[1u8; 10][..]),
            (b"bb", &[2u8; 300]),
            (b"", &[3u8; 5]),
        ] {
            let n = record_bytes(k.len(), v.len());
            encode_record(&mut buf[at..at + n], k, v);
            at += n;
        }
        seal_pages(&mut buf);
        check_page(&buf, 0).unwrap();
        let recs = page_records(&buf);
        let got: Vec<(u32, &[u8], usize)> = recs
            .iter()
            .map(|r| (r.offset, r.key, r.value.len()))
            .collect();
        assert_eq!(
            got,
            vec![(0, &b"a"[..], 10), (19, b"bb", 300), (329, b"", 5)]
        );
        // A header claiming more than the payload holds ends the list.
        let end = at;
        buf[end..end + 4].copy_from_slice(&5000u32.to_le_bytes());
        buf[end + 4..end + 8].copy_from_slice(&1u32.to_le_bytes());
        assert_eq!(page_records(&buf).len(), 3);
        assert!(check_page(&buf, 7).unwrap_err().contains("page 7"));
    }

    #[test]
    fn a_flipped_byte_fails_the_page_checksum() {
        let stub = ColdStub {
            page: 0,
            offset: 0,
            record_bytes: record_bytes(1, 100) as u32,
            value_bytes: 100,
        };
        let mut buf = build(stub, b"k", &[1u8; 100]);
        buf[PAGE_BYTES - 1] ^= 1; // outside the record, still covered
        let e = decode_value(&buf, stub, b"k").unwrap_err();
        assert!(e.contains("checksum mismatch"), "{e}");
    }
}
