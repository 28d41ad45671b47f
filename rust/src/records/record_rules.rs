//! What a topic's config asks of each record a producer sends, beyond well-formed
//! framing (the record-level checks of Kafka's LogValidator):
//!
//! - a compacted topic (`cleanup.policy` includes `compact`) takes no record without a
//!   key: INVALID_RECORD;
//! - a CreateTime topic takes no record whose timestamp is more than
//!   `message.timestamp.before.max.ms` before, or `message.timestamp.after.max.ms`
//!   after, the broker's clock (each falls back to the older
//!   `message.timestamp.difference.max.ms`): INVALID_TIMESTAMP.
//!
//! A batch breaking either is rejected whole. The error lists each offending record by
//! its index in the batch, as the Produce response's `record_errors` do.

use crate::error::{Error, Result};
use crate::varint::Cursor;

/// The per-record checks of one append. `RecordRules::default()` checks nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecordRules {
    /// Every record needs a key (compacted topics).
    pub require_key: bool,
    /// Inclusive range every record's timestamp must fall in (CreateTime topics).
    pub timestamp_range: Option<(i64, i64)>,
}

/// One record a `RecordRules` check rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordError {
    /// The record's index in its batch.
    pub batch_index: i32,
    /// INVALID_TIMESTAMP when true, INVALID_RECORD otherwise.
    pub timestamp: bool,
    pub message: String,
}

impl RecordRules {
    pub fn is_empty(&self) -> bool {
        !self.require_key && self.timestamp_range.is_none()
    }

    /// Rules for `now_ms` given a topic's settings; `before`/`after` are
    /// milliseconds, `i64::MAX` meaning no limit.
    pub fn new(compacted: bool, create_time: bool, before_ms: i64, after_ms: i64, now_ms: i64) -> Self {
        let limited = create_time && (before_ms != i64::MAX || after_ms != i64::MAX);
        RecordRules {
            require_key: compacted,
            timestamp_range: limited.then(|| (now_ms.saturating_sub(before_ms), now_ms.saturating_add(after_ms))),
        }
    }

    /// Checks the records of a record area whose framing `record::check_framing` has
    /// already accepted. `partition` names the log in the messages.
    pub fn check(&self, area: &[u8], count: i32, base_timestamp: i64, partition: &str, position: u64) -> Result<()> {
        if self.is_empty() {
            return Ok(());
        }
        let mut errors = Vec::new();
        let mut cur = Cursor::new(area, position);
        for i in 0..count {
            let len = cur.varint()?;
            let next = cur.pos + len.max(0) as usize;
            cur.i8()?; // attributes
            let timestamp_delta = cur.varlong()?;
            cur.varint()?; // offsetDelta
            let key_len = cur.varint()?;
            self.check_record(i, base_timestamp.wrapping_add(timestamp_delta), key_len, partition, &mut errors);
            cur.pos = next;
        }
        Self::verdict(position, errors)
    }

    /// Adds to `errors` what the rules find wrong with record `i` of a batch.
    pub fn check_record(&self, i: i32, timestamp: i64, key_len: i32, partition: &str, errors: &mut Vec<RecordError>) {
        if self.require_key && key_len < 0 {
            errors.push(RecordError {
                batch_index: i,
                timestamp: false,
                message: format!("Compacted topic cannot accept message without key in topic partition {partition}."),
            });
        } else if let Some((low, high)) = self.timestamp_range {
            if timestamp < low || timestamp > high {
                errors.push(RecordError {
                    batch_index: i,
                    timestamp: true,
                    message: format!(
                        "Timestamp {timestamp} of message with batch index {i} is out of range. \
                         The timestamp should be within [{low}, {high}]"
                    ),
                });
            }
        }
    }

    /// The batch's outcome once every record was checked.
    pub fn verdict(position: u64, errors: Vec<RecordError>) -> Result<()> {
        if errors.is_empty() {
            Ok(())
        } else {
            Err(Error::InvalidRecord { position, errors })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::record::{write_record, NewRecord};

    fn area(keys: &[Option<&[u8]>], timestamps: &[i64]) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, (k, ts)) in keys.iter().zip(timestamps).enumerate() {
            let r = NewRecord { offset: i as i64, timestamp: *ts, key: k.map(<[u8]>::to_vec), value: Some(b"v".to_vec()), headers: vec![] };
            write_record(&mut out, &r, 0, timestamps[0]);
        }
        out
    }

    #[test]
    fn no_rules_accept_everything() {
        let a = area(&[None, None], &[1, 2]);
        assert!(RecordRules::default().is_empty());
        RecordRules::default().check(&a, 2, 1, "t-0", 0).unwrap();
        RecordRules::new(false, true, i64::MAX, i64::MAX, 0).check(&a, 2, 1, "t-0", 0).unwrap();
    }

    #[test]
    fn a_compacted_topic_names_every_record_without_a_key() {
        let a = area(&[Some(b"k"), None, Some(b""), None], &[5, 5, 5, 5]);
        let err = RecordRules::new(true, true, i64::MAX, i64::MAX, 0).check(&a, 4, 5, "t-3", 100).unwrap_err();
        let Error::InvalidRecord { position, errors } = err else { panic!("{err:?}") };
        assert_eq!(position, 100);
        assert_eq!(errors.iter().map(|e| e.batch_index).collect::<Vec<_>>(), vec![1, 3]);
        assert!(errors.iter().all(|e| !e.timestamp && e.message.contains("without key in topic partition t-3")));
    }

    #[test]
    fn timestamps_outside_the_window_are_rejected_on_create_time_topics_only() {
        let now = 1_000_000;
        let a = area(&[Some(&b"k"[..]); 4], &[now, now - 5_001, now + 2_000, now + 2_001]);
        let rules = RecordRules::new(false, true, 5_000, 2_000, now);
        assert_eq!(rules.timestamp_range, Some((now - 5_000, now + 2_000)));
        let Error::InvalidRecord { errors, .. } = rules.check(&a, 4, now, "t-0", 0).unwrap_err() else { panic!() };
        assert_eq!(errors.iter().map(|e| (e.batch_index, e.timestamp)).collect::<Vec<_>>(), vec![(1, true), (3, true)]);
        assert!(RecordRules::new(false, false, 5_000, 2_000, now).is_empty());
    }

    #[test]
    fn limits_near_the_ends_of_i64_saturate() {
        let rules = RecordRules::new(false, true, i64::MAX - 1, 10, -5);
        assert_eq!(rules.timestamp_range, Some((i64::MIN, 5)));
    }
}
