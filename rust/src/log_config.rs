//! Per-log configuration under Kafka's topic config names, with Kafka's defaults.
//!
//! Every key is parsed and checked by Kafka's rules (`topic_config_def`, the one copy);
//! keys the storage engine acts on become fields, the other topic configs Kafka defines
//! (cleanup.policy, min.insync.replicas, ...) are kept as strings for the layers above.

use std::collections::BTreeMap;

use crate::compression::Compression;
use crate::error::{Error, Result};
use crate::records::record_rules::RecordRules;
use crate::topic_config_def::{config_key, Value};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime,
    LogAppendTime,
}

#[derive(Clone, Debug)]
pub struct LogConfig {
    pub segment_bytes: u64,
    pub segment_ms: i64,
    pub segment_jitter_ms: i64,
    pub segment_index_bytes: usize,
    pub index_interval_bytes: usize,
    /// -1 = keep forever.
    pub retention_ms: i64,
    /// -1 = no size limit.
    pub retention_bytes: i64,
    pub flush_messages: i64,
    pub flush_ms: i64,
    pub max_message_bytes: usize,
    pub timestamp_type: TimestampType,
    pub file_delete_delay_ms: i64,
    /// Topic configs held for the broker and the cleaner, already validated.
    pub other: BTreeMap<String, String>,
    /// Derived from `other` whenever it changes.
    pub producer_rules: ProducerRules,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 3600 * 1000,
            segment_jitter_ms: 0,
            segment_index_bytes: 10 * 1024 * 1024,
            index_interval_bytes: 4096,
            retention_ms: 7 * 24 * 3600 * 1000,
            retention_bytes: -1,
            flush_messages: i64::MAX,
            flush_ms: i64::MAX,
            max_message_bytes: 1024 * 1024 + 12,
            timestamp_type: TimestampType::CreateTime,
            file_delete_delay_ms: 60_000,
            other: BTreeMap::new(),
            producer_rules: ProducerRules::default(),
        }
    }
}

/// What every producer append reads from the kept topic configs, parsed once when
/// they are set: `cleanup.policy` has `compact`; the timestamp window
/// (`message.timestamp.before/after.max.ms`, each falling back to
/// `message.timestamp.difference.max.ms`; `i64::MAX` = none); and the codec of
/// `compression.type` (None for `producer`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerRules {
    pub compacted: bool,
    pub before_ms: i64,
    pub after_ms: i64,
    pub compression: Option<Compression>,
}

impl Default for ProducerRules {
    fn default() -> Self {
        ProducerRules { compacted: false, before_ms: i64::MAX, after_ms: i64::MAX, compression: None }
    }
}

impl ProducerRules {
    fn from_kept(other: &BTreeMap<String, String>) -> Self {
        let long = |key: &str| other.get(key).and_then(|v| v.trim().parse().ok()).unwrap_or(i64::MAX);
        let difference = long("message.timestamp.difference.max.ms");
        let limit = |key| match long(key) {
            i64::MAX => difference,
            v => v,
        };
        ProducerRules {
            compacted: other.get("cleanup.policy").is_some_and(|p| p.split(',').any(|p| p.trim() == "compact")),
            before_ms: limit("message.timestamp.before.max.ms"),
            after_ms: limit("message.timestamp.after.max.ms"),
            compression: match other.get("compression.type").map(String::as_str) {
                None | Some("producer") => None,
                Some("uncompressed") => Some(Compression::None),
                Some(name) => Compression::from_name(name),
            },
        }
    }
}

impl LogConfig {
    /// Whether `cleanup.policy` includes `compact`.
    pub fn compacted(&self) -> bool {
        self.producer_rules.compacted
    }

    /// The per-record checks of a producer's append at `now_ms`.
    pub fn record_rules(&self, now_ms: i64) -> RecordRules {
        let r = &self.producer_rules;
        RecordRules::new(r.compacted, self.timestamp_type == TimestampType::CreateTime, r.before_ms, r.after_ms, now_ms)
    }
}

impl LogConfig {
    /// Builds a config from (key, value) pairs (Kafka's names) over the defaults.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Self> {
        let mut c = LogConfig::default();
        for (key, value) in pairs {
            c.set(key, value)?;
        }
        Ok(c)
    }

    /// Sets topic config `key` (Kafka's name) to `value`, parsed and checked by Kafka's
    /// rules (`topic_config_def`); the keys the engine acts on become fields, the others
    /// are kept as their trimmed strings.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let Some(def) = config_key(key) else {
            return Err(Error::invalid_config(format!("Unknown topic config name: {key}")));
        };
        let parsed = def.parse(value)?;
        let n = |v: &Value| v.long();
        match key {
            "segment.bytes" => self.segment_bytes = n(&parsed) as u64,
            "segment.ms" => self.segment_ms = n(&parsed),
            "segment.jitter.ms" => self.segment_jitter_ms = n(&parsed),
            "segment.index.bytes" => self.segment_index_bytes = n(&parsed) as usize,
            "index.interval.bytes" => self.index_interval_bytes = n(&parsed) as usize,
            "retention.ms" => self.retention_ms = n(&parsed),
            "retention.bytes" => self.retention_bytes = n(&parsed),
            "flush.messages" => self.flush_messages = n(&parsed),
            "flush.ms" => self.flush_ms = n(&parsed),
            "max.message.bytes" => self.max_message_bytes = n(&parsed) as usize,
            "file.delete.delay.ms" => self.file_delete_delay_ms = n(&parsed),
            "message.timestamp.type" => {
                self.timestamp_type = match &parsed {
                    Value::Str(s) if s == "LogAppendTime" => TimestampType::LogAppendTime,
                    _ => TimestampType::CreateTime,
                }
            }
            _ => {
                self.other.insert(key.to_string(), value.trim().to_string());
                self.producer_rules = ProducerRules::from_kept(&self.other);
            }
        }
        Ok(())
    }

    /// The effective config as Kafka key names and string values.
    pub fn entries(&self) -> BTreeMap<String, String> {
        let mut m = self.other.clone();
        let mut put = |k: &str, v: String| {
            m.insert(k.to_string(), v);
        };
        put("segment.bytes", self.segment_bytes.to_string());
        put("segment.ms", self.segment_ms.to_string());
        put("segment.jitter.ms", self.segment_jitter_ms.to_string());
        put("segment.index.bytes", self.segment_index_bytes.to_string());
        put("index.interval.bytes", self.index_interval_bytes.to_string());
        put("retention.ms", self.retention_ms.to_string());
        put("retention.bytes", self.retention_bytes.to_string());
        put("flush.messages", self.flush_messages.to_string());
        put("flush.ms", self.flush_ms.to_string());
        put("max.message.bytes", self.max_message_bytes.to_string());
        put("file.delete.delay.ms", self.file_delete_delay_ms.to_string());
        put(
            "message.timestamp.type",
            match self.timestamp_type {
                TimestampType::CreateTime => "CreateTime",
                TimestampType::LogAppendTime => "LogAppendTime",
            }
            .to_string(),
        );
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects_naming_the_key() {
        let c = LogConfig::from_pairs([("segment.bytes", "1024"), ("message.timestamp.type", "LogAppendTime")]).unwrap();
        assert_eq!(c.segment_bytes, 1024);
        assert_eq!(c.timestamp_type, TimestampType::LogAppendTime);
        for (k, v) in [
            ("segment.bytes", "-1"),
            ("retention.ms", "soon"),
            ("bogus.key", "1"),
            ("cleanup.policy", "shred"),
            ("min.insync.replicas", "0"),
            ("min.cleanable.dirty.ratio", "1.5"),
            ("delete.retention.ms", "-5"),
            ("preallocate", "yes"),
            ("message.format.version", "ten"),
            ("message.format.version", "3.0-IV"),
            ("segment_bytes", "1024"),
        ] {
            let e = LogConfig::from_pairs([(k, v)]).unwrap_err().to_string();
            assert!(e.contains(k), "{e}");
        }
    }

    #[test]
    fn an_empty_cleanup_policy_is_neither_delete_nor_compact() {
        let c = LogConfig::from_pairs([("cleanup.policy", "")]).unwrap();
        assert!(!c.compacted());
        assert_eq!(c.entries()["cleanup.policy"], "");
    }

    #[test]
    fn the_deprecated_message_format_version_is_accepted_and_kept() {
        for v in ["0.10.0", "0.10.0.1", "2.8", "3.0-IV1"] {
            let c = LogConfig::from_pairs([("message.format.version", v)]).unwrap();
            assert_eq!(c.entries()["message.format.version"], v);
        }
    }

    #[test]
    fn record_rules_follow_cleanup_policy_and_the_timestamp_limits() {
        let c = LogConfig::from_pairs([("cleanup.policy", "delete, compact")]).unwrap();
        assert!(c.compacted());
        assert_eq!(c.record_rules(0), RecordRules { require_key: true, timestamp_range: None });
        let c = LogConfig::from_pairs([("message.timestamp.difference.max.ms", "100"), ("message.timestamp.after.max.ms", "7")]).unwrap();
        assert!(!c.compacted());
        assert_eq!(c.record_rules(1000).timestamp_range, Some((900, 1007)));
        let c = LogConfig::from_pairs([("message.timestamp.before.max.ms", "5"), ("message.timestamp.type", "LogAppendTime")]).unwrap();
        assert!(c.record_rules(1000).is_empty());
    }
}
