//! RecordBatch v2 (magic 2): the unit Kafka stores on disk and sends on the wire.
//!
//! ```text
//! byte  field
//!  0    baseOffset            int64
//!  8    batchLength           int32   bytes after this field (total size - 12)
//! 12    partitionLeaderEpoch  int32
//! 16    magic                 int8    = 2
//! 17    crc                   uint32  CRC-32C of bytes 21..end
//! 21    attributes            int16   bits 0-2 codec, 3 LogAppendTime, 4 transactional,
//!                                     5 control, 6 hasDeleteHorizonMs
//! 23    lastOffsetDelta       int32
//! 27    baseTimestamp         int64   (the delete horizon when bit 6 is set)
//! 35    maxTimestamp          int64
//! 43    producerId            int64
//! 51    producerEpoch         int16
//! 53    baseSequence          int32
//! 57    recordsCount          int32
//! 61    records               (one compressed blob when a codec is set)
//! ```
//! All integers are big-endian. baseOffset and partitionLeaderEpoch lie outside the CRC,
//! so the broker rewrites them in place without recomputing it.

use std::borrow::Cow;

use crate::compression::Compression;
use crate::error::{Error, Result};
use crate::records::record::{read_record, write_record, NewRecord, RecordRef};
use crate::records::record_rules::RecordRules;
use crate::varint::Cursor;

pub const LOG_OVERHEAD: usize = 12;
pub const HEADER_SIZE: usize = 61;
pub const MAGIC: i8 = 2;
pub const NO_PRODUCER_ID: i64 = -1;
pub const NO_SEQUENCE: i32 = -1;
pub const NO_TIMESTAMP: i64 = -1;

pub const CRC_OFFSET: usize = 17;
pub const ATTRIBUTES_OFFSET: usize = 21;
pub const MAX_TIMESTAMP_OFFSET: usize = 35;

const CODEC_MASK: i16 = 0x07;
const LOG_APPEND_TIME_FLAG: i16 = 0x08;
const TRANSACTIONAL_FLAG: i16 = 0x10;
const CONTROL_FLAG: i16 = 0x20;
pub const DELETE_HORIZON_FLAG: i16 = 0x40;

fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}
fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes(b[at..at + 2].try_into().unwrap())
}

/// The fixed 61-byte header of a batch, parsed without validation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

impl BatchHeader {
    /// Parses the first 61 bytes of `b` (which must hold at least that many).
    pub fn parse(b: &[u8]) -> BatchHeader {
        BatchHeader {
            base_offset: be_i64(b, 0),
            batch_length: be_i32(b, 8),
            partition_leader_epoch: be_i32(b, 12),
            magic: b[16] as i8,
            crc: be_i32(b, 17) as u32,
            attributes: be_i16(b, 21),
            last_offset_delta: be_i32(b, 23),
            base_timestamp: be_i64(b, 27),
            max_timestamp: be_i64(b, 35),
            producer_id: be_i64(b, 43),
            producer_epoch: be_i16(b, 51),
            base_sequence: be_i32(b, 53),
            records_count: be_i32(b, 57),
        }
    }

    pub fn write(&self, b: &mut [u8]) {
        b[0..8].copy_from_slice(&self.base_offset.to_be_bytes());
        b[8..12].copy_from_slice(&self.batch_length.to_be_bytes());
        b[12..16].copy_from_slice(&self.partition_leader_epoch.to_be_bytes());
        b[16] = self.magic as u8;
        b[17..21].copy_from_slice(&self.crc.to_be_bytes());
        b[21..23].copy_from_slice(&self.attributes.to_be_bytes());
        b[23..27].copy_from_slice(&self.last_offset_delta.to_be_bytes());
        b[27..35].copy_from_slice(&self.base_timestamp.to_be_bytes());
        b[35..43].copy_from_slice(&self.max_timestamp.to_be_bytes());
        b[43..51].copy_from_slice(&self.producer_id.to_be_bytes());
        b[51..53].copy_from_slice(&self.producer_epoch.to_be_bytes());
        b[53..57].copy_from_slice(&self.base_sequence.to_be_bytes());
        b[57..61].copy_from_slice(&self.records_count.to_be_bytes());
    }

    /// Bytes on disk and on the wire: batchLength + 12.
    pub fn size(&self) -> usize {
        self.batch_length as usize + LOG_OVERHEAD
    }
    pub fn last_offset(&self) -> i64 {
        self.base_offset + self.last_offset_delta as i64
    }
    pub fn next_offset(&self) -> i64 {
        self.last_offset() + 1
    }
    pub fn codec_id(&self) -> u8 {
        (self.attributes & CODEC_MASK) as u8
    }
    pub fn compression(&self) -> Result<Compression> {
        Compression::from_id(self.codec_id())
    }
    pub fn is_log_append_time(&self) -> bool {
        self.attributes & LOG_APPEND_TIME_FLAG != 0
    }
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_FLAG != 0
    }
    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_FLAG != 0
    }
    pub fn has_delete_horizon(&self) -> bool {
        self.attributes & DELETE_HORIZON_FLAG != 0
    }
    pub fn delete_horizon_ms(&self) -> Option<i64> {
        self.has_delete_horizon().then_some(self.base_timestamp)
    }
    /// The sequence of the last record, wrapping at i32::MAX as Kafka's producers do.
    pub fn last_sequence(&self) -> i32 {
        if self.base_sequence == NO_SEQUENCE {
            return NO_SEQUENCE;
        }
        let delta = self.last_offset_delta;
        if self.base_sequence > i32::MAX - delta {
            delta - (i32::MAX - self.base_sequence) - 1
        } else {
            self.base_sequence + delta
        }
    }
}

/// Reads the header of the batch starting at `buf[pos..]` and checks that the whole batch
/// lies inside `buf`. Returns `Ok(None)` when fewer bytes than a whole batch remain (a
/// partial tail). `base` is the absolute position of `buf[0]` for error messages.
pub fn next_batch(buf: &[u8], pos: usize, base: u64) -> Result<Option<BatchHeader>> {
    let rest = buf.len() - pos;
    if rest < HEADER_SIZE {
        return Ok(None);
    }
    let h = BatchHeader::parse(&buf[pos..]);
    check_header(&h, base + pos as u64)?;
    if h.size() > rest {
        return Ok(None);
    }
    Ok(Some(h))
}

/// Structural checks that need only the header: magic and a length that can hold a header.
pub fn check_header(h: &BatchHeader, position: u64) -> Result<()> {
    if h.magic != MAGIC {
        return Err(Error::corrupt(position, format!("magic {} (only magic 2 is supported)", h.magic)));
    }
    if (h.batch_length as i64) < (HEADER_SIZE - LOG_OVERHEAD) as i64 {
        return Err(Error::corrupt(position, format!("batchLength {} is smaller than a batch header", h.batch_length)));
    }
    if h.last_offset_delta < 0 || h.records_count < 0 {
        return Err(Error::corrupt(
            position,
            format!("negative lastOffsetDelta {} or recordsCount {}", h.last_offset_delta, h.records_count),
        ));
    }
    Ok(())
}

/// CRC-32C of a batch's attributes..end; `batch` is the whole batch.
pub fn compute_crc(batch: &[u8]) -> u32 {
    crc32c::crc32c(&batch[ATTRIBUTES_OFFSET..])
}

/// Verifies the CRC of a whole batch in one pass over bytes 21..end.
pub fn verify_crc(batch: &[u8], h: &BatchHeader, position: u64) -> Result<()> {
    let crc = compute_crc(batch);
    if crc != h.crc {
        return Err(Error::corrupt(position, format!("CRC-32C mismatch: stored {:#010x}, computed {crc:#010x}", h.crc)));
    }
    Ok(())
}

/// The CRC of a batch whose header bytes 21..61 are `header[21..61]`, followed by the
/// record area `records` (used after rewriting attributes or maxTimestamp).
pub fn crc_with_header(header: &[u8; HEADER_SIZE], records: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&header[ATTRIBUTES_OFFSET..]), records)
}

/// The checks of `validate` that need only the header: size, codec, offset deltas.
pub fn validate_header(batch: &[u8], position: u64, contiguous_offsets: bool) -> Result<BatchHeader> {
    let h = BatchHeader::parse(batch);
    check_header(&h, position)?;
    if h.size() != batch.len() {
        return Err(Error::corrupt(position, format!("batch size {} but {} bytes given", h.size(), batch.len())));
    }
    h.compression().map_err(|_| Error::corrupt(position, format!("unknown compression codec id {}", h.codec_id())))?;
    if contiguous_offsets && h.last_offset_delta != h.records_count - 1 {
        return Err(Error::corrupt(
            position,
            format!("lastOffsetDelta {} disagrees with recordsCount {}", h.last_offset_delta, h.records_count),
        ));
    }
    if !contiguous_offsets && h.last_offset_delta < h.records_count - 1 {
        return Err(Error::corrupt(
            position,
            format!("lastOffsetDelta {} is below recordsCount {} - 1", h.last_offset_delta, h.records_count),
        ));
    }
    Ok(h)
}

/// Full validation of one whole batch as received from a producer or read back from
/// disk: header, CRC and the records (decompressed first when a codec is set).
pub fn validate(batch: &[u8], position: u64, contiguous_offsets: bool) -> Result<BatchHeader> {
    let h = validate_header(batch, position, contiguous_offsets)?;
    validate_contents(batch, &h, position, contiguous_offsets, &RecordRules::default(), "")?;
    Ok(h)
}

/// The checks of `validate` that read the whole batch: the CRC and the framing of every
/// record, then `rules` on every record of a data batch (control batches are the
/// broker's own). `h` must be the header `validate_header` returned for `batch`;
/// `partition` names the log in rule errors.
pub fn validate_contents(
    batch: &[u8],
    h: &BatchHeader,
    position: u64,
    contiguous_offsets: bool,
    rules: &RecordRules,
    partition: &str,
) -> Result<()> {
    verify_crc(batch, h, position)?;
    let area_position = position + HEADER_SIZE as u64;
    let check_rules = |area: &[u8]| {
        if h.is_control() {
            return Ok(());
        }
        rules.check(area, h.records_count, h.base_timestamp, partition, position)
    };
    match h.compression()? {
        Compression::None => {
            crate::records::record::check_framing(&batch[HEADER_SIZE..], h.records_count, contiguous_offsets, area_position)?;
            check_rules(&batch[HEADER_SIZE..])
        }
        // As Kafka's LogValidator, the records of a compressed batch are checked too,
        // streamed out of the codec (`record_stream`) rather than decompressed whole.
        c => {
            let rules_apply = !h.is_control() && !rules.is_empty();
            let mut errors = Vec::new();
            crate::records::record_stream::walk(c.reader(&batch[HEADER_SIZE..], area_position)?, h.records_count, area_position, c.name(), |i, r| {
                if contiguous_offsets && r.offset_delta != i {
                    return Err(Error::corrupt(area_position, format!("record {i} has offset delta {}", r.offset_delta)));
                }
                if rules_apply {
                    rules.check_record(i, h.base_timestamp.wrapping_add(r.timestamp_delta), r.key_len, partition, &mut errors);
                }
                Ok(())
            })?;
            RecordRules::verdict(position, errors)
        }
    }
}

/// Options for building a batch. Offsets and timestamps of records are absolute.
#[derive(Clone, Debug)]
pub struct BatchOptions {
    pub base_offset: i64,
    pub compression: Compression,
    pub partition_leader_epoch: i32,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub transactional: bool,
    pub control: bool,
    /// Stamp LogAppendTime: maxTimestamp becomes this value and the attribute bit is set.
    pub log_append_time: Option<i64>,
    /// Set hasDeleteHorizonMs; baseTimestamp then holds the horizon (used by the cleaner).
    pub delete_horizon_ms: Option<i64>,
    /// lastOffsetDelta for batches whose last records were removed by compaction.
    pub last_offset_delta: Option<i32>,
}

impl Default for BatchOptions {
    fn default() -> Self {
        BatchOptions {
            base_offset: 0,
            compression: Compression::None,
            partition_leader_epoch: -1,
            producer_id: NO_PRODUCER_ID,
            producer_epoch: -1,
            base_sequence: NO_SEQUENCE,
            transactional: false,
            control: false,
            log_append_time: None,
            delete_horizon_ms: None,
            last_offset_delta: None,
        }
    }
}

/// Encodes one batch. Record offsets must be >= `base_offset` and ascending.
pub fn encode(records: &[NewRecord], opts: &BatchOptions) -> Vec<u8> {
    let first_ts = records.first().map_or(NO_TIMESTAMP, |r| r.timestamp);
    let base_timestamp = opts.delete_horizon_ms.unwrap_or(first_ts);
    let max_timestamp = match opts.log_append_time {
        Some(t) => t,
        None => records.iter().map(|r| r.timestamp).max().unwrap_or(NO_TIMESTAMP),
    };
    let mut area = Vec::with_capacity(records.iter().map(|r| 24 + r.key.as_ref().map_or(0, Vec::len) + r.value.as_ref().map_or(0, Vec::len)).sum());
    for r in records {
        write_record(&mut area, r, opts.base_offset, base_timestamp);
    }
    let area = match opts.compression {
        Compression::None => area,
        c => c.compress(&area),
    };
    let mut attributes = opts.compression as i16;
    if opts.log_append_time.is_some() {
        attributes |= LOG_APPEND_TIME_FLAG;
    }
    if opts.transactional {
        attributes |= TRANSACTIONAL_FLAG;
    }
    if opts.control {
        attributes |= CONTROL_FLAG;
    }
    if opts.delete_horizon_ms.is_some() {
        attributes |= DELETE_HORIZON_FLAG;
    }
    let last_offset_delta = opts
        .last_offset_delta
        .unwrap_or_else(|| records.last().map_or(0, |r| (r.offset - opts.base_offset) as i32));
    let h = BatchHeader {
        base_offset: opts.base_offset,
        batch_length: (HEADER_SIZE - LOG_OVERHEAD + area.len()) as i32,
        partition_leader_epoch: opts.partition_leader_epoch,
        magic: MAGIC,
        crc: 0,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id: opts.producer_id,
        producer_epoch: opts.producer_epoch,
        base_sequence: opts.base_sequence,
        records_count: records.len() as i32,
    };
    let mut out = vec![0u8; HEADER_SIZE];
    h.write(&mut out);
    out.extend_from_slice(&area);
    let crc = compute_crc(&out);
    out[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    out
}

/// Control record key: version int16 (0), type int16 (0 abort, 1 commit).
/// Control record value (end transaction marker): version int16 (0), coordinatorEpoch int32.
pub fn encode_control(control_type: i16, coordinator_epoch: i32, timestamp: i64, opts: &BatchOptions) -> Vec<u8> {
    let mut key = Vec::with_capacity(4);
    key.extend_from_slice(&0i16.to_be_bytes());
    key.extend_from_slice(&control_type.to_be_bytes());
    let mut value = Vec::with_capacity(6);
    value.extend_from_slice(&0i16.to_be_bytes());
    value.extend_from_slice(&coordinator_epoch.to_be_bytes());
    let rec = NewRecord { offset: opts.base_offset, timestamp, key: Some(key), value: Some(value), headers: vec![] };
    let opts = BatchOptions { control: true, transactional: true, ..opts.clone() };
    encode(&[rec], &opts)
}

/// The control type (0 abort, 1 commit) from a control record key.
pub fn control_type(key: Option<&[u8]>) -> Option<i16> {
    let k = key?;
    (k.len() >= 4).then(|| i16::from_be_bytes([k[2], k[3]]))
}

/// A batch with its record area decompressed, ready to iterate.
pub struct DecodedBatch<'a> {
    pub header: BatchHeader,
    pub position: u64,
    pub crc_valid: bool,
    area: Cow<'a, [u8]>,
}

impl<'a> DecodedBatch<'a> {
    /// Decodes a whole batch (`batch.len() == header.size()`). With `verify_crc`, a CRC
    /// mismatch is an error; without it the result records `crc_valid`.
    pub fn new(batch: &'a [u8], position: u64, verify_crc: bool) -> Result<Self> {
        let header = BatchHeader::parse(batch);
        check_header(&header, position)?;
        let crc_valid = compute_crc(batch) == header.crc;
        if verify_crc && !crc_valid {
            crate::records::record_batch::verify_crc(batch, &header, position)?;
        }
        let raw = &batch[HEADER_SIZE..];
        let codec = header
            .compression()
            .map_err(|_| Error::corrupt(position, format!("unknown compression codec id {}", header.codec_id())))?;
        let area = match codec {
            Compression::None => Cow::Borrowed(raw),
            c => Cow::Owned(c.decompress(raw, position + HEADER_SIZE as u64)?),
        };
        Ok(DecodedBatch { header, position, crc_valid, area })
    }

    /// The records in order. Stops at the first malformed record with an error.
    pub fn records(&self) -> Result<Vec<RecordRef<'_>>> {
        let h = &self.header;
        let lat = h.is_log_append_time().then_some(h.max_timestamp);
        if h.last_offset_delta < h.records_count - 1 {
            return Err(Error::corrupt(
                self.position,
                format!("lastOffsetDelta {} is below recordsCount {} - 1", h.last_offset_delta, h.records_count),
            ));
        }
        let mut cur = Cursor::new(&self.area, self.position + HEADER_SIZE as u64);
        let mut out: Vec<RecordRef<'_>> = Vec::with_capacity(h.records_count.clamp(0, 1 << 16) as usize);
        for _ in 0..h.records_count {
            let r = read_record(&mut cur, h.base_offset, h.base_timestamp, lat)?;
            // Compaction leaves gaps, so offsets need only ascend within the batch's range.
            if r.offset > h.last_offset() || out.last().is_some_and(|p| r.offset <= p.offset) || r.offset < h.base_offset {
                return Err(Error::corrupt(self.position, format!("record offset {} outside or out of order in the batch", r.offset)));
            }
            out.push(r);
        }
        if cur.remaining() != 0 {
            return Err(Error::corrupt(self.position, format!("{} bytes after the last record", cur.remaining())));
        }
        Ok(out)
    }
}


/// Iterates the whole batches in `buf`, stopping before a partial tail.
pub struct BatchIter<'a> {
    buf: &'a [u8],
    pos: usize,
    base: u64,
}

impl<'a> BatchIter<'a> {
    pub fn new(buf: &'a [u8], base: u64) -> Self {
        BatchIter { buf, pos: 0, base }
    }
    /// Bytes consumed so far: the end of the last whole batch returned.
    pub fn position(&self) -> usize {
        self.pos
    }
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = Result<(usize, BatchHeader, &'a [u8])>;

    fn next(&mut self) -> Option<Self::Item> {
        match next_batch(self.buf, self.pos, self.base) {
            Ok(None) => None,
            Err(e) => {
                self.pos = self.buf.len();
                Some(Err(e))
            }
            Ok(Some(h)) => {
                let at = self.pos;
                self.pos += h.size();
                Some(Ok((at, h, &self.buf[at..self.pos])))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compression::ALL;

    fn recs(n: usize) -> Vec<NewRecord> {
        (0..n)
            .map(|i| NewRecord {
                offset: i as i64,
                timestamp: 1_700_000_000_000 + i as i64,
                key: (i % 3 != 0).then(|| format!("k{i}").into_bytes()),
                value: (i % 5 != 4).then(|| vec![i as u8; i * 7]),
                headers: if i % 2 == 0 { vec![(b"h".to_vec(), Some(b"v".to_vec())), (b"n".to_vec(), None)] } else { vec![] },
            })
            .collect()
    }

    #[test]
    fn encode_decode_every_codec() {
        let rs: Vec<NewRecord> = recs(50).into_iter().map(|r| NewRecord { offset: r.offset + 100, ..r }).collect();
        for c in ALL {
            let b = encode(&rs, &BatchOptions { compression: c, base_offset: 100, ..Default::default() });
            let h = validate(&b, 0, true).unwrap_or_else(|e| panic!("{}: {e}", c.name()));
            assert_eq!(h.records_count, 50);
            assert_eq!(h.base_offset, 100);
            assert_eq!(h.last_offset(), 149);
            assert_eq!(h.max_timestamp, 1_700_000_000_049);
            assert_eq!(h.compression().unwrap(), c);
            let d = DecodedBatch::new(&b, 0, true).unwrap();
            let got: Vec<NewRecord> = d.records().unwrap().iter().map(|r| r.to_owned_record()).collect();
            assert_eq!(got, rs, "{}", c.name());
        }
    }

    #[test]
    fn validation_rejects_corruption() {
        let b = encode(&recs(5), &BatchOptions::default());
        let mut crc_bad = b.clone();
        crc_bad[70] ^= 1;
        assert!(matches!(validate(&crc_bad, 0, true), Err(Error::CorruptRecord { .. })));
        let mut magic_bad = b.clone();
        magic_bad[16] = 1;
        assert!(validate(&magic_bad, 0, true).unwrap_err().to_string().contains("magic"));
        let mut delta_bad = b.clone();
        delta_bad[23..27].copy_from_slice(&7i32.to_be_bytes());
        let crc = compute_crc(&delta_bad);
        delta_bad[17..21].copy_from_slice(&crc.to_be_bytes());
        assert!(validate(&delta_bad, 0, true).unwrap_err().to_string().contains("lastOffsetDelta"));
        assert!(validate(&b[..b.len() - 1], 0, true).is_err());
    }

    #[test]
    fn crc_with_header_matches_full_crc() {
        let b = encode(&recs(9), &BatchOptions { compression: Compression::Lz4, ..Default::default() });
        let h = BatchHeader::parse(&b);
        verify_crc(&b, &h, 0).unwrap();
        let mut hdr = [0u8; HEADER_SIZE];
        hdr.copy_from_slice(&b[..HEADER_SIZE]);
        assert_eq!(crc_with_header(&hdr, &b[HEADER_SIZE..]), h.crc);
    }

    #[test]
    fn log_append_time_overrides_record_timestamps() {
        let b = encode(&recs(3), &BatchOptions { log_append_time: Some(42), ..Default::default() });
        let d = DecodedBatch::new(&b, 0, true).unwrap();
        assert!(d.header.is_log_append_time());
        assert!(d.records().unwrap().iter().all(|r| r.timestamp == 42));
    }

    #[test]
    fn control_batch_and_last_sequence() {
        let b = encode_control(1, 7, 5, &BatchOptions { producer_id: 9, producer_epoch: 2, ..Default::default() });
        let d = DecodedBatch::new(&b, 0, true).unwrap();
        assert!(d.header.is_control() && d.header.is_transactional());
        assert_eq!(control_type(d.records().unwrap()[0].key), Some(1));
        let mut h = d.header;
        h.base_sequence = i32::MAX - 1;
        h.last_offset_delta = 3;
        assert_eq!(h.last_sequence(), 1);
    }

    #[test]
    fn iterator_stops_before_partial_tail() {
        let mut buf = encode(&recs(2), &BatchOptions::default());
        let one = buf.len();
        buf.extend(encode(&recs(3), &BatchOptions { base_offset: 2, ..Default::default() }));
        let two = buf.len();
        buf.extend_from_slice(&buf.clone()[..30]);
        let mut it = BatchIter::new(&buf, 0);
        assert_eq!(it.next().unwrap().unwrap().0, 0);
        assert_eq!(it.next().unwrap().unwrap().0, one);
        assert!(it.next().is_none());
        assert_eq!(it.position(), two);
    }
}
