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
//!
//! A record just over a page's payload (4089 to 4095 bytes: [`is_whole_page`]) would
//! take two pages of the stream and leave the second one almost empty (8192 / 4089 of
//! its bytes). It is stored alone in one page of another layout instead, a whole-page
//! record: the CRC-32C of bytes 4..4096, the kind byte `W`, the key's and the value's
//! lengths (u16 LE each), the key, the value, zeros to the page's end. Its 9-byte
//! header leaves 4087 bytes, exactly the key and value of a 4095-byte record.
//!
//! Likewise two records that do not fit one page's payload together but whose lengths
//! add up to at most 4099 bytes (two of 2045 to 2047 bytes, say, which would otherwise
//! each hold a page alone) share a pair page: the CRC-32C, the kind byte `D`, the first
//! record's key and value lengths, the second's (u16 LE each), then the first key and
//! value and the second key and value, zeros to the page's end. A stub names a pair
//! page's records by slot: offset 0 for the first, 1 for the second.

use crate::keyspace::tiered::ColdStub;

pub const PAGE_BYTES: usize = 4096;
pub const PAGE_HEADER_BYTES: usize = 8;
pub const PAYLOAD_BYTES: usize = PAGE_BYTES - PAGE_HEADER_BYTES;
pub const RECORD_HEADER_BYTES: usize = 8;
// The image validator checks stubs with the keyspace's copies of these figures.
const _: () = assert!(PAYLOAD_BYTES == crate::keyspace::tiered::TIER_PAGE_PAYLOAD_BYTES);
const _: () = assert!(RECORD_HEADER_BYTES == crate::keyspace::tiered::TIER_RECORD_HEADER_BYTES);
const MAGIC: &[u8; 4] = b"CTP1";
/// The kind byte of a whole-page record's page (where a stream page has its magic).
const WHOLE_PAGE_KIND: u8 = b'W';
/// The kind byte of a pair page.
const PAIR_PAGE_KIND: u8 = b'D';
/// A pair page's header: checksum, kind byte, two records' key and value lengths.
pub const PAIR_PAGE_HEADER_BYTES: usize = 4 + 1 + 2 * (2 + 2);

/// Whether records of `a` and `b` bytes fit one pair page. Each is shorter than a
/// payload, so a stub's slot offset plus its record stays within one page's payload
/// (the stub geometry the image validator checks, and one page read).
pub fn pair_fits(a: usize, b: usize) -> bool {
    (RECORD_HEADER_BYTES..PAYLOAD_BYTES).contains(&a)
        && (RECORD_HEADER_BYTES..PAYLOAD_BYTES).contains(&b)
        && a + b - 2 * RECORD_HEADER_BYTES + PAIR_PAGE_HEADER_BYTES <= PAGE_BYTES
}

/// Turns `page`, a stream page (unsealed) holding one record at its payload's start,
/// into a pair page holding that record in slot 0 and `key`/`value` in slot 1 (the
/// caller checked [`pair_fits`]).
pub fn make_pair_page(page: &mut [u8], key: &[u8], value: &[u8]) {
    let p = &page[PAGE_HEADER_BYTES..PAGE_BYTES];
    let kl = u32::from_le_bytes([p[0], p[1], p[2], p[3]]) as usize;
    let vl = u32::from_le_bytes([p[4], p[5], p[6], p[7]]) as usize;
    debug_assert!(pair_fits(
        record_bytes(kl, vl),
        record_bytes(key.len(), value.len())
    ));
    let first = p[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + kl + vl].to_vec();
    page[..PAGE_BYTES].fill(0);
    page[4] = PAIR_PAGE_KIND;
    page[5..7].copy_from_slice(&(kl as u16).to_le_bytes());
    page[7..9].copy_from_slice(&(vl as u16).to_le_bytes());
    page[9..11].copy_from_slice(&(key.len() as u16).to_le_bytes());
    page[11..13].copy_from_slice(&(value.len() as u16).to_le_bytes());
    let mut at = PAIR_PAGE_HEADER_BYTES;
    for part in [&first[..], key, value] {
        page[at..at + part.len()].copy_from_slice(part);
        at += part.len();
    }
}

/// A pair page's two records as (key, value), from its lengths (None when they run
/// past the page: the page is not one this format wrote).
fn pair_records(page: &[u8]) -> Option<[(&[u8], &[u8]); 2]> {
    let u = |i: usize| u16::from_le_bytes([page[i], page[i + 1]]) as usize;
    let (k1, v1, k2, v2) = (u(5), u(7), u(9), u(11));
    let a = PAIR_PAGE_HEADER_BYTES;
    if a + k1 + v1 + k2 + v2 > PAGE_BYTES {
        return None;
    }
    let b = a + k1 + v1;
    Some([
        (&page[a..a + k1], &page[a + k1..b]),
        (&page[b..b + k2], &page[b + k2..b + k2 + v2]),
    ])
}

/// A whole-page record's header: checksum, kind byte, key and value lengths.
pub const WHOLE_PAGE_HEADER_BYTES: usize = 4 + 1 + 2 + 2;
// The image validator checks stubs with the keyspace's copy of this bound.
const _: () = assert!(
    PAGE_BYTES - WHOLE_PAGE_HEADER_BYTES + RECORD_HEADER_BYTES
        == crate::keyspace::tiered::TIER_WHOLE_PAGE_MAX_RECORD_BYTES
);

/// Whether a record of `record_bytes` is stored as a whole-page record: longer than a
/// page's payload, and its key and value fit one page after the whole-page header.
pub fn is_whole_page(record_bytes: usize) -> bool {
    record_bytes > PAYLOAD_BYTES
        && record_bytes - RECORD_HEADER_BYTES + WHOLE_PAGE_HEADER_BYTES <= PAGE_BYTES
}

/// Writes a whole-page record into `page` (one zeroed page; sealed by [`seal_pages`]).
pub fn encode_whole_page(page: &mut [u8], key: &[u8], value: &[u8]) {
    debug_assert!(is_whole_page(record_bytes(key.len(), value.len())));
    page[4] = WHOLE_PAGE_KIND;
    page[5..7].copy_from_slice(&(key.len() as u16).to_le_bytes());
    page[7..9].copy_from_slice(&(value.len() as u16).to_le_bytes());
    let k0 = WHOLE_PAGE_HEADER_BYTES;
    page[k0..k0 + key.len()].copy_from_slice(key);
    page[k0 + key.len()..k0 + key.len() + value.len()].copy_from_slice(value);
}

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

/// Seals every page of `buf` (whole pages): magic and checksum (a whole-page record's
/// page keeps its kind byte and lengths where a stream page has its magic).
pub fn seal_pages(buf: &mut [u8]) {
    for page in buf.chunks_exact_mut(PAGE_BYTES) {
        if page[4] != WHOLE_PAGE_KIND && page[4] != PAIR_PAGE_KIND {
            page[4..8].copy_from_slice(MAGIC);
        }
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

/// Checks one shared page's magic (a stream page's or a pair page's kind byte) and
/// checksum (`page` names it in the error).
pub fn check_page(buf: &[u8], page: u32) -> Result<(), String> {
    if buf.len() < PAGE_BYTES {
        return Err("short read".into());
    }
    let stored = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if (&buf[4..8] != MAGIC && buf[4] != PAIR_PAGE_KIND) || stored != crc(&buf[..PAGE_BYTES]) {
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
/// past the payload. A pair page's two records come with their slots as offsets.
pub fn page_records(buf: &[u8]) -> Vec<PageRecord<'_>> {
    let mut out = Vec::new();
    if buf.len() < PAGE_BYTES {
        return out;
    }
    if buf[4] == PAIR_PAGE_KIND {
        if let Some(recs) = pair_records(&buf[..PAGE_BYTES]) {
            for (slot, (key, value)) in recs.into_iter().enumerate() {
                out.push(PageRecord {
                    offset: slot as u32,
                    key,
                    value,
                });
            }
        }
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
    stub.pages() as u32
}

/// The value of a pair page's record in slot `stub.offset` (see the module comment),
/// checked as [`decode_value`] checks a stream record.
fn decode_pair_page(buf: &[u8], stub: ColdStub, key: &[u8]) -> Result<Vec<u8>, String> {
    let page = &buf[..PAGE_BYTES];
    let stored = u32::from_le_bytes([page[0], page[1], page[2], page[3]]);
    if stored != crc(page) {
        return Err(format!("checksum mismatch in tier file page {}", stub.page));
    }
    let rec = pair_records(page)
        .and_then(|r| r.get(stub.offset as usize).copied())
        .filter(|(k, v)| {
            record_bytes(k.len(), v.len()) == stub.record_bytes as usize
                && v.len() == stub.value_bytes as usize
                && *k == key
        });
    match rec {
        Some((_, v)) => Ok(v.to_vec()),
        None => Err("tier record does not belong to this key".into()),
    }
}

/// A whole-page record's value (see the module comment), checked as [`decode_value`]
/// checks a stream record.
fn decode_whole_page(buf: &[u8], stub: ColdStub, key: &[u8]) -> Result<Vec<u8>, String> {
    let page = &buf[..PAGE_BYTES];
    let stored = u32::from_le_bytes([page[0], page[1], page[2], page[3]]);
    if page[4] != WHOLE_PAGE_KIND || stored != crc(page) {
        return Err(format!("checksum mismatch in tier file page {}", stub.page));
    }
    let kl = u16::from_le_bytes([page[5], page[6]]) as usize;
    let vl = u16::from_le_bytes([page[7], page[8]]) as usize;
    let k0 = WHOLE_PAGE_HEADER_BYTES;
    if record_bytes(kl, vl) != stub.record_bytes as usize
        || vl != stub.value_bytes as usize
        || k0 + kl + vl > PAGE_BYTES
        || &page[k0..k0 + kl] != key
    {
        return Err("tier record does not belong to this key".into());
    }
    Ok(page[k0 + kl..k0 + kl + vl].to_vec())
}

/// Checks the pages read for `stub` (their checksums) and returns the value of the
/// record, after checking it is `key`'s and as long as the stub says.
pub fn decode_value(buf: &[u8], stub: ColdStub, key: &[u8]) -> Result<Vec<u8>, String> {
    let pages = pages_of(stub) as usize;
    if buf.len() < pages * PAGE_BYTES {
        return Err("short read".into());
    }
    if is_whole_page(stub.record_bytes as usize) {
        return decode_whole_page(buf, stub, key);
    }
    if pages == 1 && buf[4] == PAIR_PAGE_KIND {
        return decode_pair_page(buf, stub, key);
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
    fn records_just_over_a_payload_take_one_page_and_round_trip() {
        assert!(!is_whole_page(PAYLOAD_BYTES));
        assert!(!is_whole_page(PAGE_BYTES));
        for rec in PAYLOAD_BYTES + 1..PAGE_BYTES {
            assert!(is_whole_page(rec), "{rec}");
            // Keys of 1 and of 300 bytes: the value takes the rest.
            for klen in [1usize, 300] {
                let key = vec![b'k'; klen];
                let vlen = rec - RECORD_HEADER_BYTES - klen;
                let value: Vec<u8> = (0..vlen).map(|i| (i * 13 + rec) as u8).collect();
                let stub = ColdStub {
                    page: 9,
                    offset: 0,
                    record_bytes: rec as u32,
                    value_bytes: vlen as u32,
                };
                assert_eq!(pages_of(stub), 1);
                let mut buf = vec![0u8; PAGE_BYTES];
                encode_whole_page(&mut buf, &key, &value);
                seal_pages(&mut buf);
                assert_eq!(decode_value(&buf, stub, &key).unwrap(), value);
                let mut other = key.clone();
                other[0] = b'x';
                assert!(decode_value(&buf, stub, &other).is_err(), "another key");
                let shorter = ColdStub {
                    value_bytes: vlen as u32 - 1,
                    record_bytes: rec as u32 - 1,
                    ..stub
                };
                assert!(decode_value(&buf, shorter, &key).is_err(), "other lengths");
                buf[PAGE_BYTES - 1] ^= 1;
                let e = decode_value(&buf, stub, &key).unwrap_err();
                assert!(e.contains("checksum mismatch in tier file page 9"), "{e}");
            }
        }
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
    fn two_records_over_half_a_payload_share_a_pair_page() {
        assert!(pair_fits(2049, 2050) && !pair_fits(2050, 2050));
        assert!(pair_fits(100, 3999) && !pair_fits(100, 4000));
        // A tiny first record (a 1-byte tiered-min-value-size) leaves room for a 4088-byte
        // second one, whose slot offset 1 would run past the payload: not a pair.
        assert!(!pair_fits(11, PAYLOAD_BYTES) && pair_fits(12, PAYLOAD_BYTES - 1));
        let s = ColdStub {
            page: 0,
            offset: 1,
            record_bytes: (PAYLOAD_BYTES - 1) as u32,
            value_bytes: 0,
        };
        assert_eq!(pages_of(s), 1);
        for (a, b) in [(2045usize, 2047usize), (2049, 2050), (100, 3999)] {
            let (k1, k2) = (b"first".to_vec(), b"2nd".to_vec());
            let v1: Vec<u8> = (0..a - record_bytes(k1.len(), 0))
                .map(|i| i as u8)
                .collect();
            let v2: Vec<u8> = (0..b - record_bytes(k2.len(), 0))
                .map(|i| (i * 3) as u8)
                .collect();
            let mut buf = vec![0u8; PAGE_BYTES];
            encode_record(&mut buf[PAGE_HEADER_BYTES..PAGE_HEADER_BYTES + a], &k1, &v1);
            make_pair_page(&mut buf, &k2, &v2);
            seal_pages(&mut buf);
            check_page(&buf, 4).unwrap();
            let got: Vec<(u32, Vec<u8>, Vec<u8>)> = page_records(&buf)
                .iter()
                .map(|r| (r.offset, r.key.to_vec(), r.value.to_vec()))
                .collect();
            assert_eq!(
                got,
                vec![(0, k1.clone(), v1.clone()), (1, k2.clone(), v2.clone())]
            );
            let stub = |slot: u32, rec: usize, vlen: usize| ColdStub {
                page: 4,
                offset: slot,
                record_bytes: rec as u32,
                value_bytes: vlen as u32,
            };
            let (s1, s2) = (stub(0, a, v1.len()), stub(1, b, v2.len()));
            assert_eq!(pages_of(s1), 1);
            assert_eq!(decode_value(&buf, s1, &k1).unwrap(), v1);
            assert_eq!(decode_value(&buf, s2, &k2).unwrap(), v2);
            assert!(decode_value(&buf, s2, &k1).is_err(), "the other slot's key");
            assert!(
                decode_value(&buf, stub(2, b, v2.len()), &k2).is_err(),
                "no slot 2"
            );
            buf[PAGE_BYTES - 1] ^= 1;
            assert!(check_page(&buf, 4).unwrap_err().contains("page 4"));
            let e = decode_value(&buf, s1, &k1).unwrap_err();
            assert!(e.contains("checksum mismatch in tier file page 4"), "{e}");
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
