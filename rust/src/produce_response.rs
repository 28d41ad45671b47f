//! Produce responses (api key 0), encoded whole.
//!
//! Frame: int32 size, then correlation_id int32 and, v9+ (flexible), header tagged
//! fields; body: responses [name string, partition_responses [index int32, error_code
//! int16, base_offset int64, log_append_time_ms int64 (v2+), log_start_offset int64
//! (v5+), record_errors [batch_index int32, batch_index_error_message nullable string]
//! (v8+), error_message nullable string (v8+)]], throttle_time_ms int32 (v1+).
//! Flexible versions use compact lengths and end each struct with a tagged-field count;
//! this encoder writes no tagged fields (a single broker never sends current_leader or
//! node_endpoints, which only accompany NOT_LEADER_OR_FOLLOWER).

use crate::produce_request::FIRST_FLEXIBLE_VERSION;
use crate::wire_writer::WireWriter;

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
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicProduceResponse<'a> {
    pub name: &'a str,
    pub partitions: Vec<PartitionProduceResponse<'a>>,
}

/// The whole response frame, size prefix included. Strings longer than an int16 length
/// can hold are cut at a character boundary below 32,767 bytes.
pub fn encode(correlation_id: i32, version: i16, topics: &[TopicProduceResponse<'_>], throttle_time_ms: i32) -> Vec<u8> {
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
            w.no_tagged_fields();
        }
        w.no_tagged_fields();
    }
    if version >= 1 {
        w.out.extend_from_slice(&throttle_time_ms.to_be_bytes());
    }
    w.no_tagged_fields();
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

    fn one(version: i16, message: Option<&str>) -> Vec<u8> {
        let p = PartitionProduceResponse {
            index: 3,
            error_code: 0,
            base_offset: 10,
            log_append_time_ms: -1,
            log_start_offset: 0,
            record_errors: vec![],
            error_message: message,
        };
        encode(9, version, &[TopicProduceResponse { name: "t", partitions: vec![p] }], 0)
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
    fn clips_long_strings_at_a_character_boundary() {
        let long = "é".repeat(20_000);
        assert!(clip(&long).len() <= i16::MAX as usize);
        assert!(std::str::from_utf8(clip(&long).as_bytes()).is_ok());
    }
}
