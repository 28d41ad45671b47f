//! Tests of indexes that come into existence at their first entry (`index_file.rs`):
//! a new segment has only its `.log` until an entry is due, and every path that reads
//! or changes indexes (lookups, roll, truncation, retention, close and reopen, recovery
//! after a crash, a lost index file) behaves as with an empty index file.

use super::tests::{batch, leader};
use super::*;

/// An entry is due after 1,000 bytes; index files are 4 KiB when they exist.
fn config() -> LogConfig {
    LogConfig::from_pairs([("index.interval.bytes", "1000"), ("segment.index.bytes", "4096")]).unwrap()
}

/// Names of the index files in `dir`, sorted.
fn index_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".index") || n.contains(".timeindex"))
        .collect();
    names.sort();
    names
}

fn name(base: i64, suffix: &str) -> String {
    crate::segment::file_name(base, suffix)
}

/// Appends `n` one-record batches at timestamps t0, t0+1, ...; returns their offsets.
fn append_each(log: &Log, n: i64, t0: i64) {
    for i in 0..n {
        log.append(&batch(1, t0 + i), &leader()).unwrap();
    }
}

/// Every offset in [from, to) reads back, and each timestamp finds its record.
fn check_lookups(log: &Log, from: i64, to: i64, t0: i64) {
    for o in from..to {
        let got = log.read(o, 1, None, true).unwrap();
        assert_eq!(crate::records::record_batch::BatchHeader::parse(&got).base_offset, o);
        assert_eq!(log.offset_for_timestamp(t0 + o).unwrap(), Some((o, t0 + o)));
    }
}

#[test]
fn a_new_log_has_no_index_file_until_an_entry_is_due() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("t-0");
    let log = Log::open(&dir, config(), OpenOptions::default()).unwrap();
    assert!(index_files(&dir).is_empty());
    let t0 = 1_000_000;
    append_each(&log, 6, t0); // 6 x ~180 bytes: the 7th batch starts past 1,000 bytes
    assert!(index_files(&dir).is_empty());
    check_lookups(&log, 0, 6, t0);
    assert_eq!(log.offset_for_timestamp(t0 + 6).unwrap(), None);
    append_each(&log, 4, t0 + 6);
    assert_eq!(index_files(&dir), [name(0, ".index"), name(0, ".timeindex")]);
    assert_eq!(fs::metadata(dir.join(name(0, ".index"))).unwrap().len(), 4096);
    assert_eq!(fs::metadata(dir.join(name(0, ".timeindex"))).unwrap().len(), 4092);
    assert_eq!(log.segments().unwrap()[0].index_entries, 1);
    check_lookups(&log, 0, 10, t0);
}

#[test]
fn a_clean_close_and_reopen_keep_an_unindexed_segment_without_index_files() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("t-0");
    let t0 = 1_000_000;
    let log = Log::open(&dir, config(), OpenOptions::default()).unwrap();
    append_each(&log, 3, t0);
    log.close().unwrap();
    assert!(index_files(&dir).is_empty());
    let log = Log::open(&dir, config(), OpenOptions::default()).unwrap();
    assert!(!log.recovered());
    assert_eq!(log.log_end_offset(), 3);
    assert_eq!(log.segments().unwrap()[0].largest_timestamp, t0 + 2);
    check_lookups(&log, 0, 3, t0);
    assert!(index_files(&dir).is_empty());
    // Appends continue; the first due entry creates both files.
    append_each(&log, 7, t0 + 3);
    assert_eq!(index_files(&dir).len(), 2);
    log.close().unwrap();
    let log = Log::open(&dir, config(), OpenOptions::default()).unwrap();
    assert!(!log.recovered());
    assert_eq!(log.segments().unwrap()[0].index_entries, 1);
    check_lookups(&log, 0, 10, t0);
}

#[test]
fn a_crash_before_the_first_entry_recovers_without_index_files() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("t-0");
    let t0 = 1_000_000;
    let log = Log::open(&dir, config(), OpenOptions::default()).unwrap();
    // A crash of an empty log, then of one with records.
    log.close_handlers();
    let log = Log::open(&dir, config(), OpenOptions::default()).unwrap();
    assert_eq!(log.log_end_offset(), 0);
    append_each(&log, 4, t0);
    log.close_handlers();
    let log = Log::open(&dir, config(), OpenOptions::default()).unwrap();
    assert!(log.recovered());
    assert_eq!(log.log_end_offset(), 4);
    assert!(index_files(&dir).is_empty());
    check_lookups(&log, 0, 4, t0);
}

#[test]
fn a_lost_index_file_is_rebuilt_when_an_entry_was_due() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("t-0");
    let t0 = 1_000_000;
    let log = Log::open(&dir, config(), OpenOptions::default()).unwrap();
    append_each(&log, 30, t0);
    let entries = log.segments().unwrap()[0].index_entries;
    assert!(entries >= 4);
    log.close().unwrap();
    fs::remove_file(dir.join(name(0, ".index"))).unwrap();
    let log = Log::open(&dir, config(), OpenOptions::default()).unwrap();
    assert!(!log.recovered(), "a rebuilt index with nothing cut is not crash recovery");
    assert_eq!(log.segments().unwrap()[0].index_entries, entries);
    assert_eq!(log.log_end_offset(), 30);
    check_lookups(&log, 0, 30, t0);
}

#[test]
fn a_roll_records_the_max_timestamp_and_leaves_the_new_segment_without_index_files() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("t-0");
    let t0 = 1_000_000;
    let log = Log::open(&dir, config(), OpenOptions::default()).unwrap();
    append_each(&log, 3, t0);
    log.roll(None).unwrap();
    // The rolled segment's time index holds its max timestamp; its offset index stays
    // without a file (no entry was due); the new segment has no index file.
    assert_eq!(index_files(&dir), [name(0, ".timeindex")]);
    assert_eq!(fs::metadata(dir.join(name(0, ".timeindex"))).unwrap().len(), 12);
    append_each(&log, 3, t0 + 3);
    assert_eq!(index_files(&dir), [name(0, ".timeindex")]);
    check_lookups(&log, 0, 6, t0);
    log.close().unwrap();
    let log = Log::open(&dir, config(), OpenOptions::default()).unwrap();
    assert!(!log.recovered());
    let segs = log.segments().unwrap();
    assert_eq!(segs.iter().map(|s| (s.base_offset, s.largest_timestamp)).collect::<Vec<_>>(), [(0, t0 + 2), (3, t0 + 5)]);
    check_lookups(&log, 0, 6, t0);
    // The rolled segment's single time index entry skips it for later timestamps.
    assert_eq!(log.offset_for_timestamp(t0 + 4).unwrap(), Some((4, t0 + 4)));
}

#[test]
fn truncation_and_retention_of_unindexed_segments() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("t-0");
    let t0 = 1_000_000;
    let cfg = LogConfig::from_pairs([("index.interval.bytes", "1000"), ("segment.index.bytes", "4096"), ("file.delete.delay.ms", "0")]).unwrap();
    let log = Log::open(&dir, cfg.clone(), OpenOptions::default()).unwrap();
    append_each(&log, 4, t0);
    log.truncate_to(2).unwrap();
    assert_eq!(log.log_end_offset(), 2);
    assert!(index_files(&dir).is_empty());
    append_each(&log, 2, t0 + 2);
    check_lookups(&log, 0, 4, t0);
    log.roll(None).unwrap();
    append_each(&log, 2, t0 + 4);
    // Truncation into the rolled segment deletes the active one and makes it active again.
    log.truncate_to(3).unwrap();
    assert_eq!((log.log_end_offset(), log.num_segments()), (3, 1));
    append_each(&log, 3, t0 + 3);
    check_lookups(&log, 0, 6, t0);
    log.roll(None).unwrap();
    append_each(&log, 1, t0 + 6);
    log.delete_records(6).unwrap();
    assert_eq!(log.enforce_retention(None, None).unwrap(), 0);
    assert_eq!(log.num_segments(), 1);
    assert!(index_files(&dir).is_empty(), "{:?}", index_files(&dir));
    log.truncate_fully_and_start_at(100).unwrap();
    assert!(index_files(&dir).is_empty());
    log.close().unwrap();
    let log = Log::open(&dir, cfg, OpenOptions::default()).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (100, 100));
}

#[test]
fn a_stale_index_file_under_a_new_segment_reads_as_nothing() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("t-0");
    let t0 = 1_000_000;
    let log = Log::open(&dir, config(), OpenOptions::default()).unwrap();
    append_each(&log, 3, t0);
    // Files left where the next segment's would go (as by an interrupted operation).
    fs::write(dir.join(name(3, ".index")), [0xAB; 16]).unwrap();
    fs::write(dir.join(name(3, ".timeindex")), [0xCD; 24]).unwrap();
    log.roll(None).unwrap();
    append_each(&log, 10, t0 + 3);
    check_lookups(&log, 0, 13, t0);
    log.close().unwrap();
    let log = Log::open(&dir, config(), OpenOptions::default()).unwrap();
    assert!(!log.recovered());
    check_lookups(&log, 0, 13, t0);
}

#[test]
fn a_deferred_close_is_clean_only_once_marked() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("t-0");
    let t0 = 1_000_000;
    let log = Log::open(&dir, config(), OpenOptions::default()).unwrap();
    append_each(&log, 12, t0);
    log.mark_clean_shutdown().unwrap(); // an open log: nothing
    assert!(!dir.join(CLEAN_SHUTDOWN_FILE).exists());
    log.close_deferred().unwrap();
    assert!(log.is_closed() && !dir.join(CLEAN_SHUTDOWN_FILE).exists());
    // Not marked: the next open recovers from the last flush's recovery point (none).
    let log = Log::open(&dir, config(), OpenOptions::default()).unwrap();
    assert!(log.recovered());
    assert_eq!(log.log_end_offset(), 12);
    append_each(&log, 3, t0 + 12);
    log.close_deferred().unwrap();
    log.close().unwrap(); // already closed: nothing
    checkpoint::sync_filesystem(&dir).unwrap();
    log.mark_clean_shutdown().unwrap();
    assert!(dir.join(CLEAN_SHUTDOWN_FILE).exists());
    log.mark_clean_shutdown().unwrap();
    let log = Log::open(&dir, config(), OpenOptions::default()).unwrap();
    assert!(!log.recovered());
    assert_eq!((log.recovery_point(), log.log_end_offset()), (15, 15));
    check_lookups(&log, 0, 15, t0);
}
