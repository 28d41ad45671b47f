//! Skimming the records of an uncompressed batch, for the cleaner: each record's byte
//! range, deltas and key, and whether its value is null, read straight from the batch
//! bytes with no allocation. The value and the headers are jumped over by the record's
//! length varint, not parsed (a record is self-delimiting:
//! `length varint | attributes | timestampDelta | offsetDelta | key | value | headers`,
//! see `record.rs`).
//!
//! `write_retained` builds the batch that keeps some of those records by copying their
//! bytes: offset deltas stay valid because baseOffset is kept, and the result is the
//! same bytes `record_batch::encode` gives for the decoded records (baseTimestamp moves
//! to the first retained record, whose timestampDelta becomes 0, as a re-encode does).

use crate::error::{Error, Result};
use crate::records::record_batch::{compute_crc, BatchHeader, CRC_OFFSET, DELETE_HORIZON_FLAG, HEADER_SIZE, LOG_OVERHEAD};
use crate::varint::{put_varint, put_varlong, varlong_len, Cursor};

/// How many records ahead `skim_records` prefetches.
const PREFETCH_RECORDS: usize = 8;

/// Hints the CPU to load the cache line of `area[at]` (nothing when `at` is past the end).
#[inline]
fn prefetch(area: &[u8], at: usize) {
    #[cfg(target_arch = "x86_64")]
    if at < area.len() {
        // SAFETY: `at` is inside `area`; a prefetch reads nothing and cannot fault.
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(area.as_ptr().add(at) as *const i8) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (area, at);
}

/// One record of an uncompressed record area. Positions are indexes into the area.
#[derive(Clone, Copy, Debug)]
pub struct SkimmedRecord<'a> {
    /// The record's bytes are `area[start..end]`, its length varint included.
    pub start: usize,
    pub end: usize,
    /// Where the key length starts: the fields after offsetDelta.
    pub fields: usize,
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    pub key: Option<&'a [u8]>,
    pub null_value: bool,
}

/// Calls `f` on each record of the uncompressed record area `area` of the batch `h`, in
/// order, checking what `DecodedBatch::records` checks of the framing: lengths inside
/// the area, offsets ascending within [baseOffset, lastOffset], `recordsCount` records
/// and no bytes after them. `position` locates the batch for error messages.
pub fn skim_records<'a>(area: &'a [u8], h: &BatchHeader, position: u64, mut f: impl FnMut(SkimmedRecord<'a>)) -> Result<()> {
    if h.last_offset_delta < h.records_count - 1 {
        return Err(Error::corrupt(
            position,
            format!("lastOffsetDelta {} is below recordsCount {} - 1", h.last_offset_delta, h.records_count),
        ));
    }
    let base = position + HEADER_SIZE as u64;
    let mut cur = Cursor::new(area, base);
    let mut previous = -1i64;
    for _ in 0..h.records_count {
        let start = cur.pos;
        let len = cur.varint()?;
        if len < 0 || len as usize > cur.remaining() {
            return Err(Error::corrupt(base + start as u64, format!("record length {len} runs past the batch")));
        }
        let end = cur.pos + len as usize;
        // Walking records is a chain of dependent loads, one cache miss per record when
        // the area is not cached (the rewrite pass). Records of a batch tend to have one
        // size, so fetch the start of the record `PREFETCH_RECORDS` ahead now.
        prefetch(area, end + (end - start) * (PREFETCH_RECORDS - 1));
        let mut rec = Cursor { buf: &area[..end], pos: cur.pos, base };
        let _attributes = rec.i8()?;
        let timestamp_delta = rec.varlong()?;
        let offset_delta = rec.varint()?;
        let fields = rec.pos;
        let key = rec.nullable_bytes()?;
        let value_len = rec.varint()?;
        if value_len < -1 || value_len as i64 > rec.remaining() as i64 {
            return Err(Error::corrupt(base + start as u64, format!("bad value length {value_len}")));
        }
        // Compaction leaves gaps, so offsets need only ascend within the batch's range.
        if offset_delta < 0 || offset_delta > h.last_offset_delta || offset_delta as i64 <= previous {
            return Err(Error::corrupt(position, format!("record offset {} outside or out of order in the batch", h.base_offset + offset_delta as i64)));
        }
        previous = offset_delta as i64;
        cur.pos = end;
        f(SkimmedRecord { start, end, fields, timestamp_delta, offset_delta, key, null_value: value_len == -1 });
    }
    if cur.remaining() != 0 {
        return Err(Error::corrupt(position, format!("{} bytes after the last record", cur.remaining())));
    }
    Ok(())
}

/// Appends to `out` the uncompressed, non-LogAppendTime batch `batch` (header `h`) cut
/// down to `retained` (a non-empty, ordered subset of its records from `skim_records`),
/// with baseOffset, lastOffsetDelta, attributes and producer fields kept.
/// `delete_horizon_ms` sets the horizon (baseTimestamp) of a batch that has none.
pub fn write_retained(batch: &[u8], h: &BatchHeader, retained: &[SkimmedRecord<'_>], delete_horizon_ms: Option<i64>, out: &mut Vec<u8>) {
    debug_assert!(!retained.is_empty() && h.codec_id() == 0 && !h.is_log_append_time());
    let area = &batch[HEADER_SIZE..];
    let start = out.len();
    out.resize(start + HEADER_SIZE, 0);
    // Record timestamps are baseTimestamp + delta. The batch's new baseTimestamp is its
    // horizon, or else the first retained record's timestamp; deltas move by `shift`.
    let first_ts = h.base_timestamp.wrapping_add(retained[0].timestamp_delta);
    let new_base = match (h.delete_horizon_ms(), delete_horizon_ms) {
        (Some(t), _) | (None, Some(t)) => t,
        (None, None) => first_ts,
    };
    let shift = new_base.wrapping_sub(h.base_timestamp);
    let mut max_ts = i64::MIN;
    for r in retained {
        max_ts = max_ts.max(h.base_timestamp.wrapping_add(r.timestamp_delta));
        if shift == 0 {
            out.extend_from_slice(&area[r.start..r.end]);
            continue;
        }
        // Rewrite the length and timestampDelta; offsetDelta and the rest are copied.
        let delta = r.timestamp_delta.wrapping_sub(shift);
        let mut c = Cursor::new(&area[r.start..r.fields], 0);
        let _ = c.varint(); // the length, checked by skim_records
        let attributes = area[r.start + c.pos];
        let _ = c.i8();
        let _ = c.varlong();
        let rest = &area[r.start + c.pos..r.end]; // offsetDelta, key, value, headers
        let body = 1 + varlong_len(delta) + rest.len();
        put_varint(out, body as i32);
        out.push(attributes);
        put_varlong(out, delta);
        out.extend_from_slice(rest);
    }
    let mut header = *h;
    header.batch_length = (out.len() - start - LOG_OVERHEAD) as i32;
    header.records_count = retained.len() as i32;
    header.base_timestamp = new_base;
    header.max_timestamp = max_ts;
    // As `encode`: only the attribute bits it knows survive.
    header.attributes &= 0x7f;
    if delete_horizon_ms.is_some() {
        header.attributes |= DELETE_HORIZON_FLAG;
    }
    header.crc = 0;
    header.write(&mut out[start..start + HEADER_SIZE]);
    let crc = compute_crc(&out[start..]);
    out[start + CRC_OFFSET..start + CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::record::NewRecord;
    use crate::records::record_batch::{encode, validate, BatchOptions, DecodedBatch};

    fn records() -> Vec<NewRecord> {
        (0..40i64)
            .map(|i| NewRecord {
                offset: 100 + i * 2,
                // Timestamps out of order, some far apart, so deltas change length.
                timestamp: 1_700_000_000_000 + (i * 7919 % 13) * 100_000 - i,
                key: (i % 4 != 3).then(|| format!("key-{i}").into_bytes()),
                value: (i % 5 != 4).then(|| vec![i as u8; (i * 31 % 200) as usize]),
                headers: if i % 3 == 0 { vec![(b"h".to_vec(), Some(b"v".to_vec())), (b"n".to_vec(), None)] } else { vec![] },
            })
            .collect()
    }

    #[test]
    fn skimming_reads_what_decoding_reads() {
        let recs = records();
        let b = encode(&recs, &BatchOptions { base_offset: 100, ..Default::default() });
        let h = BatchHeader::parse(&b);
        let mut got = Vec::new();
        skim_records(&b[HEADER_SIZE..], &h, 0, |r| got.push(r)).unwrap();
        let decoded = DecodedBatch::new(&b, 0, true).unwrap();
        let want = decoded.records().unwrap();
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(&want) {
            assert_eq!((h.base_offset + g.offset_delta as i64, h.base_timestamp.wrapping_add(g.timestamp_delta)), (w.offset, w.timestamp));
            assert_eq!((g.key, g.null_value), (w.key, w.value.is_none()));
        }
        // Corrupt framing is an error: a cut area, and offsets out of order.
        assert!(skim_records(&b[HEADER_SIZE..b.len() - 1], &h, 0, |_| {}).is_err());
        let swapped = encode(&[recs[1].clone(), recs[0].clone()], &BatchOptions { base_offset: 100, last_offset_delta: Some(2), ..Default::default() });
        assert!(skim_records(&swapped[HEADER_SIZE..], &BatchHeader::parse(&swapped), 0, |_| {}).is_err());
    }

    #[test]
    fn copying_retained_records_gives_the_bytes_of_a_re_encode() {
        let recs = records();
        for horizon_before in [None, Some(1_800_000_000_000i64)] {
            let opts = BatchOptions { base_offset: 100, producer_id: 7, producer_epoch: 1, base_sequence: 0, delete_horizon_ms: horizon_before, ..Default::default() };
            let b = encode(&recs, &opts);
            let h = BatchHeader::parse(&b);
            let mut skimmed = Vec::new();
            skim_records(&b[HEADER_SIZE..], &h, 0, |r| skimmed.push(r)).unwrap();
            let decoded = DecodedBatch::new(&b, 0, true).unwrap();
            let all = decoded.records().unwrap();
            for (pick, set_horizon) in [(2usize, None), (3, Some(1_900_000_000_000i64)), (1, None), (7, None), (5, Some(5))] {
                let keep: Vec<usize> = (0..recs.len()).filter(|i| (i + pick) % pick == 0 || i % 11 == 5).collect();
                let retained: Vec<SkimmedRecord<'_>> = keep.iter().map(|&i| skimmed[i]).collect();
                let set_horizon = if horizon_before.is_some() { None } else { set_horizon };
                let mut out = vec![1, 2, 3];
                write_retained(&b, &h, &retained, set_horizon, &mut out);
                let owned: Vec<NewRecord> = keep.iter().map(|&i| all[i].to_owned_record()).collect();
                let want = encode(
                    &owned,
                    &BatchOptions { delete_horizon_ms: set_horizon.or(horizon_before), last_offset_delta: Some(h.last_offset_delta), ..opts.clone() },
                );
                assert_eq!(&out[..3], &[1, 2, 3]);
                assert_eq!(&out[3..], &want[..], "pick {pick} horizon {set_horizon:?} {horizon_before:?}");
                validate(&out[3..], 0, false).unwrap();
            }
        }
    }
}
