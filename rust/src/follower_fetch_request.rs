//! A follower's Fetch request (api key 1, v12-v17) in its common shape, read in one pass.
//!
//! Frame (the bytes after the int32 size prefix), every version here flexible:
//! - header v2: api_key int16, api_version int16, correlation_id int32, client_id
//!   nullable string (int16 length), tagged fields.
//! - body: replica_id int32 (v12-v14), max_wait_ms int32, min_bytes int32, max_bytes
//!   int32, isolation_level int8, session_id int32, session_epoch int32, topics [topic
//!   compact string (v12) or topic_id uuid (v13+), partitions [partition int32,
//!   current_leader_epoch int32, fetch_offset int64, last_fetched_epoch int32,
//!   log_start_offset int64, partition_max_bytes int32, tagged fields (v17: tag 0
//!   replica_directory_id)], tagged fields], forgotten_topics_data [...], rack_id compact
//!   string, tagged fields (tag 0 cluster_id; v15+: tag 1 replica_state {replica_id
//!   int32, replica_epoch int64, tagged fields}).
//!
//! Compact arrays and strings carry an unsigned varint of length + 1 (0: null).
//!
//! [`parse`] accepts only a follower's sessionless fetch: a replica id >= 0 (from v15 in
//! replica_state), session_id 0 and session_epoch -1, no forgotten topics, valid UTF-8
//! topic names and no bytes after the body. Tagged fields are skipped whole, as Kafka
//! ignores those it does not read. It answers `None` for anything else (a consumer's
//! fetch, a fetch session, a malformed frame): the caller decodes such a frame with its
//! generic codec, which names what is wrong with a malformed one.

use std::ops::{Deref, DerefMut, Range};

use crate::wire_reader::WireReader;

pub const API_KEY: i16 = 1;
pub const FIRST_VERSION: i16 = 12;
pub const LAST_VERSION: i16 = 17;
/// v13 names topics by id instead of by name.
pub const FIRST_TOPIC_ID_VERSION: i16 = 13;
/// v15 moves the replica id from the body into the replica_state tagged field.
pub const FIRST_REPLICA_STATE_VERSION: i16 = 15;
const REPLICA_STATE_TAG: u32 = 1;

/// A follower's Fetch request: its header's fields and each partition's fetch state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowerFetchView {
    pub api_version: i16,
    pub correlation_id: i32,
    pub client_id: Option<Range<usize>>,
    pub replica_id: i32,
    pub max_wait_ms: i32,
    pub min_bytes: i32,
    pub max_bytes: i32,
    pub topics: Vec<FetchTopic>,
}

/// A topic by name (v12; UTF-8, checked) or by id (v13+).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopicRef {
    Name(Range<usize>),
    Id(u128),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchTopic {
    pub topic: TopicRef,
    pub partitions: Vec<FetchPartition>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchPartition {
    pub partition: i32,
    pub current_leader_epoch: i32,
    pub fetch_offset: i64,
    pub last_fetched_epoch: i32,
    pub log_start_offset: i64,
    pub partition_max_bytes: i32,
}

/// The smallest encoded partition: 32 bytes of fields and an empty tagged-field count.
const MIN_PARTITION_BYTES: usize = 33;

/// A [`WireReader`] with the flexible-version reads of a Fetch.
struct Cursor<'a>(WireReader<'a>);

impl<'a> Deref for Cursor<'a> {
    type Target = WireReader<'a>;
    fn deref(&self) -> &WireReader<'a> {
        &self.0
    }
}

impl DerefMut for Cursor<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl<'a> Cursor<'a> {
    /// A compact string's bytes (None inside: null), checked as UTF-8.
    fn compact_string(&mut self) -> Option<Option<Range<usize>>> {
        let n = self.uvarint()?;
        if n == 0 {
            return Some(None);
        }
        let start = self.pos;
        self.take(usize::try_from(n - 1).ok()?)?;
        std::str::from_utf8(&self.buf[start..self.pos]).ok()?;
        Some(Some(start..self.pos))
    }

    /// A compact array's count; null, or a count of items of at least `min_item` bytes
    /// that could not fit in the bytes left, is refused, so a hostile count cannot size
    /// an allocation.
    fn count(&mut self, min_item: usize) -> Option<usize> {
        let n = usize::try_from(self.uvarint()?.checked_sub(1)?).ok()?;
        (n.checked_mul(min_item)? <= self.remaining()).then_some(n)
    }

    /// A tagged-field section: each (tag, bytes) to `f`, which may read them; the
    /// fields' sizes are checked.
    fn tagged_fields(&mut self, mut f: impl FnMut(u32, &'a [u8]) -> Option<()>) -> Option<()> {
        let n = self.uvarint()?;
        for _ in 0..n {
            let tag = self.uvarint()?;
            let size = usize::try_from(self.uvarint()?).ok()?;
            f(tag, self.take(size)?)?;
        }
        Some(())
    }

    fn skip_tagged_fields(&mut self) -> Option<()> {
        self.tagged_fields(|_, _| Some(()))
    }
}

/// The replica id in a replica_state tagged field's bytes (replica_id int32,
/// replica_epoch int64, tagged fields).
fn replica_state_id(field: &[u8]) -> Option<i32> {
    let mut c = Cursor(WireReader::new(field));
    let id = c.i32()?;
    c.i64()?;
    c.skip_tagged_fields()?;
    (c.pos == field.len()).then_some(id)
}

/// The request in `frame`, or `None` if it is not a follower's sessionless Fetch in the
/// common shape.
pub fn parse(frame: &[u8]) -> Option<FollowerFetchView> {
    let mut c = Cursor(WireReader::new(frame));
    if c.i16()? != API_KEY {
        return None;
    }
    let api_version = c.i16()?;
    if !(FIRST_VERSION..=LAST_VERSION).contains(&api_version) {
        return None;
    }
    let correlation_id = c.i32()?;
    let client_id = match c.i16()? {
        -1 => None,
        n => {
            let start = c.pos;
            c.take(usize::try_from(n).ok()?)?;
            std::str::from_utf8(&frame[start..c.pos]).ok()?;
            Some(start..c.pos)
        }
    };
    c.skip_tagged_fields()?;
    let mut replica_id = if api_version < FIRST_REPLICA_STATE_VERSION { c.i32()? } else { -1 };
    if api_version < FIRST_REPLICA_STATE_VERSION && replica_id < 0 {
        return None; // a consumer's fetch
    }
    let max_wait_ms = c.i32()?;
    let min_bytes = c.i32()?;
    let max_bytes = c.i32()?;
    c.i8()?; // isolation_level: a follower reads to the log end whatever it asks
    if c.i32()? != 0 || c.i32()? != -1 {
        return None; // a fetch session
    }
    let by_id = api_version >= FIRST_TOPIC_ID_VERSION;
    let topic_count = c.count(if by_id { 17 } else { 2 })?;
    let mut topics = Vec::with_capacity(topic_count);
    for _ in 0..topic_count {
        let topic = if by_id {
            TopicRef::Id(u128::from_be_bytes(c.array()?))
        } else {
            TopicRef::Name(c.compact_string()??)
        };
        let partition_count = c.count(MIN_PARTITION_BYTES)?;
        let mut partitions = Vec::with_capacity(partition_count);
        for _ in 0..partition_count {
            partitions.push(FetchPartition {
                partition: c.i32()?,
                current_leader_epoch: c.i32()?,
                fetch_offset: c.i64()?,
                last_fetched_epoch: c.i32()?,
                log_start_offset: c.i64()?,
                partition_max_bytes: c.i32()?,
            });
            c.skip_tagged_fields()?;
        }
        c.skip_tagged_fields()?;
        topics.push(FetchTopic { topic, partitions });
    }
    if c.count(0)? != 0 {
        return None; // forgotten topics belong to a fetch session
    }
    c.compact_string()?; // rack_id: a follower is not sent to another replica
    let state_version = api_version >= FIRST_REPLICA_STATE_VERSION;
    c.tagged_fields(|tag, field| {
        if state_version && tag == REPLICA_STATE_TAG {
            replica_id = replica_state_id(field)?;
        }
        Some(())
    })?;
    (c.pos == frame.len() && replica_id >= 0).then_some(FollowerFetchView {
        api_version,
        correlation_id,
        client_id,
        replica_id,
        max_wait_ms,
        min_bytes,
        max_bytes,
        topics,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uvarint(out: &mut Vec<u8>, mut n: u32) {
        while n >= 0x80 {
            out.push((n as u8 & 0x7F) | 0x80);
            n >>= 7;
        }
        out.push(n as u8);
    }

    /// A follower's fetch of one partition: `replica` in the body (v12-v14) or in
    /// replica_state (v15+, omitted when negative), then `tail` (forgotten topics, rack
    /// id, tagged fields) unless it is None.
    fn frame(version: i16, replica: i32, session: (i32, i32), tail: Option<&[u8]>) -> Vec<u8> {
        let mut f = Vec::new();
        f.extend_from_slice(&API_KEY.to_be_bytes());
        f.extend_from_slice(&version.to_be_bytes());
        f.extend_from_slice(&7i32.to_be_bytes());
        f.extend_from_slice(&2i16.to_be_bytes());
        f.extend_from_slice(b"id");
        f.push(0);
        if version < FIRST_REPLICA_STATE_VERSION {
            f.extend_from_slice(&replica.to_be_bytes());
        }
        for v in [500i32, 1, 1 << 20] {
            f.extend_from_slice(&v.to_be_bytes());
        }
        f.push(0);
        f.extend_from_slice(&session.0.to_be_bytes());
        f.extend_from_slice(&session.1.to_be_bytes());
        f.push(2); // one topic
        if version >= FIRST_TOPIC_ID_VERSION {
            f.extend_from_slice(&0x1234u128.to_be_bytes());
        } else {
            f.extend_from_slice(&[2, b't']);
        }
        f.push(2); // one partition
        f.extend_from_slice(&3i32.to_be_bytes());
        f.extend_from_slice(&5i32.to_be_bytes());
        f.extend_from_slice(&100i64.to_be_bytes());
        f.extend_from_slice(&4i32.to_be_bytes());
        f.extend_from_slice(&0i64.to_be_bytes());
        f.extend_from_slice(&(1i32 << 20).to_be_bytes());
        if version >= 17 {
            f.extend_from_slice(&[1, 0, 16]); // replica_directory_id
            f.extend_from_slice(&[9; 16]);
        } else {
            f.push(0);
        }
        f.push(0);
        if let Some(tail) = tail {
            f.extend_from_slice(tail);
            return f;
        }
        f.extend_from_slice(&[1, 1]); // no forgotten topics, rack ""
        if version >= FIRST_REPLICA_STATE_VERSION && replica >= 0 {
            let mut state = replica.to_be_bytes().to_vec();
            state.extend_from_slice(&9i64.to_be_bytes());
            state.push(0);
            f.extend_from_slice(&[2, 0, 1, 1, 1]); // cluster_id "", then replica_state
            uvarint(&mut f, state.len() as u32);
            f.extend_from_slice(&state);
        } else {
            f.push(0);
        }
        f
    }

    #[test]
    fn reads_every_version() {
        for version in FIRST_VERSION..=LAST_VERSION {
            let f = frame(version, 2, (0, -1), None);
            let v = parse(&f).unwrap_or_else(|| panic!("v{version}"));
            assert_eq!((v.api_version, v.correlation_id, v.replica_id), (version, 7, 2));
            assert_eq!((v.max_wait_ms, v.min_bytes, v.max_bytes), (500, 1, 1 << 20));
            assert_eq!(&f[v.client_id.unwrap()], b"id");
            let t = &v.topics[0];
            match &t.topic {
                TopicRef::Name(r) => assert_eq!(&f[r.clone()], b"t"),
                TopicRef::Id(id) => assert_eq!(*id, 0x1234),
            }
            let want = FetchPartition {
                partition: 3,
                current_leader_epoch: 5,
                fetch_offset: 100,
                last_fetched_epoch: 4,
                log_start_offset: 0,
                partition_max_bytes: 1 << 20,
            };
            assert_eq!(t.partitions, vec![want]);
        }
    }

    #[test]
    fn leaves_consumers_sessions_and_forgotten_topics_to_the_generic_codec() {
        for version in FIRST_VERSION..=LAST_VERSION {
            assert_eq!(parse(&frame(version, -1, (0, -1), None)), None, "consumer v{version}");
            assert_eq!(parse(&frame(version, 2, (0, 0), None)), None, "new session");
            assert_eq!(parse(&frame(version, 2, (5, 1), None)), None, "session");
            let forgotten: &[u8] = if version >= FIRST_TOPIC_ID_VERSION {
                &[2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 1, 0, 1, 0]
            } else {
                &[2, 2, b't', 2, 0, 0, 0, 1, 0, 1, 0]
            };
            assert_eq!(parse(&frame(version, 2, (0, -1), Some(forgotten))), None);
        }
        assert_eq!(parse(&frame(11, 2, (0, -1), None)), None, "v11 is not flexible");
    }

    #[test]
    fn refuses_truncation_trailing_bytes_and_hostile_counts() {
        for version in FIRST_VERSION..=LAST_VERSION {
            let f = frame(version, 2, (0, -1), None);
            for end in 0..f.len() {
                assert_eq!(parse(&f[..end]), None, "v{version} cut at {end}");
            }
            let mut longer = f.clone();
            longer.push(0);
            assert_eq!(parse(&longer), None);
        }
        let mut f = frame(12, 2, (0, -1), None);
        let at = 2 + 2 + 4 + 2 + 2 + 1 + 4 * 4 + 1 + 8; // the topic count
        assert_eq!(f[at], 2);
        f.splice(at..at + 1, [0xFF, 0xFF, 0xFF, 0xFF, 0x07]);
        assert_eq!(parse(&f), None);
    }

    #[test]
    fn refuses_bad_utf8_and_bad_replica_state() {
        let mut f = frame(12, 2, (0, -1), None);
        let at = f.iter().position(|&b| b == b't').unwrap();
        f[at] = 0xFF;
        assert_eq!(parse(&f), None);
        // replica_state one byte short
        let mut f = frame(15, 2, (0, -1), None);
        let n = f.len();
        f[n - 14] = 12;
        f.remove(n - 1);
        assert_eq!(parse(&f), None);
    }
}
