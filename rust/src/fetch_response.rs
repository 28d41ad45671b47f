//! Fetch responses (api key 1, v4-v17), encoded around the records the broker sends by
//! `sendfile(2)`.
//!
//! Frame: int32 size, correlation_id int32, header tagged fields (v12+); body:
//! throttle_time_ms int32, error_code int16 (v7+), session_id int32 (v7+), responses
//! [topic string (v4-12) | topic_id uuid (v13+), partitions [partition_index int32,
//! error_code int16, high_watermark int64, last_stable_offset int64, log_start_offset
//! int64 (v5+), aborted_transactions nullable [producer_id int64, first_offset int64],
//! preferred_read_replica int32 (v11+), records nullable bytes]].
//! Flexible versions (v12+) use compact lengths and end each struct with a tagged-field
//! count. No tagged fields are written: a single broker never reports a diverging
//! epoch, a current leader, a snapshot id or node endpoints, and its preferred read
//! replica is always -1 (itself).
//!
//! Records are not copied: the encoder writes each records field's length and leaves
//! its bytes out; `records_at` gives, in order, the offsets in `head` where each
//! non-empty records field's bytes belong. The frame's size counts them.

use crate::wire_writer::WireWriter;

pub const FIRST_FLEXIBLE_VERSION: i16 = 12;
pub const FIRST_TOPIC_ID_VERSION: i16 = 13;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchPartitionResponse {
    pub index: i32,
    pub error_code: i16,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// (producer_id, first_offset) of each aborted transaction; None for read_uncommitted.
    pub aborted_transactions: Option<Vec<(i64, i64)>>,
    pub records_len: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchTopicResponse<'a> {
    pub name: &'a str,
    pub topic_id: [u8; 16],
    pub partitions: Vec<FetchPartitionResponse>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedFetchResponse {
    /// The frame without the records' bytes.
    pub head: Vec<u8>,
    /// Where each non-empty records field's bytes go in `head`, ascending.
    pub records_at: Vec<usize>,
}

pub fn encode(
    correlation_id: i32,
    version: i16,
    throttle_time_ms: i32,
    error_code: i16,
    session_id: i32,
    topics: &[FetchTopicResponse<'_>],
) -> EncodedFetchResponse {
    let parts: usize = topics.iter().map(|t| t.partitions.len()).sum();
    let mut w = WireWriter::new(32 + 24 * topics.len() + 48 * parts, version >= FIRST_FLEXIBLE_VERSION);
    let mut records_at = Vec::new();
    let mut records_total: u64 = 0;
    w.start_frame(correlation_id);
    w.i32(throttle_time_ms);
    if version >= 7 {
        w.i16(error_code);
        w.i32(session_id);
    }
    w.count(Some(topics.len()));
    for t in topics {
        if version >= FIRST_TOPIC_ID_VERSION {
            w.out.extend_from_slice(&t.topic_id);
        } else {
            w.nullable_string(Some(t.name));
        }
        w.count(Some(t.partitions.len()));
        for p in &t.partitions {
            w.i32(p.index);
            w.i16(p.error_code);
            w.i64(p.high_watermark);
            w.i64(p.last_stable_offset);
            if version >= 5 {
                w.i64(p.log_start_offset);
            }
            w.count(p.aborted_transactions.as_ref().map(Vec::len));
            for (producer_id, first_offset) in p.aborted_transactions.iter().flatten() {
                w.i64(*producer_id);
                w.i64(*first_offset);
                w.no_tagged_fields();
            }
            if version >= 11 {
                w.i32(-1);
            }
            w.bytes_length(p.records_len);
            if p.records_len > 0 {
                records_at.push(w.out.len());
                records_total += u64::from(p.records_len);
            }
            w.no_tagged_fields();
        }
        w.no_tagged_fields();
    }
    w.no_tagged_fields();
    w.finish_frame(records_total);
    EncodedFetchResponse { head: w.out, records_at }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partition(records_len: u32, aborted: Option<Vec<(i64, i64)>>) -> FetchPartitionResponse {
        FetchPartitionResponse {
            index: 2,
            error_code: 0,
            high_watermark: 10,
            last_stable_offset: 10,
            log_start_offset: 0,
            aborted_transactions: aborted,
            records_len,
        }
    }

    fn one(version: i16, p: FetchPartitionResponse) -> EncodedFetchResponse {
        encode(5, version, 0, 0, 77, &[FetchTopicResponse { name: "t", topic_id: [9; 16], partitions: vec![p] }])
    }

    #[test]
    fn sizes_follow_the_version() {
        // v4: size 4, correlation 4, throttle 4, topics 4, name 2+1, partitions 4,
        // partition 2+4+8+8 (index, error, hw, lso), aborted -1 4, records length 4
        assert_eq!(one(4, partition(0, None)).head.len(), 4 + 4 + 4 + 4 + 3 + 4 + 22 + 4 + 4);
        // v7 adds error_code 2 and session_id 4 (and v5 log_start_offset 8)
        assert_eq!(one(7, partition(0, None)).head.len(), 4 + 4 + 4 + 6 + 4 + 3 + 4 + 30 + 4 + 4);
        // v13: header tags 1, topics 1, topic id 16, partitions 1, partition 30,
        // aborted null 1, preferred replica 4, records 1, tags 1+1+1
        assert_eq!(one(13, partition(0, None)).head.len(), 4 + 4 + 1 + 4 + 6 + 1 + 16 + 1 + 30 + 1 + 4 + 1 + 3);
    }

    #[test]
    fn records_are_left_out_and_counted_in_the_size() {
        let e = one(12, partition(300, Some(vec![(7, 3)])));
        let size = i32::from_be_bytes(e.head[..4].try_into().unwrap()) as usize;
        assert_eq!(size, e.head.len() - 4 + 300);
        // the compact length 301 precedes the records; then the partition's and the
        // topic's and the body's tag counts follow
        let at = e.records_at[0];
        assert_eq!(&e.head[at - 2..at], &[0xAD, 0x02]);
        assert_eq!(&e.head[at..], &[0, 0, 0]);
        assert!(one(12, partition(0, None)).records_at.is_empty());
    }
}
