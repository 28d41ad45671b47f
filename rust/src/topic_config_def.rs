//! The topic configs Kafka 3.9 defines (its `LogConfig` definition), as data: each key's
//! type, default and validator, parsed and checked with Kafka's `ConfigDef` rules and
//! worded with its messages. The one copy of these rules: the engine's `LogConfig` parses
//! through it and the broker asks it (`validate_topic_configs` in the bindings).
//!
//! Messages:
//! - a bad value: `Invalid value <value> for configuration <key>: <reason>` (Kafka's
//!   `ConfigException(name, value, message)`), reasons `Not a number of type INT|LONG|DOUBLE`,
//!   `Expected value to be either true or false`, `Value must be at least N`, `Value must
//!   be no more than N`, `String must be one of: a, b`; a number is shown as parsed
//!   (Java's rendering), a string trimmed, a type error's value as given;
//! - an unknown key: `Unknown topic config name: <key>`;
//! - the cross-key rules of `LogConfig.validateValues` and its remote storage checks.

use std::collections::BTreeMap;

use crate::error::{Error, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigType {
    Int,
    Long,
    Double,
    Boolean,
    String,
    List,
}

impl ConfigType {
    /// Kafka's name of the type (`ConfigDef.Type`).
    pub fn name(self) -> &'static str {
        match self {
            ConfigType::Int => "INT",
            ConfigType::Long => "LONG",
            ConfigType::Double => "DOUBLE",
            ConfigType::Boolean => "BOOLEAN",
            ConfigType::String => "STRING",
            ConfigType::List => "LIST",
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub enum Validator {
    None,
    /// `Range.atLeast(min)`.
    AtLeast(i64),
    /// `Range.between(min, max)`.
    Between(i64, i64),
    /// `ValidString.in(...)`.
    OneOf(&'static [&'static str]),
    /// `ValidList.in(...)`: every element one of these.
    ListOf(&'static [&'static str]),
    /// gzip's level validator: 1..=9, or -1 (the codec's default).
    GzipLevel,
    /// `ThrottledReplicaListValidator`: `*` or `partition:broker` pairs.
    ThrottledReplicas,
    /// `MetadataVersionValidator`: a release such as `3.0` or `3.0-IV1`.
    MetadataVersion,
}

#[derive(Debug)]
pub struct ConfigKey {
    pub name: &'static str,
    pub ty: ConfigType,
    /// Kafka's default, rendered as DescribeConfigs shows it.
    pub default: &'static str,
    pub validator: Validator,
}

const fn key(name: &'static str, ty: ConfigType, default: &'static str, validator: Validator) -> ConfigKey {
    ConfigKey { name, ty, default, validator }
}

use ConfigType as T;
use Validator as V;

const LONG_MAX: &str = "9223372036854775807";
pub const CLEANUP_POLICIES: &[&str] = &["compact", "delete"];
pub const COMPRESSION_TYPES: &[&str] = &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"];

/// Every topic config, in Kafka's definition order (the order values are checked in).
pub const TOPIC_CONFIGS: &[ConfigKey] = &[
    key("segment.bytes", T::Int, "1073741824", V::AtLeast(14)),
    key("segment.ms", T::Long, "604800000", V::AtLeast(1)),
    key("segment.jitter.ms", T::Long, "0", V::AtLeast(0)),
    key("segment.index.bytes", T::Int, "10485760", V::AtLeast(4)),
    key("flush.messages", T::Long, LONG_MAX, V::AtLeast(1)),
    key("flush.ms", T::Long, LONG_MAX, V::AtLeast(0)),
    key("retention.bytes", T::Long, "-1", V::None),
    key("retention.ms", T::Long, "604800000", V::AtLeast(-1)),
    key("max.message.bytes", T::Int, "1048588", V::AtLeast(0)),
    key("index.interval.bytes", T::Int, "4096", V::AtLeast(0)),
    key("delete.retention.ms", T::Long, "86400000", V::AtLeast(0)),
    key("min.compaction.lag.ms", T::Long, "0", V::AtLeast(0)),
    key("max.compaction.lag.ms", T::Long, LONG_MAX, V::AtLeast(1)),
    key("file.delete.delay.ms", T::Long, "60000", V::AtLeast(0)),
    key("min.cleanable.dirty.ratio", T::Double, "0.5", V::Between(0, 1)),
    key("cleanup.policy", T::List, "delete", V::ListOf(CLEANUP_POLICIES)),
    key("unclean.leader.election.enable", T::Boolean, "false", V::None),
    key("min.insync.replicas", T::Int, "1", V::AtLeast(1)),
    key("compression.type", T::String, "producer", V::OneOf(COMPRESSION_TYPES)),
    key("compression.gzip.level", T::Int, "-1", V::GzipLevel),
    key("compression.lz4.level", T::Int, "9", V::Between(1, 17)),
    key("compression.zstd.level", T::Int, "3", V::Between(-131072, 22)),
    key("preallocate", T::Boolean, "false", V::None),
    key("message.format.version", T::String, "3.0-IV1", V::MetadataVersion),
    key("message.timestamp.type", T::String, "CreateTime", V::OneOf(&["CreateTime", "LogAppendTime"])),
    key("message.timestamp.difference.max.ms", T::Long, LONG_MAX, V::AtLeast(0)),
    key("message.timestamp.before.max.ms", T::Long, LONG_MAX, V::AtLeast(0)),
    key("message.timestamp.after.max.ms", T::Long, LONG_MAX, V::AtLeast(0)),
    key("leader.replication.throttled.replicas", T::List, "", V::ThrottledReplicas),
    key("follower.replication.throttled.replicas", T::List, "", V::ThrottledReplicas),
    key("message.downconversion.enable", T::Boolean, "true", V::None),
    key("remote.storage.enable", T::Boolean, "false", V::None),
    key("local.retention.ms", T::Long, "-2", V::AtLeast(-2)),
    key("local.retention.bytes", T::Long, "-2", V::AtLeast(-2)),
    key("remote.log.copy.disable", T::Boolean, "false", V::None),
    key("remote.log.delete.on.disable", T::Boolean, "false", V::None),
];

/// The definition of topic config `name`, None for a name Kafka does not define.
pub fn config_key(name: &str) -> Option<&'static ConfigKey> {
    TOPIC_CONFIGS.iter().find(|k| k.name == name)
}

/// A value parsed by its key's type.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// INT and LONG.
    Long(i64),
    Double(f64),
    Bool(bool),
    Str(String),
    List(Vec<String>),
}

impl Value {
    pub fn long(&self) -> i64 {
        match self {
            Value::Long(v) => *v,
            _ => unreachable!("not a number"),
        }
    }

    pub fn bool(&self) -> bool {
        matches!(self, Value::Bool(true))
    }
}

/// Java's `String.trim`: every char up to U+0020 off both ends.
fn java_trim(s: &str) -> &str {
    s.trim_matches(|c: char| c <= ' ')
}

/// Java's `Double.parseDouble` on a trimmed string: a decimal (optionally signed, with an
/// exponent and a trailing `d`/`f`), `NaN` or `Infinity`.
fn java_double(s: &str) -> Option<f64> {
    let body = s.strip_suffix(['d', 'D', 'f', 'F']).unwrap_or(s);
    let unsigned = body.strip_prefix(['+', '-']).unwrap_or(body);
    if unsigned == "NaN" || unsigned == "Infinity" {
        return body.replace("Infinity", "inf").parse().ok();
    }
    if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit() || b"eE.+-".contains(&b)) {
        return None;
    }
    if !unsigned.bytes().next().is_some_and(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    body.parse().ok()
}

/// Java's `Double.toString`: plain from 1e-3 up to 1e7 (at least one decimal), else
/// `d.dddE<n>`.
pub fn java_double_string(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let a = v.abs();
    if a == 0.0 || (1e-3..1e7).contains(&a) {
        let s = format!("{v}");
        return if s.contains('.') { s } else { format!("{s}.0") };
    }
    let s = format!("{v:e}");
    let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let mantissa = if mantissa.contains('.') { mantissa.to_string() } else { format!("{mantissa}.0") };
    format!("{mantissa}E{exp}")
}

/// `Version <v> is not a valid version` unless `v` names a Kafka release (`3.0`, a
/// production release) or an IBP version (`3.0-IV1`), as `MetadataVersion.fromVersionString`.
fn check_metadata_version(v: &str) -> std::result::Result<(), String> {
    const IBP: &[&str] = &[
        "0.8.0", "0.8.1", "0.8.2", "0.9.0", "0.10.0-IV0", "0.10.0-IV1", "0.10.1-IV0", "0.10.1-IV1",
        "0.10.1-IV2", "0.10.2-IV0", "0.11.0-IV0", "0.11.0-IV1", "0.11.0-IV2", "1.0-IV0", "1.1-IV0",
        "2.0-IV0", "2.0-IV1", "2.1-IV0", "2.1-IV1", "2.1-IV2", "2.2-IV0", "2.2-IV1", "2.3-IV0",
        "2.3-IV1", "2.4-IV0", "2.4-IV1", "2.5-IV0", "2.6-IV0", "2.7-IV0", "2.7-IV1", "2.7-IV2",
        "2.8-IV0", "2.8-IV1", "3.0-IV0", "3.0-IV1", "3.1-IV0", "3.2-IV0", "3.3-IV0", "3.3-IV1",
        "3.3-IV2", "3.3-IV3", "3.4-IV0", "3.5-IV0", "3.5-IV1", "3.5-IV2", "3.6-IV0", "3.6-IV1",
        "3.6-IV2", "3.7-IV0", "3.7-IV1", "3.7-IV2", "3.7-IV3", "3.7-IV4", "3.8-IV0", "3.9-IV0",
        "4.0-IV0", "4.0-IV1",
    ];
    let segments: Vec<&str> = v.split('.').collect();
    let n = if v.starts_with("0.") { 3 } else { 2 };
    let key = if n >= segments.len() { v.to_string() } else { segments[..n].join(".") };
    // A release is the IBP version without its -IV suffix; 4.0 is not yet production in 3.9.
    let release = |ibp: &&str| ibp.split_once("-IV").map_or(*ibp, |(r, _)| r) == key && key != "4.0";
    if IBP.contains(&key.as_str()) || IBP.iter().any(release) {
        Ok(())
    } else {
        Err(format!("Version {v} is not a valid version"))
    }
}

impl ConfigKey {
    /// `raw` parsed by this key's type and checked by its validator, as Kafka's
    /// `ConfigDef.parseValue`.
    pub fn parse(&self, raw: &str) -> Result<Value> {
        let k = self.name;
        let t = java_trim(raw);
        let value = match self.ty {
            T::Int => Value::Long(
                t.parse::<i32>().map_err(|_| Error::config(k, raw, "Not a number of type INT"))? as i64,
            ),
            T::Long => Value::Long(t.parse::<i64>().map_err(|_| Error::config(k, raw, "Not a number of type LONG"))?),
            T::Double => Value::Double(java_double(t).ok_or_else(|| Error::config(k, raw, "Not a number of type DOUBLE"))?),
            T::Boolean if t.eq_ignore_ascii_case("true") => Value::Bool(true),
            T::Boolean if t.eq_ignore_ascii_case("false") => Value::Bool(false),
            T::Boolean => return Err(Error::config(k, raw, "Expected value to be either true or false")),
            T::String => Value::Str(t.to_string()),
            T::List if t.is_empty() => Value::List(vec![]),
            T::List => Value::List(t.split(',').map(|p| p.trim_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r'])).map(str::to_string).collect()),
        };
        self.check(&value)?;
        Ok(value)
    }

    fn check(&self, value: &Value) -> Result<()> {
        let k = self.name;
        let shown = |v: &Value| match v {
            Value::Long(n) => n.to_string(),
            Value::Double(d) => java_double_string(*d),
            Value::Str(s) => s.clone(),
            Value::Bool(b) => b.to_string(),
            Value::List(l) => format!("[{}]", l.join(", ")),
        };
        let number = |v: &Value| match v {
            Value::Long(n) => *n as f64,
            Value::Double(d) => *d,
            _ => f64::NAN,
        };
        match (self.validator, value) {
            (V::AtLeast(min) | V::Between(min, _), v) if number(v) < min as f64 => {
                Err(Error::config(k, shown(v), format!("Value must be at least {min}")))
            }
            (V::Between(_, max), v) if number(v) > max as f64 => {
                Err(Error::config(k, shown(v), format!("Value must be no more than {max}")))
            }
            (V::OneOf(allowed), Value::Str(s)) if !allowed.contains(&s.as_str()) => {
                Err(Error::config(k, s, format!("String must be one of: {}", allowed.join(", "))))
            }
            (V::ListOf(allowed), Value::List(items)) => match items.iter().find(|i| !allowed.contains(&i.as_str())) {
                Some(bad) => Err(Error::config(k, bad, format!("String must be one of: {}", allowed.join(", ")))),
                None => Ok(()),
            },
            (V::GzipLevel, Value::Long(n)) if *n > 9 || (*n < 1 && *n != -1) => {
                Err(Error::config(k, n, "Value must be between 1 and 9 or equal to -1"))
            }
            (V::ThrottledReplicas, Value::List(items)) => {
                let pair = |s: &str| {
                    s.is_empty()
                        || s.split_once(':').is_some_and(|(p, b)| {
                            !p.is_empty() && !b.is_empty() && p.bytes().chain(b.bytes()).all(|c| c.is_ascii_digit())
                        })
                };
                let trimmed: Vec<&str> = items.iter().map(|s| java_trim(s)).collect();
                if trimmed.iter().all(|s| pair(s)) || trimmed.concat() == "*" {
                    Ok(())
                } else {
                    Err(Error::config(
                        k,
                        shown(value),
                        format!(
                            "{k} must be the literal '*' or a list of replicas in the following format: \
                             [partitionId]:[brokerId],[partitionId]:[brokerId],..."
                        ),
                    ))
                }
            }
            (V::MetadataVersion, Value::Str(s)) => check_metadata_version(s).map_err(|reason| Error::config(k, s, reason)),
            _ => Ok(()),
        }
    }
}

/// Checks a topic's config overrides as Kafka's `LogConfig.validate` does on a broker in
/// ZooKeeper mode: every name known (`Unknown topic config name`), then every key's value
/// in definition order, the override over `defaults` (the broker's topic defaults) over
/// Kafka's default, then the cross-key rules. `remote_storage_system_enabled` is the
/// broker's `remote.log.storage.system.enable` (false on this broker: no tiered storage).
pub fn validate_topic_configs(
    overrides: &[(&str, &str)],
    defaults: &BTreeMap<String, String>,
    remote_storage_system_enabled: bool,
) -> Result<BTreeMap<&'static str, Value>> {
    if let Some((name, _)) = overrides.iter().find(|(name, _)| config_key(name).is_none()) {
        return Err(Error::invalid_config(format!("Unknown topic config name: {name}")));
    }
    let mut values = BTreeMap::new();
    for key in TOPIC_CONFIGS {
        let raw = overrides
            .iter()
            .rev()
            .find(|(name, _)| *name == key.name)
            .map(|(_, v)| *v)
            .or_else(|| defaults.get(key.name).map(String::as_str))
            .unwrap_or(key.default);
        values.insert(key.name, key.parse(raw)?);
    }
    check_values(&values, remote_storage_system_enabled)?;
    Ok(values)
}

/// `LogConfig.validateValues` and the topic checks of remote storage (Kafka 3.9, ZooKeeper
/// mode), on every key's parsed value.
fn check_values(v: &BTreeMap<&'static str, Value>, remote_storage_system_enabled: bool) -> Result<()> {
    let long = |k: &str| v[k].long();
    let flag = |k: &str| v[k].bool();
    let (min_lag, max_lag) = (long("min.compaction.lag.ms"), long("max.compaction.lag.ms"));
    if min_lag > max_lag {
        return Err(Error::invalid_config(format!(
            "conflict topic config setting min.compaction.lag.ms ({min_lag}) > max.compaction.lag.ms ({max_lag})"
        )));
    }
    if flag("remote.log.delete.on.disable") || flag("remote.log.copy.disable") {
        return Err(Error::invalid_config(
            "It is invalid to set `remote.log.delete.on.disable` or `remote.log.copy.disable` under Zookeeper's mode.",
        ));
    }
    if !flag("remote.storage.enable") {
        return Ok(());
    }
    if !remote_storage_system_enabled {
        return Err(Error::config_exception(
            "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.",
        ));
    }
    if let Value::List(policies) = &v["cleanup.policy"] {
        if policies.iter().any(|p| p.to_lowercase().contains("compact")) {
            return Err(Error::config_exception("Remote log storage is unsupported for the compacted topics"));
        }
    }
    for (total, local) in [("retention.bytes", "local.retention.bytes"), ("retention.ms", "local.retention.ms")] {
        let (t, l) = (long(total), long(local));
        // Unlimited: retention.bytes below 0, retention.ms -1.
        let unlimited = if total == "retention.bytes" { t <= -1 } else { t == -1 };
        if unlimited || l == -2 {
            continue;
        }
        if l == -1 {
            return Err(Error::config(local, l, format!("Value must not be -1 as {total} value is set as {t}.")));
        }
        if l > t {
            return Err(Error::config(local, l, format!("Value must not be more than {total} property value: {t}")));
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "topic_config_def_tests.rs"]
mod tests;
