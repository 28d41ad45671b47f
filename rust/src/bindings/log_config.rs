//! Topic configs from Python keyword arguments (Kafka names) into `LogConfig`, shared
//! by `Log.open`, `Log.set_config` and `clean_dry_run`; `validate_log_config`.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::log::OpenOptions;
use crate::log_config::LogConfig;

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
                _ => pairs.push((key, config_value(&v)?)),
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
