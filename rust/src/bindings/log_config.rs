//! Topic configs from Python keyword arguments into `LogConfig`, shared by `Log.open`,
//! `Log.set_config`, `clean_dry_run` and `validate_log_config`: a keyword may spell
//! Kafka's name with `_` for `.` (`segment_bytes`). The broker's check of a topic's
//! configs, `validate_topic_configs`, takes Kafka's names only, and `topic_config_keys`
//! lists Kafka's topic configs with their types and defaults.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::log::OpenOptions;
use crate::log_config::LogConfig;
use crate::topic_config_def::{validate_topic_configs as validate, TOPIC_CONFIGS};
use std::collections::BTreeMap;

fn config_value(v: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(b) = v.extract::<bool>() {
        return Ok(if b { "true" } else { "false" }.to_string());
    }
    Ok(v.str()?.to_string())
}

/// The `LogConfig` of `**config`; with `opts`, the keys `recovery_point`,
/// `log_start_offset` and `now_ms` go to the open options instead.
pub(super) fn config_from_dict(config: Option<&Bound<'_, PyDict>>, opts: Option<&mut OpenOptions>) -> PyResult<LogConfig> {
    let mut pairs = Vec::new();
    let mut opts = opts;
    if let Some(config) = config {
        for (k, v) in config.iter() {
            let key: String = k.extract()?;
            match (key.as_str(), opts.as_deref_mut()) {
                ("recovery_point", Some(o)) => o.recovery_point = v.extract()?,
                ("log_start_offset", Some(o)) => o.log_start_offset = v.extract()?,
                ("now_ms", Some(o)) => o.now_ms = v.extract()?,
                _ => pairs.push((key.replace('_', "."), config_value(&v)?)),
            }
        }
    }
    Ok(LogConfig::from_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())))?)
}

/// Validates topic configs (Kafka names) and returns the effective config with defaults.
#[pyfunction]
#[pyo3(signature = (**config))]
pub(super) fn validate_log_config(config: Option<&Bound<'_, PyDict>>) -> PyResult<std::collections::BTreeMap<String, String>> {
    Ok(config_from_dict(config, None)?.entries())
}

/// Checks a topic's config overrides (Kafka's names only) over the broker's topic
/// defaults as Kafka's `LogConfig.validate` does: `InvalidConfigError` with Kafka's
/// message (`config_exception` true for a bad value), else None.
#[pyfunction]
pub(super) fn validate_topic_configs(configs: BTreeMap<String, String>, defaults: BTreeMap<String, String>) -> PyResult<()> {
    let pairs: Vec<(&str, &str)> = configs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    validate(&pairs, &defaults, false)?;
    Ok(())
}

/// Kafka's topic configs in definition order: (name, type as `ConfigDef.Type` names it,
/// default as DescribeConfigs shows it).
#[pyfunction]
pub(super) fn topic_config_keys() -> Vec<(&'static str, &'static str, &'static str)> {
    TOPIC_CONFIGS.iter().map(|k| (k.name, k.ty.name(), k.default)).collect()
}
