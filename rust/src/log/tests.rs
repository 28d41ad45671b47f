//! Tests of `Log` across its files: appends (validated whole, cut back when corrupt),
//! reads against a linear walk, recovery and checkpoint fallbacks on open, retention.

use super::*;
use crate::records::record::NewRecord;
use crate::records::record_batch::{self, encode, BatchHeader, BatchOptions, HEADER_SIZE};
use crate::validation_pool::CONCURRENT_CHECK_MIN_BYTES;

/// A batch of `n` records of ~110 bytes each, all at timestamp `ts`.
pub(super) fn batch(n: usize, ts: i64) -> Vec<u8> {
    let recs: Vec<NewRecord> = (0..n)
        .map(|i| NewRecord { offset: i as i64, timestamp: ts, key: Some(vec![i as u8]), value: Some(vec![7; 100]), headers: vec![] })
        .collect();
    encode(&recs, &BatchOptions::default())
}

pub(super) fn leader() -> AppendOptions {
    AppendOptions { assign_offsets: true, ..Default::default() }
}

#[test]
fn large_append_checked_beside_its_write_publishes_nothing_when_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(&dir.path().join("t-0"), LogConfig::default(), OpenOptions::default()).unwrap();
    log.append(&batch(3, 1000), &leader()).unwrap();
    let size = log.size();
    let mut big = batch(4000, 1000);
    assert!(big.len() >= CONCURRENT_CHECK_MIN_BYTES);
    let last = big.len() - 1;
    big[last] ^= 0x5A;
    assert!(matches!(log.append(&big, &leader()), Err(Error::CorruptRecord { .. })));
    assert_eq!((log.log_end_offset(), log.size()), (3, size));
    assert_eq!(fs::metadata(dir.path().join("t-0").join(crate::segment::file_name(0, ".log"))).unwrap().len(), size);
    big[last] ^= 0x5A;
    assert_eq!(log.append(&big, &leader()).unwrap().base_offset, 3);
    assert_eq!(log.log_end_offset(), 4003);
}

#[test]
fn a_compacted_log_refuses_records_without_keys_small_or_large_appends_alike() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig::from_pairs([("cleanup.policy", "compact")]).unwrap();
    let log = Log::open(&dir.path().join("t-0"), cfg, OpenOptions::default()).unwrap();
    log.append(&batch(3, 1000), &leader()).unwrap();
    let size = log.size();
    for n in [5, 4000] {
        let recs: Vec<NewRecord> = (0..n)
            .map(|i| NewRecord { offset: i, timestamp: 1000, key: (i % 2 == 0).then(|| vec![1]), value: Some(vec![7; 100]), headers: vec![] })
            .collect();
        let compression = if n == 5 { crate::compression::Compression::Lz4 } else { crate::compression::Compression::None };
        let keyless = encode(&recs, &BatchOptions { compression, ..Default::default() });
        assert_eq!(keyless.len() >= CONCURRENT_CHECK_MIN_BYTES, n > 5);
        let Err(Error::InvalidRecord { errors, .. }) = log.append(&keyless, &leader()) else { panic!("accepted") };
        assert_eq!(errors.len(), n as usize / 2);
        assert_eq!(errors[0].batch_index, 1);
        assert!(errors[0].message.contains("t-0"), "{}", errors[0].message);
        assert_eq!((log.log_end_offset(), log.size()), (3, size));
    }
    // A follower's copy (offsets kept) is not the producer's to be judged.
    let keyless = encode(&[NewRecord { offset: 3, timestamp: 1, ..Default::default() }], &BatchOptions { base_offset: 3, ..Default::default() });
    assert_eq!(log.append(&keyless, &AppendOptions::default()).unwrap().base_offset, 3);
}

#[test]
fn append_read_roll_reopen() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("t-0");
    let cfg = LogConfig::from_pairs([("segment.bytes", "2000"), ("index.interval.bytes", "100")]).unwrap();
    let log = Log::open(&dir, cfg.clone(), OpenOptions::default()).unwrap();
    let t0 = now_ms();
    for i in 0..30 {
        let info = log.append(&batch(3, t0 + i), &leader()).unwrap();
        assert_eq!((info.base_offset, info.last_offset), (i * 3, i * 3 + 2));
    }
    assert!(log.num_segments() > 3);
    assert_eq!(log.log_end_offset(), 90);
    for o in 0..90 {
        let data = log.read(o, 1, None, true).unwrap();
        let h = BatchHeader::parse(&data);
        assert!(h.base_offset <= o && o <= h.last_offset(), "offset {o}");
    }
    assert_eq!(log.offset_for_timestamp(t0 + 10).unwrap(), Some((30, t0 + 10)));
    log.close().unwrap();
    let log = Log::open(&dir, cfg, OpenOptions::default()).unwrap();
    assert!(!log.recovered());
    assert_eq!(log.log_end_offset(), 90);
    assert_eq!(log.offset_for_timestamp(t0 + 10).unwrap(), Some((30, t0 + 10)));
    assert_eq!(log.read(45, 1, None, true).unwrap().len(), batch(3, 0).len());
}

#[test]
fn unparsable_offset_checkpoints_fall_back_as_kafka_does() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("t-0");
    let log = Log::open(&dir, LogConfig::default(), OpenOptions::default()).unwrap();
    for _ in 0..5 {
        log.append(&batch(2, now_ms()), &leader()).unwrap();
    }
    log.delete_records(4).unwrap();
    drop(log); // no close: an unclean shutdown
    fs::write(dir.join(RECOVERY_POINT_FILE), b"\xff garbage").unwrap();
    fs::write(dir.join(LOG_START_OFFSET_FILE), "0\n1\nt 0 notanumber\n").unwrap();
    let log = Log::open(&dir, LogConfig::default(), OpenOptions::default()).unwrap();
    let faults = log.checkpoint_faults();
    assert_eq!(faults.len(), 2, "{faults:?}");
    assert!(faults[0].starts_with("log-start-offset-checkpoint: not one entry"), "{faults:?}");
    assert!(faults[0].ends_with("; the log starts at its first segment"), "{faults:?}");
    assert!(faults[1].starts_with("recovery-point-offset-checkpoint: "), "{faults:?}");
    assert!(faults[1].ends_with("; every segment is recovered"), "{faults:?}");
    assert!(log.recovered());
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 10));
    log.close().unwrap();
    // Both were rewritten: the next open has nothing to set aside.
    let log = Log::open(&dir, LogConfig::default(), OpenOptions::default()).unwrap();
    assert!(log.checkpoint_faults().is_empty() && !log.recovered());
}

#[test]
fn open_after_clean_close_rewrites_only_checkpoints_that_differ() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("t-0");
    let log = Log::open(&dir, LogConfig::default(), OpenOptions::default()).unwrap();
    log.append(&batch(2, now_ms()), &leader()).unwrap();
    log.close().unwrap();
    let mtime = |f: &str| fs::metadata(dir.join(f)).unwrap().modified().unwrap();
    // Both checkpoints already say what open would write: neither is written again.
    let (rp, lso) = (mtime(RECOVERY_POINT_FILE), mtime(LOG_START_OFFSET_FILE));
    std::thread::sleep(std::time::Duration::from_millis(20));
    let log = Log::open(&dir, LogConfig::default(), OpenOptions::default()).unwrap();
    assert!(!dir.join(CLEAN_SHUTDOWN_FILE).exists() && !log.recovered());
    assert_eq!((mtime(RECOVERY_POINT_FILE), mtime(LOG_START_OFFSET_FILE)), (rp, lso));
    log.close().unwrap();
    // One naming another partition is rewritten with this log's name.
    fs::write(dir.join(LOG_START_OFFSET_FILE), "0\n1\nother 3 0\n").unwrap();
    let log = Log::open(&dir, LogConfig::default(), OpenOptions::default()).unwrap();
    assert_eq!(fs::read_to_string(dir.join(LOG_START_OFFSET_FILE)).unwrap(), "0\n1\nt 0 0\n");
    // A crash after that open recovers the appends made since.
    log.append(&batch(3, now_ms()), &leader()).unwrap();
    drop(log);
    let log = Log::open(&dir, LogConfig::default(), OpenOptions::default()).unwrap();
    assert!(log.recovered());
    assert_eq!(log.log_end_offset(), 5);
}

#[test]
fn a_new_log_writes_no_checkpoint_and_a_crash_after_appends_recovers_them() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("t-0");
    let log = Log::open(&dir, LogConfig::default(), OpenOptions::default()).unwrap();
    // What the absent files stand for is what they would hold: recovery from 0, the
    // log starting at its one segment.
    assert!(!dir.join(RECOVERY_POINT_FILE).exists() && !dir.join(LOG_START_OFFSET_FILE).exists());
    assert_eq!((log.recovery_point(), log.log_start_offset()), (0, 0));
    log.append(&batch(3, now_ms()), &leader()).unwrap();
    drop(log); // a crash
    let log = Log::open(&dir, LogConfig::default(), OpenOptions::default()).unwrap();
    assert!(log.recovered());
    assert_eq!((log.log_start_offset(), log.log_end_offset(), log.recovery_point()), (0, 3, 3));
    assert_eq!(fs::read_to_string(dir.join(RECOVERY_POINT_FILE)).unwrap(), "0\n1\nt 0 3\n");
    // A log given its start offset (a follower's, say) records it.
    let other = d.path().join("t-1");
    let log = Log::open(&other, LogConfig::default(), OpenOptions { log_start_offset: Some(7), ..Default::default() }).unwrap();
    assert_eq!(log.log_end_offset(), 7);
    assert_eq!(fs::read_to_string(other.join(LOG_START_OFFSET_FILE)).unwrap(), "0\n1\nt 1 7\n");
}

#[test]
fn a_deferred_sync_open_leaves_what_a_synced_one_does_but_the_fsyncs() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("t-0");
    let log = Log::open(&dir, LogConfig::default(), OpenOptions::default()).unwrap();
    log.append(&batch(2, now_ms()), &leader()).unwrap();
    log.close().unwrap();
    let deferred = OpenOptions { defer_sync: true, ..Default::default() };
    let log = Log::open(&dir, LogConfig::default(), deferred.clone()).unwrap();
    assert!(!dir.join(CLEAN_SHUTDOWN_FILE).exists() && !log.recovered());
    log.append(&batch(3, now_ms()), &leader()).unwrap();
    drop(log); // a crash: recovered, the recovery point left at the checkpoint's 2
    let log = Log::open(&dir, LogConfig::default(), deferred.clone()).unwrap();
    checkpoint::sync_filesystem(&dir).unwrap();
    assert!(log.recovered());
    assert_eq!((log.log_end_offset(), log.recovery_point()), (5, 2));
    assert_eq!(fs::read_to_string(dir.join(RECOVERY_POINT_FILE)).unwrap(), "0\n1\nt 0 2\n");
    // Another crash validates that tail again; a flush moves the point.
    drop(log);
    let log = Log::open(&dir, LogConfig::default(), deferred).unwrap();
    assert!(log.recovered() && log.recovery_point() == 2);
    log.flush().unwrap();
    assert_eq!(fs::read_to_string(dir.join(RECOVERY_POINT_FILE)).unwrap(), "0\n1\nt 0 5\n");
    assert!(checkpoint::sync_filesystem(&d.path().join("gone")).is_err());
}

#[test]
fn torn_tail_is_cut_after_crash() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("t-0");
    let log = Log::open(&dir, LogConfig::default(), OpenOptions::default()).unwrap();
    for _ in 0..5 {
        log.append(&batch(2, now_ms()), &leader()).unwrap();
    }
    assert_eq!(log.num_segments(), 1);
    let path = log.segments().unwrap()[0].log_path.clone();
    drop(log); // no close: an unclean shutdown
    let len = fs::metadata(&path).unwrap().len();
    let f = fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(len - 10).unwrap();
    let log = Log::open(&dir, LogConfig::default(), OpenOptions::default()).unwrap();
    assert!(log.recovered());
    assert_eq!(log.log_end_offset(), 8);
    // What was cut: the torn last batch, its header still readable.
    let cut = log.recovery_dropped().clone();
    assert_eq!((cut.batches, cut.records, cut.offsets, cut.segments_deleted), (1, 2, Some((8, 9)), 0));
    assert_eq!(cut.bytes, len - 10 - log.size());
    assert!(cut.describe().contains("2 records"), "{}", cut.describe());
    assert_eq!(log.append(&batch(1, now_ms()), &leader()).unwrap().base_offset, 8);
}

/// Writes `n` batches of 2 records, drops the log without closing it, and raises the
/// baseOffset (outside the CRC) of batch `which` by `by`. Returns the segment's path.
fn crash_with_raised_base_offset(dir: &Path, cfg: &LogConfig, n: usize, which: usize, by: i64) -> (PathBuf, u64) {
    let log = Log::open(dir, cfg.clone(), OpenOptions::default()).unwrap();
    let mut positions = vec![];
    for i in 0..n {
        positions.push(log.size());
        let recs: Vec<NewRecord> = (0..2).map(|j| NewRecord { offset: j, timestamp: 1000, key: Some(vec![i as u8, j as u8]), value: Some(vec![7; 10]), headers: vec![] }).collect();
        log.append(&encode(&recs, &BatchOptions::default()), &leader()).unwrap();
    }
    let path = log.segments().unwrap()[0].log_path.clone();
    drop(log);
    let f = fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
    let mut b = [0u8; 8];
    std::os::unix::fs::FileExt::read_exact_at(&f, &mut b, positions[which]).unwrap();
    let raised = i64::from_be_bytes(b) + by;
    std::os::unix::fs::FileExt::write_all_at(&f, &raised.to_be_bytes(), positions[which]).unwrap();
    (path, positions[which])
}

#[test]
fn a_batch_not_continuing_the_offsets_is_corruption_in_recovery() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("t-0");
    let (_, at) = crash_with_raised_base_offset(&dir, &LogConfig::default(), 5, 4, 134_217_728);
    let log = Log::open(&dir, LogConfig::default(), OpenOptions::default()).unwrap();
    assert!(log.recovered());
    assert_eq!((log.log_end_offset(), log.size()), (8, at));
    let cut = log.recovery_dropped();
    assert_eq!((cut.batches, cut.records), (1, 2));
    assert_eq!(cut.offsets, Some((8 + 134_217_728, 9 + 134_217_728)));
    // A raised baseOffset in the middle cuts everything from it on.
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("t-0");
    let (_, at) = crash_with_raised_base_offset(&dir, &LogConfig::default(), 5, 1, 7);
    let log = Log::open(&dir, LogConfig::default(), OpenOptions::default()).unwrap();
    assert_eq!((log.log_end_offset(), log.size()), (2, at));
    assert_eq!((log.recovery_dropped().batches, log.recovery_dropped().records), (4, 8));
}

#[test]
fn a_compacted_log_keeps_its_offset_gaps_through_recovery() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("t-0");
    let cfg = LogConfig::from_pairs([("cleanup.policy", "compact")]).unwrap();
    let (_, _) = crash_with_raised_base_offset(&dir, &cfg, 5, 4, 5);
    let log = Log::open(&dir, cfg, OpenOptions::default()).unwrap();
    assert!(log.recovered());
    assert_eq!(log.log_end_offset(), 15);
    assert!(log.recovery_dropped().is_empty());
}

#[test]
fn segments_after_a_cut_one_are_counted_as_dropped() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("t-0");
    let cfg = LogConfig::from_pairs([("segment.bytes", "200")]).unwrap();
    let log = Log::open(&dir, cfg.clone(), OpenOptions::default()).unwrap();
    for _ in 0..6 {
        log.append(&batch(1, 1000), &leader()).unwrap();
    }
    let segs = log.segments().unwrap();
    assert!(segs.len() >= 3, "{}", segs.len());
    drop(log);
    let first = &segs[0];
    fs::OpenOptions::new().write(true).open(&first.log_path).unwrap().set_len(first.size - 5).unwrap();
    let log = Log::open(&dir, cfg, OpenOptions { recovery_point: Some(0), ..Default::default() }).unwrap();
    let cut = log.recovery_dropped();
    assert_eq!(cut.segments_deleted as usize, segs.len() - 1);
    assert_eq!(cut.records as usize, 6 - log.log_end_offset() as usize);
    assert_eq!(log.num_segments(), 1);
}

#[test]
fn corrupt_batch_writes_nothing() {
    let d = tempfile::tempdir().unwrap();
    let log = Log::open(&d.path().join("t-0"), LogConfig::default(), OpenOptions::default()).unwrap();
    let mut two = batch(2, 1);
    let mut bad = batch(2, 1);
    bad[HEADER_SIZE + 3] ^= 0xff;
    two.extend(bad);
    assert!(matches!(log.append(&two, &leader()), Err(Error::CorruptRecord { .. })));
    assert_eq!(log.log_end_offset(), 0);
    assert_eq!(log.size(), 0);
}

#[test]
fn large_corrupt_append_is_cut_back() {
    let d = tempfile::tempdir().unwrap();
    let log = Log::open(&d.path().join("t-0"), LogConfig::default(), OpenOptions::default()).unwrap();
    log.append(&batch(3, now_ms()), &leader()).unwrap();
    let before = (log.log_end_offset(), log.size(), fs::metadata(&log.segments().unwrap()[0].log_path).unwrap().len());
    let mut data = Vec::new();
    while data.len() < 512 * 1024 {
        data.extend(batch(50, now_ms()));
    }
    let n = data.len();
    data[n - 5] ^= 0x55;
    assert!(matches!(log.append(&data, &leader()), Err(Error::CorruptRecord { .. })));
    let after = (log.log_end_offset(), log.size(), fs::metadata(&log.segments().unwrap()[0].log_path).unwrap().len());
    assert_eq!(before, after);
    data[n - 5] ^= 0x55;
    let info = log.append(&data, &leader()).unwrap();
    assert_eq!(info.base_offset, 3);
    assert_eq!(log.log_end_offset(), info.last_offset + 1);
}

#[test]
fn read_ranges_agree_with_a_linear_walk() {
    let d = tempfile::tempdir().unwrap();
    let cfg = LogConfig::from_pairs([("index.interval.bytes", "300")]).unwrap();
    let log = Log::open(&d.path().join("t-0"), cfg, OpenOptions::default()).unwrap();
    let mut sizes = Vec::new();
    for i in 0..60 {
        let b = batch(1 + i % 4, now_ms());
        sizes.push((log.append(&b, &leader()).unwrap().last_offset, b.len()));
    }
    let leo = log.log_end_offset();
    for offset in (0..leo).step_by(3) {
        for max_bytes in [1usize, 200, 700, 1500, 5000, 100_000] {
            for max_offset in [leo, leo - 5, offset + 7] {
                let got = log.read_slice(offset, max_bytes, Some(max_offset), true).unwrap();
                // Linear reference: the batch holding `offset`, then whole batches
                // while they fit in max_bytes and end below max_offset.
                let first = sizes.iter().position(|(last, _)| *last >= offset).unwrap();
                let (first_last, _) = sizes[first];
                if first_last >= max_offset {
                    assert!(got.is_none());
                    continue;
                }
                let (mut len, mut last) = (sizes[first].1, first_last);
                for (l, sz) in &sizes[first + 1..] {
                    if *l >= max_offset || len + sz > max_bytes {
                        break;
                    }
                    len += sz;
                    last = *l;
                }
                let got = got.unwrap();
                assert_eq!((got.length as usize, got.last_offset), (len, last), "offset {offset} max_bytes {max_bytes} max_offset {max_offset}");
            }
        }
    }
}

#[test]
fn large_corrupt_batches_leave_the_log_unchanged() {
    let d = tempfile::tempdir().unwrap();
    let cfg = LogConfig::from_pairs([("max.message.bytes", "4000000")]).unwrap();
    let log = Log::open(&d.path().join("t-0"), cfg, OpenOptions::default()).unwrap();
    log.append(&batch(2, now_ms()), &leader()).unwrap();
    let big = batch(6000, now_ms()); // ~700 KB, one batch
    let file_len = |log: &Log| fs::metadata(&log.segments().unwrap()[0].log_path).unwrap().len();
    let before = (log.log_end_offset(), log.size(), file_len(&log));
    // A flipped byte near the end: the CRC fails.
    let mut bad = big.clone();
    let n = bad.len();
    bad[n - 3] ^= 1;
    assert!(matches!(log.append(&bad, &leader()), Err(Error::CorruptRecord { .. })));
    assert_eq!(before, (log.log_end_offset(), log.size(), file_len(&log)));
    // A record count that lies (CRC recomputed): the framing walk fails.
    let mut lying = big.clone();
    lying[57..61].copy_from_slice(&5999i32.to_be_bytes());
    lying[23..27].copy_from_slice(&5998i32.to_be_bytes());
    let crc = record_batch::compute_crc(&lying);
    lying[17..21].copy_from_slice(&crc.to_be_bytes());
    assert!(matches!(log.append(&lying, &leader()), Err(Error::CorruptRecord { .. })));
    assert_eq!(before, (log.log_end_offset(), log.size(), file_len(&log)));
    // The good batch lands whole, and reads back byte for byte (but its base offset).
    let info = log.append(&big, &leader()).unwrap();
    assert_eq!((info.base_offset, info.last_offset), (2, 6001));
    let back = log.read(2, 10 << 20, None, true).unwrap();
    assert_eq!(&back[8..], &big[8..]);
    drop(log);
    // Reopened after a crash (no marker), the batch passes recovery's full validation.
    let log = Log::open(&d.path().join("t-0"), LogConfig::from_pairs([("max.message.bytes", "4000000")]).unwrap(), OpenOptions::default()).unwrap();
    assert_eq!(log.log_end_offset(), 6002);
}

#[test]
fn retention_unlinks_segment_files_after_file_delete_delay_ms() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("t-0");
    let deleted = || fs::read_dir(&dir).unwrap().filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".deleted")).count();
    // A deleted segment leaves its `.log` and `.timeindex` (the max timestamp its roll
    // recorded); its offset index never got an entry, so it never had a file.
    for (delay, left) in [("60000", 2), ("0", 0)] {
        let cfg = LogConfig::from_pairs([("segment.bytes", "2000"), ("file.delete.delay.ms", delay)]).unwrap();
        let log = Log::open(&dir, cfg, OpenOptions::default()).unwrap();
        let t0 = now_ms();
        for i in 0..20 {
            log.append(&batch(3, t0 + i), &leader()).unwrap();
        }
        let end = log.log_end_offset();
        let first = log.segments().unwrap()[1].base_offset;
        log.delete_records(first).unwrap();
        assert_eq!(log.enforce_retention(None, None).unwrap(), 0, "already gone by delete_records");
        assert_eq!(deleted(), left, "delay {delay}");
        assert_eq!((log.log_start_offset(), log.log_end_offset()), (first, end));
        log.close().unwrap();
        assert_eq!(deleted(), 0);
        fs::remove_dir_all(&dir).unwrap();
    }
}

/// Name -> bytes of every file in `dir`.
fn dir_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), fs::read(&p).unwrap()))
        .collect()
}

#[test]
fn index_entries_are_skipped_together_while_a_page_cannot_get_storage() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("t-0");
    let cfg = LogConfig::from_pairs([("index.interval.bytes", "1")]).unwrap();
    // An index comes into existence at its first entry; this one is there from the start
    // (an empty segment with an empty time index file), sized and mapped by the open.
    let tidx = dir.join(crate::segment::file_name(0, ".timeindex"));
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join(crate::segment::file_name(0, ".log")), b"").unwrap();
    fs::write(&tidx, b"").unwrap();
    let log = Log::open(&dir, cfg.clone(), OpenOptions::default()).unwrap();
    // The time index cut to nothing under its mapping: its first page has no storage, as
    // a hole has none on a full disk.
    let full_len = fs::metadata(&tidx).unwrap().len();
    fs::OpenOptions::new().write(true).open(&tidx).unwrap().set_len(0).unwrap();
    let t0 = now_ms();
    for i in 0..10 {
        log.append(&batch(2, t0 + i), &leader()).unwrap();
    }
    let s = &log.segments().unwrap()[0];
    assert_eq!((s.index_entries, s.time_index_entries), (0, 0), "the offset index skips with the time index");
    fs::OpenOptions::new().write(true).open(&tidx).unwrap().set_len(full_len).unwrap();
    for i in 10..20 {
        log.append(&batch(2, t0 + i), &leader()).unwrap();
    }
    let s = &log.segments().unwrap()[0];
    assert_eq!((s.index_entries, s.time_index_entries), (10, 10));
    log.close().unwrap();
    let log = Log::open(&dir, cfg, OpenOptions::default()).unwrap();
    assert!(!log.recovered(), "the trimmed indexes load as they are");
    assert_eq!(log.segments().unwrap()[0].largest_timestamp, t0 + 19);
    for i in 0..20 {
        assert_eq!(log.offset_for_timestamp(t0 + i).unwrap(), Some((2 * i, t0 + i)));
        let h = BatchHeader::parse(&log.read(2 * i + 1, 1, None, true).unwrap());
        assert_eq!(h.base_offset, 2 * i);
    }
}

#[test]
fn close_handlers_writes_nothing_and_the_next_open_recovers() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("t-0");
    let cfg = LogConfig::from_pairs([("segment.bytes", "2000"), ("segment.index.bytes", "4096"), ("index.interval.bytes", "100"), ("file.delete.delay.ms", "60000")])
        .unwrap();
    let log = Log::open(&dir, cfg.clone(), OpenOptions::default()).unwrap();
    let t0 = now_ms();
    for i in 0..20 {
        log.append(&batch(3, t0 + i), &leader()).unwrap();
    }
    let first = log.segments().unwrap()[1].base_offset;
    log.delete_records(first).unwrap(); // the first segment waits as `.deleted` files
    log.flush().unwrap(); // no background flush of a rolled segment writes after this
    log.append(&batch(3, t0 + 20), &leader()).unwrap();
    let end = log.log_end_offset();
    let contents: Vec<Vec<u8>> = (first..end).step_by(3).map(|o| log.read(o, 1, None, true).unwrap()).collect();
    let before = dir_files(&dir);
    assert!(before.keys().any(|n| n.ends_with(".deleted")));

    log.close_handlers();
    assert_eq!(dir_files(&dir), before, "close_handlers wrote, trimmed or deleted a file");
    assert!(log.is_closed());
    assert!(matches!(log.append(&batch(1, t0), &leader()), Err(Error::LogClosed(_))));
    assert!(matches!(log.read(first, 1, None, true), Err(Error::LogClosed(_))));
    assert!(matches!(log.segments(), Err(Error::LogClosed(_))));
    assert!(matches!(log.flush(), Err(Error::LogClosed(_))));
    log.close().unwrap(); // a closed log's close does nothing
    log.close_handlers();
    drop(log);
    assert_eq!(dir_files(&dir), before, "closing again or dropping the log wrote a file");

    let log = Log::open(&dir, cfg, OpenOptions::default()).unwrap();
    assert!(log.recovered(), "no clean-shutdown marker: recovery runs");
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (first, end));
    let reread: Vec<Vec<u8>> = (first..end).step_by(3).map(|o| log.read(o, 1, None, true).unwrap()).collect();
    assert_eq!(reread, contents);
    assert!(!dir_files(&dir).keys().any(|n| n.ends_with(".deleted")));
}

#[test]
fn an_append_whose_epoch_checkpoint_fails_is_taken_back_with_its_roll() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("t-0");
    let one = batch(3, 1000).len();
    let cfg = LogConfig::from_pairs([("segment.bytes", (2 * one + one / 2).to_string().as_str()), ("index.interval.bytes", "1")]).unwrap();
    let log = Log::open(&dir, cfg, OpenOptions::default()).unwrap();
    let epoch = |e: i32| AppendOptions { leader_epoch: Some(e), ..leader() };
    log.append(&batch(3, 1000), &epoch(0)).unwrap();
    // The checkpoint's temporary file cannot be created while a directory holds its name.
    let blocker = dir.join("leader-epoch-checkpoint.tmp");
    let state = |log: &Log| {
        let segs: Vec<(i64, u64, usize, usize)> = log.segments().unwrap().iter().map(|s| (s.base_offset, s.size, s.index_entries, s.time_index_entries)).collect();
        (log.log_end_offset(), segs, log.epoch_entries(), dir_files(&dir).into_iter().filter(|(n, _)| !n.ends_with(".index") && !n.ends_with(".timeindex")).collect::<Vec<_>>())
    };
    // Epoch 1 starts with the second batch (no roll), epoch 2 with the third (a roll).
    for (e, rolls) in [(1, false), (2, true)] {
        fs::create_dir(&blocker).unwrap();
        let before = state(&log);
        let failed = log.append(&batch(3, 1000 + e as i64), &epoch(e));
        assert!(matches!(failed, Err(Error::Io { op: "create checkpoint", .. })), "{failed:?}");
        assert_eq!(state(&log), before, "epoch {e}: the log changed");
        fs::remove_dir(&blocker).unwrap();
        let info = log.append(&batch(3, 1000 + e as i64), &epoch(e)).unwrap();
        assert_eq!(info.base_offset, before.0);
        assert_eq!(log.num_segments(), before.1.len() + rolls as usize, "epoch {e}");
        assert_eq!(log.epoch_entries().last(), Some(&(e, before.0)));
    }
    assert_eq!(log.epoch_entries(), vec![(0, 0), (1, 3), (2, 6)]);
    for o in 0..9 {
        assert_eq!(BatchHeader::parse(&log.read(o, 1, None, true).unwrap()).base_offset, o / 3 * 3);
    }
}
