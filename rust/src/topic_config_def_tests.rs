use super::*;

fn check(pairs: &[(&str, &str)]) -> std::result::Result<(), (String, bool)> {
    match validate_topic_configs(pairs, &BTreeMap::new(), false) {
        Ok(_) => Ok(()),
        Err(Error::InvalidConfig { message, config_exception }) => Err((message, config_exception)),
        Err(e) => panic!("{e}"),
    }
}

fn refused(key: &str, value: &str) -> String {
    let (message, config_exception) = check(&[(key, value)]).unwrap_err();
    assert!(config_exception, "{message}");
    message
}

#[test]
fn every_default_is_valid_and_parses_to_its_type() {
    for k in TOPIC_CONFIGS {
        let v = k.parse(k.default).unwrap_or_else(|e| panic!("{}: {e}", k.name));
        let matches_type = match k.ty {
            T::Int | T::Long => matches!(v, Value::Long(_)),
            T::Double => matches!(v, Value::Double(_)),
            T::Boolean => matches!(v, Value::Bool(_)),
            T::String => matches!(v, Value::Str(_)),
            T::List => matches!(v, Value::List(_)),
        };
        assert!(matches_type, "{}", k.name);
    }
    assert!(check(&[]).is_ok());
}

#[test]
fn type_errors_are_worded_as_kafka() {
    assert_eq!(refused("retention.ms", "abc"), "Invalid value abc for configuration retention.ms: Not a number of type LONG");
    assert_eq!(refused("segment.bytes", "3000000000"), "Invalid value 3000000000 for configuration segment.bytes: Not a number of type INT");
    assert_eq!(
        refused("min.cleanable.dirty.ratio", "half"),
        "Invalid value half for configuration min.cleanable.dirty.ratio: Not a number of type DOUBLE"
    );
    assert_eq!(
        refused("preallocate", "yes"),
        "Invalid value yes for configuration preallocate: Expected value to be either true or false"
    );
}

#[test]
fn ranges_and_valid_strings_are_worded_as_kafka() {
    assert_eq!(refused("segment.bytes", "10"), "Invalid value 10 for configuration segment.bytes: Value must be at least 14");
    assert_eq!(refused("segment.bytes", " 10 "), "Invalid value 10 for configuration segment.bytes: Value must be at least 14");
    assert_eq!(
        refused("min.cleanable.dirty.ratio", "1.5"),
        "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"
    );
    assert_eq!(
        refused("min.cleanable.dirty.ratio", "2"),
        "Invalid value 2.0 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"
    );
    assert_eq!(
        refused("compression.type", "brotli"),
        "Invalid value brotli for configuration compression.type: String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"
    );
    assert_eq!(
        refused("cleanup.policy", "delete,shred"),
        "Invalid value shred for configuration cleanup.policy: String must be one of: compact, delete"
    );
    assert_eq!(
        refused("compression.gzip.level", "0"),
        "Invalid value 0 for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1"
    );
    assert_eq!(
        refused("compression.zstd.level", "23"),
        "Invalid value 23 for configuration compression.zstd.level: Value must be no more than 22"
    );
    assert_eq!(
        refused("message.format.version", "ten"),
        "Invalid value ten for configuration message.format.version: Version ten is not a valid version"
    );
    assert_eq!(
        refused("leader.replication.throttled.replicas", "0:1,x"),
        "Invalid value [0:1, x] for configuration leader.replication.throttled.replicas: \
         leader.replication.throttled.replicas must be the literal '*' or a list of replicas in the following \
         format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
    );
}

#[test]
fn accepted_forms_follow_java_parsing() {
    for (k, v) in [
        ("cleanup.policy", ""),
        ("cleanup.policy", "compact , delete"),
        ("preallocate", "TRUE"),
        ("retention.ms", "+5"),
        ("retention.bytes", "-7"),
        ("min.cleanable.dirty.ratio", "1e-1"),
        ("min.cleanable.dirty.ratio", "0.5d"),
        ("compression.gzip.level", "-1"),
        ("leader.replication.throttled.replicas", "*"),
        ("follower.replication.throttled.replicas", "0:1, 1:2"),
        ("message.format.version", "0.10.0.1"),
        ("message.format.version", "3.9"),
        ("message.format.version", "3.0-IV1"),
    ] {
        assert!(check(&[(k, v)]).is_ok(), "{k}={v}");
    }
    assert!(check(&[("message.format.version", "4.0")]).is_err());
    assert!(check(&[("min.cleanable.dirty.ratio", "inf")]).is_err());
}

#[test]
fn unknown_names_and_underscore_spellings_are_refused_first() {
    assert_eq!(check(&[("cleanup_policy", "compact")]), Err(("Unknown topic config name: cleanup_policy".into(), false)));
    assert_eq!(check(&[("retention.ms", "abc"), ("bad.option", "x")]).unwrap_err().0, "Unknown topic config name: bad.option");
}

#[test]
fn values_are_checked_in_definition_order_over_the_broker_defaults() {
    let e = check(&[("preallocate", "maybe"), ("segment.ms", "0")]).unwrap_err().0;
    assert!(e.contains("segment.ms"), "{e}");
    let defaults = BTreeMap::from([("max.compaction.lag.ms".to_string(), "100".to_string())]);
    let e = validate_topic_configs(&[("min.compaction.lag.ms", "200")], &defaults, false).unwrap_err().to_string();
    assert_eq!(e, "conflict topic config setting min.compaction.lag.ms (200) > max.compaction.lag.ms (100)");
}

#[test]
fn remote_storage_rules_of_zookeeper_mode() {
    assert_eq!(
        check(&[("remote.log.copy.disable", "true")]),
        Err((
            "It is invalid to set `remote.log.delete.on.disable` or `remote.log.copy.disable` under Zookeeper's mode.".into(),
            false
        ))
    );
    assert_eq!(
        check(&[("remote.storage.enable", "true")]),
        Err(("Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.".into(), true))
    );
    let with_remote = |pairs: &[(&str, &str)]| validate_topic_configs(pairs, &BTreeMap::new(), true).map(|_| ()).map_err(|e| e.to_string());
    assert_eq!(
        with_remote(&[("remote.storage.enable", "true"), ("cleanup.policy", "compact")]),
        Err("Remote log storage is unsupported for the compacted topics".into())
    );
    assert_eq!(
        with_remote(&[("remote.storage.enable", "true"), ("retention.bytes", "100"), ("local.retention.bytes", "200")]),
        Err("Invalid value 200 for configuration local.retention.bytes: Value must not be more than retention.bytes property value: 100".into())
    );
    assert_eq!(
        with_remote(&[("remote.storage.enable", "true"), ("local.retention.ms", "-1")]),
        Err("Invalid value -1 for configuration local.retention.ms: Value must not be -1 as retention.ms value is set as 604800000.".into())
    );
    assert_eq!(with_remote(&[("remote.storage.enable", "true"), ("local.retention.ms", "1000")]), Ok(()));
}

#[test]
fn doubles_are_shown_as_java_shows_them() {
    assert_eq!(java_double_string(2.0), "2.0");
    assert_eq!(java_double_string(1.5), "1.5");
    assert_eq!(java_double_string(1e10), "1.0E10");
    assert_eq!(java_double_string(1.5e-4), "1.5E-4");
    assert_eq!(java_double_string(-3.0), "-3.0");
}
