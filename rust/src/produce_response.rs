//! Produce responses (api key 0), encoded whole.
//!
//! Frame: int32 size, then correlation_id int32 and, v9+ (flexible), header tagged
//! fields; body: responses [name string, partition_responses [index int32, error_code
//! int16, base_offset int64, log_append_time_ms int64 (v2+), log_start_offset int64
//! (v5+), record_errors [batch_index int32, batch_index_error_message nullable string]
//! (v8+), error_message nullable string (v8+)]], throttle_time_ms int32 (v1+).
//! Flexible versions use compact lengths and end each struct with a tagged-field
//! section (KIP-482, written as in `fetch_response`). Tagged fields written, v10+, with
//! NOT_LEADER_OR_FOLLOWER:
//! - partition tag 0 `current_leader`: LeaderIdAndEpoch {leader_id int32, leader_epoch
//!   int32, tags}, unless (-1, -1);
//! - body tag 0 `node_endpoints`: compact [node_id int32, host compact string, port
//!   int32, rack compact nullable string, tags], unless empty.

use crate::fetch_response::{leader_id_and_epoch, node_endpoints_field, tagged_fields, NodeEndpoint};
use crate::produce_request::FIRST_FLEXIBLE_VERSION;
use crate::wire_writer::WireWriter;

pub const FIRST_LEADER_HINT_VERSION: i16 = 10;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionProduceResponse<'a> {
    pub index: i32,
    pub error_code: i16,
    pub base_offset: i64,
    pub log_append_time_ms: i64,
    pub log_start_offset: i64,
    /// (batch_index, batch_index_error_message)
    pub record_errors: Vec<(i32, Option<&'a str>)>,
    pub error_message: Option<&'a str>,
    /// (leader_id, leader_epoch) of the partition's current leader (v10+).
    pub current_leader: Option<(i32, i32)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicProduceResponse<'a> {
    pub name: &'a str,
    pub partitions: Vec<PartitionProduceResponse<'a>>,
}

/// The whole response frame, size prefix included. Strings longer than an int16 length
/// can hold are cut at a character boundary below 32,767 bytes.
pub fn encode(
    correlation_id: i32,
    version: i16,
    topics: &[TopicProduceResponse<'_>],
    throttle_time_ms: i32,
    node_endpoints: &[NodeEndpoint<'_>],
) -> Vec<u8> {
    let hints = version >= FIRST_LEADER_HINT_VERSION;
    let mut w = WireWriter::new(64, version >= FIRST_FLEXIBLE_VERSION);
    w.start_frame(correlation_id);
    w.count(Some(topics.len()));
    for t in topics {
        w.nullable_string(Some(clip(t.name)));
        w.count(Some(t.partitions.len()));
        for p in &t.partitions {
            w.out.extend_from_slice(&p.index.to_be_bytes());
            w.out.extend_from_slice(&p.error_code.to_be_bytes());
            w.out.extend_from_slice(&p.base_offset.to_be_bytes());
            if version >= 2 {
                w.out.extend_from_slice(&p.log_append_time_ms.to_be_bytes());
            }
            if version >= 5 {
                w.out.extend_from_slice(&p.log_start_offset.to_be_bytes());
            }
            if version >= 8 {
                w.count(Some(p.record_errors.len()));
                for (batch_index, message) in &p.record_errors {
                    w.out.extend_from_slice(&batch_index.to_be_bytes());
                    w.nullable_string(message.map(clip));
                    w.no_tagged_fields();
                }
                w.nullable_string(p.error_message.map(clip));
            }
            let leader = p.current_leader.filter(|_| hints).and_then(|(id, epoch)| leader_id_and_epoch(0, id, epoch));
            tagged_fields(&mut w, [leader]);
        }
        w.no_tagged_fields();
    }
    if version >= 1 {
        w.out.extend_from_slice(&throttle_time_ms.to_be_bytes());
    }
    let endpoints = if hints { node_endpoints_field(0, node_endpoints) } else { None };
    tagged_fields(&mut w, [endpoints]);
    w.finish_frame(0);
    w.out
}

fn clip(s: &str) -> &str {
    const MAX: usize = i16::MAX as usize;
    if s.len() <= MAX {
        return s;
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partition(message: Option<&str>, current_leader: Option<(i32, i32)>) -> PartitionProduceResponse<'_> {
        PartitionProduceResponse {
            index: 3,
            error_code: 0,
            base_offset: 10,
            log_append_time_ms: -1,
            log_start_offset: 0,
            record_errors: vec![],
            error_message: message,
            current_leader,
        }
    }

    fn one(version: i16, message: Option<&str>) -> Vec<u8> {
        encode(9, version, &[TopicProduceResponse { name: "t", partitions: vec![partition(message, None)] }], 0, &[])
    }

    fn hinted(version: i16, endpoints: &[NodeEndpoint<'_>]) -> Vec<u8> {
        let topics = [TopicProduceResponse { name: "t", partitions: vec![partition(None, Some((5, 6)))] }];
        encode(9, version, &topics, 0, endpoints)
    }

    #[test]
    fn sizes_follow_the_version() {
        // size 4 + correlation 4 + count 4 + name 2+1 + count 4 + partition 14, +8 (v2),
        // throttle 4; v5 adds log_start_offset 8
        assert_eq!(one(3, None).len(), 4 + 4 + 4 + 3 + 4 + 14 + 8 + 4);
        // v8 adds record_errors count 4 and a null error_message 2
        assert_eq!(one(8, None).len(), 4 + 4 + 4 + 3 + 4 + 14 + 16 + 6 + 4);
        // v9: header tags 1, compact counts 1+1, name 1+1, record_errors 1, message 1,
        // partition, topic and body tags 1 each
        assert_eq!(one(9, None).len(), 4 + 4 + 1 + 1 + 2 + 1 + 14 + 16 + 2 + 1 + 1 + 4 + 1);
        let f = one(9, Some("bad"));
        assert_eq!(i32::from_be_bytes(f[..4].try_into().unwrap()) as usize, f.len() - 4);
    }

    #[test]
    fn current_leader_and_node_endpoints_are_tagged_from_v10() {
        let plain = one(10, None);
        let f = hinted(10, &[(5, "h", 9092, Some("r"))]);
        assert_eq!(i32::from_be_bytes(f[..4].try_into().unwrap()) as usize, f.len() - 4);
        // everything up to the partition's record_errors and error_message is unchanged
        let at = plain.len() - 1 - 4 - 1 - 1;
        assert_eq!(&f[4..at], &plain[4..at]);
        #[rustfmt::skip]
        let tail = [
            1, 0, 9, 0, 0, 0, 5, 0, 0, 0, 6, 0, // the partition's current_leader {5, 6}
            0, // the topic's tags
            0, 0, 0, 0, // throttle_time_ms
            1, 0, 14, // one body tagged field, tag 0, 14 bytes
            2, 0, 0, 0, 5, 2, b'h', 0, 0, 0x23, 0x84, 2, b'r', 0, // [{5, "h", 9092, "r"}]
        ];
        assert_eq!(&f[at..], &tail);
    }

    #[test]
    fn older_versions_and_defaults_carry_nothing_extra() {
        for version in 0..10 {
            assert_eq!(hinted(version, &[(5, "h", 9092, None)]), one(version, None), "v{version}");
        }
        let topics = [TopicProduceResponse { name: "t", partitions: vec![partition(None, Some((-1, -1)))] }];
        assert_eq!(encode(9, 10, &topics, 0, &[]), one(10, None));
    }

    #[test]
    fn clips_long_strings_at_a_character_boundary() {
        let long = "é".repeat(20_000);
        assert!(clip(&long).len() <= i16::MAX as usize);
        assert!(std::str::from_utf8(clip(&long).as_bytes()).is_ok());
    }
}
