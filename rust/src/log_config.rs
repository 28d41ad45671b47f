//! Per-log configuration under Kafka's topic config names, with Kafka's defaults.
//!
//! Keys the storage engine acts on are parsed into fields; the other topic configs
//! Kafka defines (cleanup.policy, min.insync.replicas, ...) are validated where they
//! have a closed set of values and kept as strings for the layers above.

use std::collections::BTreeMap;

use crate::compression::Compression;
use crate::error::{Error, Result};
use crate::records::record_rules::RecordRules;

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

/// How a topic config the engine does not act on is validated before it is kept.
enum Rule {
    Long(i64),
    Ratio,
    Bool,
    OneOf(&'static [&'static str]),
    CleanupPolicy,
    /// A Kafka release such as `0.10.0`, `2.8` or `3.0-IV1`.
    Version,
    Text,
}

/// Topic configs accepted and kept as strings for the broker and the cleaner, each
/// with Kafka's validator (minimum, range or allowed values).
const PASSTHROUGH: &[(&str, Rule)] = &[
    ("cleanup.policy", Rule::CleanupPolicy),
    ("compression.type", Rule::OneOf(&["uncompressed", "producer", "gzip", "snappy", "lz4", "zstd"])),
    ("compression.gzip.level", Rule::Long(-1)),
    ("compression.lz4.level", Rule::Long(1)),
    ("compression.zstd.level", Rule::Long(-131072)),
    ("delete.retention.ms", Rule::Long(0)),
    ("min.cleanable.dirty.ratio", Rule::Ratio),
    ("min.compaction.lag.ms", Rule::Long(0)),
    ("max.compaction.lag.ms", Rule::Long(1)),
    ("min.insync.replicas", Rule::Long(1)),
    ("unclean.leader.election.enable", Rule::Bool),
    ("preallocate", Rule::Bool),
    ("message.downconversion.enable", Rule::Bool),
    ("message.timestamp.difference.max.ms", Rule::Long(0)),
    ("message.timestamp.before.max.ms", Rule::Long(0)),
    ("message.timestamp.after.max.ms", Rule::Long(0)),
    ("leader.replication.throttled.replicas", Rule::Text),
    ("follower.replication.throttled.replicas", Rule::Text),
    ("local.retention.ms", Rule::Long(-2)),
    ("local.retention.bytes", Rule::Long(-2)),
    ("remote.storage.enable", Rule::Bool),
    ("remote.log.copy.disable", Rule::Bool),
    ("remote.log.delete.on.disable", Rule::Bool),
    // Deprecated since Kafka 3.0 and ignored (batches are always format v2), still accepted.
    ("message.format.version", Rule::Version),
];

/// `0.10.0`, `0.10.0.1`, `2.8`, `3.0-IV1`: dotted numbers, then an optional `-IV<n>`.
fn is_release(v: &str) -> bool {
    let (numbers, iv) = v.split_once("-IV").map_or((v, None), |(n, iv)| (n, Some(iv)));
    let parts: Vec<&str> = numbers.split('.').collect();
    (2..=4).contains(&parts.len())
        && parts.iter().all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        && iv.is_none_or(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn parse_i64(key: &str, value: &str, min: i64) -> Result<i64> {
    let v: i64 = value.trim().parse().map_err(|_| Error::config(key, value, "not an integer"))?;
    if v < min {
        return Err(Error::config(key, value, format!("must be at least {min}")));
    }
    Ok(v)
}

impl LogConfig {
    /// Builds a config from (key, value) pairs over the defaults. Keys may use `_` for `.`.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Self> {
        let mut c = LogConfig::default();
        for (key, value) in pairs {
            c.set(key, value)?;
        }
        Ok(c)
    }

    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let key = key.replace('_', ".");
        let k = key.as_str();
        match k {
            "segment.bytes" => self.segment_bytes = parse_i64(k, value, 14)?.min(i32::MAX as i64) as u64,
            "segment.ms" => self.segment_ms = parse_i64(k, value, 1)?,
            "segment.jitter.ms" => self.segment_jitter_ms = parse_i64(k, value, 0)?,
            "segment.index.bytes" => self.segment_index_bytes = parse_i64(k, value, 4)?.min(i32::MAX as i64) as usize,
            "index.interval.bytes" => self.index_interval_bytes = parse_i64(k, value, 0)?.min(i32::MAX as i64) as usize,
            "retention.ms" => self.retention_ms = parse_i64(k, value, -1)?,
            "retention.bytes" => self.retention_bytes = parse_i64(k, value, -1)?,
            "flush.messages" => self.flush_messages = parse_i64(k, value, 1)?,
            "flush.ms" => self.flush_ms = parse_i64(k, value, 0)?,
            "max.message.bytes" => self.max_message_bytes = parse_i64(k, value, 0)?.min(i32::MAX as i64) as usize,
            "file.delete.delay.ms" => self.file_delete_delay_ms = parse_i64(k, value, 0)?,
            "message.timestamp.type" => {
                self.timestamp_type = match value.trim() {
                    "CreateTime" => TimestampType::CreateTime,
                    "LogAppendTime" => TimestampType::LogAppendTime,
                    _ => return Err(Error::config(k, value, "must be CreateTime or LogAppendTime")),
                }
            }
            _ => {
                let Some((_, rule)) = PASSTHROUGH.iter().find(|(name, _)| *name == k) else {
                    return Err(Error::config(k, value, "unknown topic config"));
                };
                let v = value.trim();
                match rule {
                    Rule::Long(min) => {
                        parse_i64(k, v, *min)?;
                    }
                    Rule::Ratio => match v.parse::<f64>() {
                        Ok(r) if (0.0..=1.0).contains(&r) => {}
                        _ => return Err(Error::config(k, value, "must be a number between 0 and 1")),
                    },
                    Rule::Bool if !matches!(v, "true" | "false") => return Err(Error::config(k, value, "must be true or false")),
                    Rule::OneOf(allowed) if !allowed.contains(&v) => {
                        return Err(Error::config(k, value, format!("must be one of {}", allowed.join(", "))))
                    }
                    // An empty list is allowed, as Kafka's ValidList allows it: neither
                    // deleted nor compacted, the log is kept whole.
                    Rule::CleanupPolicy
                        if !v.split(',').map(str::trim).filter(|p| !p.is_empty()).all(|p| matches!(p, "delete" | "compact")) =>
                    {
                        return Err(Error::config(k, value, "must be a list of delete and compact (or empty)"))
                    }
                    Rule::Version if !is_release(v) => {
                        return Err(Error::config(k, value, "must be a Kafka release such as 0.10.0 or 3.0-IV1"))
                    }
                    _ => {}
                }
                self.other.insert(k.to_string(), v.to_string());
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
        let c = LogConfig::from_pairs([("segment_bytes", "1024"), ("message.timestamp.type", "LogAppendTime")]).unwrap();
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
