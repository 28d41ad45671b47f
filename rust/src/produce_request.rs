//! Produce requests (api key 0) in their common shape, read in place.
//!
//! Frame (the bytes after the int32 size prefix):
//! - header: api_key int16, api_version int16, correlation_id int32, client_id nullable
//!   string (int16 length at every version); v9+ (flexible): header tagged fields.
//! - body: transactional_id nullable string (v3+), acks int16, timeout_ms int32,
//!   topic_data [name string, partition_data [index int32, records nullable bytes]].
//!   Records are message sets of magic 0/1 in v0-v2 (`legacy_records`), RecordBatch v2
//!   from v3; `has_producer_id` reads v2 batch headers only.
//!
//! Flexible versions (v9+) give strings, bytes and arrays compact lengths (unsigned
//! varint of length + 1, 0 for null) and end each struct with a tagged-field count.
//!
//! [`parse`] accepts only that shape with no tagged fields, valid UTF-8 strings and no
//! bytes after the body, and answers `None` for anything else: the caller decodes such a
//! frame with its generic codec, which names what is wrong with a malformed one.

use std::ops::{Deref, DerefMut, Range};

use crate::records::record_batch::{BatchHeader, HEADER_SIZE, LOG_OVERHEAD};
use crate::wire_reader::WireReader;

pub const API_KEY: i16 = 0;
pub const FIRST_FLEXIBLE_VERSION: i16 = 9;
/// v13 names topics by id instead of by name; the shape read here ends before it.
pub const LAST_NAMED_VERSION: i16 = 12;

/// A Produce request as byte ranges into its frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceRequestView {
    pub api_version: i16,
    pub correlation_id: i32,
    pub client_id: Option<Range<usize>>,
    pub transactional_id: Option<Range<usize>>,
    pub acks: i16,
    pub timeout_ms: i32,
    pub topics: Vec<TopicProduceData>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicProduceData {
    /// UTF-8, checked.
    pub name: Range<usize>,
    pub partitions: Vec<PartitionProduceData>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionProduceData {
    pub index: i32,
    /// `None`: null records.
    pub records: Option<Range<usize>>,
}

/// A [`WireReader`] that knows whether the version is flexible.
struct Cursor<'a> {
    r: WireReader<'a>,
    flexible: bool,
}

impl<'a> Deref for Cursor<'a> {
    type Target = WireReader<'a>;
    fn deref(&self) -> &WireReader<'a> {
        &self.r
    }
}

impl DerefMut for Cursor<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.r
    }
}

impl<'a> Cursor<'a> {
    /// A string's or bytes' length, -1 for null: compact when flexible, else `fixed_i16`
    /// says int16 (strings) or int32 (bytes).
    fn length(&mut self, fixed_i16: bool) -> Option<i64> {
        if self.flexible {
            Some(i64::from(self.uvarint()?) - 1)
        } else if fixed_i16 {
            Some(i64::from(self.i16()?))
        } else {
            Some(i64::from(self.i32()?))
        }
    }

    fn range(&mut self, len: i64) -> Option<Option<Range<usize>>> {
        match len {
            -1 => Some(None),
            n if n < 0 => None,
            n => {
                let start = self.pos;
                self.take(usize::try_from(n).ok()?)?;
                Some(Some(start..self.pos))
            }
        }
    }

    fn string(&mut self, len: i64) -> Option<Option<Range<usize>>> {
        let r = self.range(len)?;
        if let Some(r) = &r {
            std::str::from_utf8(&self.buf[r.clone()]).ok()?;
        }
        Some(r)
    }

    /// An array count; a count that could not fit in the bytes left is refused, so a
    /// hostile count cannot size an allocation.
    fn count(&mut self) -> Option<usize> {
        let n = if self.flexible { i64::from(self.uvarint()?) - 1 } else { i64::from(self.i32()?) };
        let n = usize::try_from(n).ok()?;
        (n <= self.remaining()).then_some(n)
    }

    /// The tagged-field count ending a flexible struct, which must be 0.
    fn no_tagged_fields(&mut self) -> Option<()> {
        if self.flexible {
            (self.take(1)? == [0]).then_some(())
        } else {
            Some(())
        }
    }
}

/// The request in `frame`, or `None` if it is not a Produce request in the common shape.
pub fn parse(frame: &[u8]) -> Option<ProduceRequestView> {
    let mut c = Cursor { r: WireReader::new(frame), flexible: false };
    if c.i16()? != API_KEY {
        return None;
    }
    let api_version = c.i16()?;
    if !(0..=LAST_NAMED_VERSION).contains(&api_version) {
        return None;
    }
    let correlation_id = c.i32()?;
    let client_id_len = i64::from(c.i16()?);
    let client_id = c.string(client_id_len)?;
    c.flexible = api_version >= FIRST_FLEXIBLE_VERSION;
    c.no_tagged_fields()?;
    let transactional_id = if api_version >= 3 {
        let len = c.length(true)?;
        c.string(len)?
    } else {
        None
    };
    let acks = c.i16()?;
    let timeout_ms = c.i32()?;
    let topic_count = c.count()?;
    let mut topics = Vec::with_capacity(topic_count);
    for _ in 0..topic_count {
        let len = c.length(true)?;
        let name = c.string(len)??;
        let partition_count = c.count()?;
        let mut partitions = Vec::with_capacity(partition_count);
        for _ in 0..partition_count {
            let index = c.i32()?;
            let len = c.length(false)?;
            let records = c.range(len)?;
            c.no_tagged_fields()?;
            partitions.push(PartitionProduceData { index, records });
        }
        c.no_tagged_fields()?;
        topics.push(TopicProduceData { name, partitions });
    }
    c.no_tagged_fields()?;
    (c.pos == frame.len()).then_some(ProduceRequestView {
        api_version,
        correlation_id,
        client_id,
        transactional_id,
        acks,
        timeout_ms,
        topics,
    })
}

/// Whether any batch in a produce request's `records` carries a producer id (an
/// idempotent or transactional producer) or the transactional or control attribute.
/// Walks only the batch lengths: the batches are validated whole when appended.
pub fn has_producer_id(records: &[u8]) -> bool {
    let mut pos = 0;
    while pos + HEADER_SIZE <= records.len() {
        let h = BatchHeader::parse(&records[pos..]);
        if h.producer_id >= 0 || h.is_transactional() || h.is_control() {
            return true;
        }
        pos += LOG_OVERHEAD + (h.batch_length.max(HEADER_SIZE as i32 - LOG_OVERHEAD as i32) as usize);
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::record_batch::NO_PRODUCER_ID;

    fn frame(version: i16, flexible_tags: &[u8]) -> Vec<u8> {
        let flexible = version >= FIRST_FLEXIBLE_VERSION;
        let mut f = Vec::new();
        f.extend_from_slice(&API_KEY.to_be_bytes());
        f.extend_from_slice(&version.to_be_bytes());
        f.extend_from_slice(&7i32.to_be_bytes());
        f.extend_from_slice(&2i16.to_be_bytes());
        f.extend_from_slice(b"id");
        if flexible {
            f.push(0);
            f.push(0); // null transactional id
        } else {
            f.extend_from_slice(&(-1i16).to_be_bytes());
        }
        f.extend_from_slice(&(-1i16).to_be_bytes());
        f.extend_from_slice(&30_000i32.to_be_bytes());
        if flexible {
            f.extend_from_slice(&[2, 2, b't', 2]); // 1 topic "t", 1 partition
            f.extend_from_slice(&5i32.to_be_bytes());
            f.extend_from_slice(&[4, b'a', b'b', b'c', 0, 0]);
            f.extend_from_slice(flexible_tags);
        } else {
            f.extend_from_slice(&1i32.to_be_bytes());
            f.extend_from_slice(&1i16.to_be_bytes());
            f.push(b't');
            f.extend_from_slice(&1i32.to_be_bytes());
            f.extend_from_slice(&5i32.to_be_bytes());
            f.extend_from_slice(&3i32.to_be_bytes());
            f.extend_from_slice(b"abc");
        }
        f
    }

    #[test]
    fn reads_both_encodings() {
        for version in [3, 8, 9, 11] {
            let f = frame(version, &[0]);
            let v = parse(&f).unwrap();
            assert_eq!((v.api_version, v.correlation_id, v.acks, v.timeout_ms), (version, 7, -1, 30_000));
            assert_eq!(&f[v.client_id.unwrap()], b"id");
            assert_eq!(v.transactional_id, None);
            assert_eq!(&f[v.topics[0].name.clone()], b"t");
            let p = &v.topics[0].partitions[0];
            assert_eq!((p.index, &f[p.records.clone().unwrap()]), (5, &b"abc"[..]));
        }
    }

    #[test]
    fn refuses_tagged_fields_truncation_and_trailing_bytes() {
        assert!(parse(&frame(9, &[0])).is_some());
        assert_eq!(parse(&frame(9, &[1, 0, 0])), None); // one empty tagged field
        let f = frame(8, &[]);
        for end in 0..f.len() {
            assert_eq!(parse(&f[..end]), None, "truncated at {end}");
        }
        let mut trailing = f.clone();
        trailing.push(0);
        assert_eq!(parse(&trailing), None);
    }

    #[test]
    fn refuses_a_count_larger_than_the_frame() {
        let mut f = frame(8, &[]);
        let at = f.len() - 3 - 4 - 4 - 4; // the partition count
        f[at..at + 4].copy_from_slice(&i32::MAX.to_be_bytes());
        assert_eq!(parse(&f), None);
    }

    #[test]
    fn finds_a_producer_id_in_any_batch() {
        let mut batches = vec![0u8; 2 * HEADER_SIZE];
        for at in [0, HEADER_SIZE] {
            batches[at + 8..at + 12].copy_from_slice(&((HEADER_SIZE - LOG_OVERHEAD) as i32).to_be_bytes());
            batches[at + 43..at + 51].copy_from_slice(&NO_PRODUCER_ID.to_be_bytes());
        }
        assert!(!has_producer_id(&batches));
        batches[HEADER_SIZE + 43..HEADER_SIZE + 51].copy_from_slice(&42i64.to_be_bytes());
        assert!(has_producer_id(&batches));
    }

    #[test]
    fn a_transactional_or_control_attribute_counts_without_a_producer_id() {
        for attribute in [0x10i16, 0x20] {
            let mut batch = vec![0u8; HEADER_SIZE];
            batch[8..12].copy_from_slice(&((HEADER_SIZE - LOG_OVERHEAD) as i32).to_be_bytes());
            batch[43..51].copy_from_slice(&NO_PRODUCER_ID.to_be_bytes());
            assert!(!has_producer_id(&batch));
            batch[21..23].copy_from_slice(&attribute.to_be_bytes());
            assert!(has_producer_id(&batch));
        }
    }
}
