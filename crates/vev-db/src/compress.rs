//! Block compression of stored blobs: index segments and log records (format 6 on).
//!
//! Why: delta coding (`codec.rs`) shrinks ids, but the values (strings, keywords) and the
//! repeated shapes of neighbouring datoms stay as they are; LZ4 finds those repeats. On the
//! 1M-person demo database the file went from 66-69 to 30 bytes per datom (issue 24; the
//! figures and the command are in `bench/history/2026-12-05-2335-results-page.md`). LZ4
//! rather than a stronger codec: a segment is decoded on every cache miss, and LZ4's
//! decoder runs at gigabytes per second, so the load stays dominated by the datom decoding
//! that follows it.
//!
//! A packed blob is either the raw encoding unchanged (its first byte is the encoding's own
//! kind, below `KIND_LZ4`) or `KIND_LZ4`, the raw length as a varint, then one LZ4 block of
//! the raw encoding. Blobs shorter than `MIN_COMPRESSED` bytes, and those LZ4 does not make
//! shorter, stay raw, so a reader must accept both (and files before format 6 hold only raw
//! blobs). Unpacking never trusts its input: a length beyond what the block could expand to,
//! a malformed block or one of another length is a `DecodeError` (`storage/corruption`).

use std::borrow::Cow;

use crate::codec::{err, DecodeResult, Reader, Writer};

/// The kind byte of a compressed blob (kinds 1 to 6 are the raw encodings).
pub(crate) const KIND_LZ4: u8 = 7;

/// Blobs shorter than this stay raw: LZ4's framing would eat the little it saves.
pub(crate) const MIN_COMPRESSED: usize = 64;

/// An LZ4 block never expands its input more than 255 times (one token byte and a 255 run
/// length byte stand for at most 255 + 15 bytes of a match); a larger stated length is corrupt.
const MAX_RATIO: usize = 255;

/// `raw` as stored: compressed when it is at least `MIN_COMPRESSED` bytes and LZ4 makes it
/// shorter, else unchanged.
pub(crate) fn pack(raw: Vec<u8>) -> Vec<u8> {
    if raw.len() < MIN_COMPRESSED {
        return raw;
    }
    let mut w = Writer {
        buf: Vec::with_capacity(11 + lz4_flex::block::get_maximum_output_size(raw.len())),
    };
    w.u8(KIND_LZ4);
    w.varint(raw.len() as u64);
    let header = w.buf.len();
    w.buf.resize(
        header + lz4_flex::block::get_maximum_output_size(raw.len()),
        0,
    );
    match lz4_flex::block::compress_into(&raw, &mut w.buf[header..]) {
        Ok(n) if header + n < raw.len() => {
            w.buf.truncate(header + n);
            w.buf
        }
        // No gain (or, never expected, a buffer too small): the raw bytes.
        _ => raw,
    }
}

/// The raw encoding of a stored blob: `bytes` itself when it is raw, else its block
/// decompressed.
pub(crate) fn unpack(bytes: &[u8]) -> DecodeResult<Cow<'_, [u8]>> {
    if bytes.first() != Some(&KIND_LZ4) {
        return Ok(Cow::Borrowed(bytes));
    }
    let mut r = Reader::new(bytes);
    r.u8()?;
    let len = r.varint()?;
    let block = r.rest();
    let bound = block.len().saturating_mul(MAX_RATIO);
    if len > bound as u64 {
        return err(format!(
            "compressed blob of {} bytes claims {len} bytes, more than LZ4 can expand it to",
            block.len()
        ));
    }
    let mut out = vec![0u8; len as usize];
    match lz4_flex::block::decompress_into(block, &mut out) {
        Ok(n) if n == out.len() => {}
        Ok(n) => {
            return err(format!(
                "compressed blob expands to {n} bytes, but it says {len}"
            ))
        }
        Err(e) => return err(format!("malformed compressed blob: {e}")),
    }
    if out.first() == Some(&KIND_LZ4) {
        return err("compressed blob holds another compressed blob");
    }
    Ok(Cow::Owned(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample(n: usize) -> Vec<u8> {
        // A kind byte, then text that repeats (as datoms with similar values do).
        let mut raw = vec![1u8];
        let mut i = 0;
        while raw.len() < n {
            raw.extend_from_slice(format!("p{i}@example.com Person {i} ").as_bytes());
            i += 1;
        }
        raw.truncate(n);
        raw
    }

    #[test]
    fn short_and_incompressible_blobs_stay_raw() {
        let short = sample(MIN_COMPRESSED - 1);
        assert_eq!(pack(short.clone()), short);
        // Bytes with no repeats LZ4 can use: no gain, so raw.
        let mut noise = vec![2u8];
        let mut x: u32 = 12345;
        for _ in 0..200 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            noise.push((x >> 24) as u8);
        }
        assert_eq!(pack(noise.clone()), noise);
        assert_eq!(unpack(&noise).unwrap().as_ref(), &noise[..]);
    }

    #[test]
    fn long_blobs_are_compressed_and_come_back() {
        let raw = sample(4000);
        let packed = pack(raw.clone());
        assert_eq!(packed[0], KIND_LZ4);
        assert!(packed.len() < raw.len() / 2, "{} bytes", packed.len());
        assert_eq!(unpack(&packed).unwrap().as_ref(), &raw[..]);
    }

    #[test]
    fn flipped_and_truncated_blobs_are_errors_not_panics() {
        let raw = sample(1000);
        let packed = pack(raw.clone());
        assert_eq!(packed[0], KIND_LZ4);
        for cut in 0..packed.len() {
            // A truncated blob either fails or (cut at 0: empty, so raw) is not the original.
            if let Ok(got) = unpack(&packed[..cut]) {
                assert_ne!(got.as_ref(), &raw[..], "cut at {cut}");
            }
        }
        let mut errors = 0;
        for i in 1..packed.len() {
            for bit in [0x01u8, 0x10, 0x80] {
                let mut bad = packed.clone();
                bad[i] ^= bit;
                // Some flips only change a literal byte (the backends' checksums catch those);
                // none may panic, and a flip of the header or a token must be an error.
                if unpack(&bad).is_err() {
                    errors += 1;
                }
            }
        }
        assert!(errors > 0);
        let mut huge = vec![KIND_LZ4];
        huge.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        huge.extend_from_slice(&[0u8; 8]);
        let e = unpack(&huge).unwrap_err();
        assert!(e.0.contains("more than LZ4"), "{e:?}");
        // A stated length one off from what the block gives.
        let mut w = Writer::new();
        w.u8(KIND_LZ4);
        w.varint(raw.len() as u64 + 1);
        let body = &packed[1 + varint_len(raw.len())..];
        w.buf.extend_from_slice(body);
        assert!(unpack(&w.buf).is_err());
        // Nested compression is refused.
        let twice = {
            let mut w = Writer::new();
            w.u8(KIND_LZ4);
            w.varint(packed.len() as u64);
            w.buf.extend_from_slice(&lz4_flex::block::compress(&packed));
            w.buf
        };
        assert!(unpack(&twice).is_err());
    }

    fn varint_len(mut x: usize) -> usize {
        let mut n = 1;
        while x >= 0x80 {
            x >>= 7;
            n += 1;
        }
        n
    }

    proptest! {
        #[test]
        fn pack_round_trips(kind in 1u8..7, body in proptest::collection::vec(0u8..8, 0..600)) {
            let mut raw = vec![kind];
            raw.extend_from_slice(&body);
            let packed = pack(raw.clone());
            prop_assert!(packed.len() <= raw.len());
            let back = unpack(&packed).unwrap();
            prop_assert_eq!(back.as_ref(), &raw[..]);
        }

        #[test]
        fn garbage_never_panics(body in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut bytes = vec![KIND_LZ4];
            bytes.extend_from_slice(&body);
            let _ = unpack(&bytes);
        }
    }
}
