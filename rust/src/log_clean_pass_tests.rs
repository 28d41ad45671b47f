//! Tests of `Log::clean`: merging, the swap protocol and its recovery, transactions.

use std::cell::RefCell;
use std::collections::BTreeMap;

use super::*;
use crate::log::{AppendOptions, OpenOptions};
use crate::log_config::LogConfig;
use crate::records::record::NewRecord;
use crate::records::record_batch::{encode, encode_control, BatchIter, BatchOptions, DecodedBatch};

fn keyed(key: u8, value: Option<u8>, ts: i64) -> Vec<u8> {
    let r = NewRecord { offset: 0, timestamp: ts, key: Some(vec![key]), value: value.map(|v| vec![v; 40]), headers: vec![] };
    encode(&[r], &BatchOptions::default())
}

/// key -> (offset, value) of every record readable from the log.
fn contents(log: &Log) -> Vec<(i64, u8, Option<u8>)> {
    let data = log.read(log.log_start_offset(), 1 << 30, None, true).unwrap();
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    let mut data = data;
    loop {
        for item in BatchIter::new(&data, 0) {
            let (_, _, b) = item.unwrap();
            let d = DecodedBatch::new(b, 0, true).unwrap();
            for r in d.records().unwrap() {
                out.push((r.offset, r.key.unwrap()[0], r.value.map(|v| v[0])));
            }
            offset = d.header.next_offset();
        }
        if offset >= log.log_end_offset() {
            return out;
        }
        data = log.read(offset, 1 << 30, None, true).unwrap();
        assert!(!data.is_empty(), "no data at {offset} below the log end {}", log.log_end_offset());
    }
}

#[test]
fn clean_keeps_the_latest_value_per_key_and_survives_reopen() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("t-0");
    let cfg = LogConfig::from_pairs([("segment.bytes", "600"), ("delete.retention.ms", "1000")]).unwrap();
    let log = Log::open(&dir, cfg.clone(), OpenOptions::default()).unwrap();
    let now = crate::log::now_ms();
    let mut model: BTreeMap<u8, (i64, Option<u8>)> = BTreeMap::new();
    let mut history: Vec<(i64, u8, Option<u8>)> = Vec::new();
    for i in 0..60u8 {
        let key = i % 7;
        let value = if i % 11 == 10 { None } else { Some(i) };
        let info = log.append(&keyed(key, value, now), &AppendOptions { assign_offsets: true, ..Default::default() }).unwrap();
        model.insert(key, (info.base_offset, value));
        history.push((info.base_offset, key, value));
    }
    assert!(log.num_segments() > 5);
    let leo = log.log_end_offset();
    let opts = LogCleanOptions { now_ms: now, dedupe_buffer_size: 1 << 20, force: true, throttler: None };
    let summary = log.clean(&opts).unwrap();
    assert!(summary.segments_cleaned > 0, "{summary:?}");
    assert_eq!(log.log_end_offset(), leo);
    // Non-active segments hold only latest values; the active segment is untouched.
    let active_base = log.segments().unwrap().last().unwrap().base_offset;
    let got = contents(&log);
    let offsets: Vec<i64> = got.iter().map(|r| r.0).collect();
    assert!(offsets.windows(2).all(|w| w[0] < w[1]), "offsets ascend");
    // The active segment is never mapped (as in Kafka): below it, each key keeps only
    // its latest record among the offsets below the active segment.
    let mut cleanable_latest: BTreeMap<u8, (i64, Option<u8>)> = BTreeMap::new();
    for &(offset, key, value) in history.iter().filter(|r| r.0 < active_base) {
        cleanable_latest.insert(key, (offset, value));
    }
    for &(offset, key, value) in got.iter().filter(|r| r.0 < active_base) {
        assert_eq!((offset, value), cleanable_latest[&key], "key {key}");
    }
    assert_eq!(got.iter().filter(|r| r.0 < active_base).count(), cleanable_latest.len());
    // Every key's latest value is still there (tombstones within the horizon too).
    for (key, (offset, value)) in &model {
        assert!(got.contains(&(*offset, *key, *value)), "key {key} lost");
    }
    // After the horizon, tombstones below the active segment go.
    log.clean(&LogCleanOptions { now_ms: now + 2_000, ..opts.clone() }).unwrap();
    let after = contents(&log);
    assert!(after.iter().all(|r| r.0 >= active_base || r.2.is_some()), "tombstones past the horizon remain");
    // A crash after cleaning (no close) and a stray .cleaned file: the same content.
    drop(log);
    std::fs::write(dir.join(file_name(0, ".log.cleaned")), b"half-written").unwrap();
    let log = Log::open(&dir, cfg, OpenOptions::default()).unwrap();
    assert_eq!(contents(&log), after);
    assert!(!dir.join(file_name(0, ".log.cleaned")).exists());
    assert_eq!(log.log_end_offset(), leo);
}

fn append(log: &Log, batch: &[u8]) -> i64 {
    log.append(batch, &AppendOptions { assign_offsets: true, ..Default::default() }).unwrap().base_offset
}

/// A log at `dir` holding `n` one-record batches, record i keyed `i % keys` with value i.
fn keyed_log(dir: &Path, cfg: &LogConfig, n: u8, keys: u8, now: i64) -> Log {
    let log = Log::open(dir, cfg.clone(), OpenOptions::default()).unwrap();
    for i in 0..n {
        append(&log, &keyed(i % keys, Some(i), now));
    }
    log
}

fn force(now: i64) -> LogCleanOptions {
    LogCleanOptions { now_ms: now, dedupe_buffer_size: 1 << 20, force: true, throttler: None }
}

/// A log of many small segments: 200 records over 20 keys, with values of 40 bytes.
fn small_segments(dir: &Path, cfg: &LogConfig, now: i64) -> (Log, BTreeMap<u8, (i64, Option<u8>)>) {
    let log = Log::open(dir, cfg.clone(), OpenOptions::default()).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..200u32 {
        let key = (i % 20) as u8;
        let value = if i % 17 == 16 { None } else { Some(i as u8) };
        model.insert(key, (append(&log, &keyed(key, value, now)), value));
    }
    (log, model)
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        match fs::copy(&p, to.join(p.file_name().unwrap())) {
            // A checkpoint's temporary file, renamed by the background flush meanwhile.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            r => {
                r.unwrap();
            }
        }
    }
}

#[test]
fn small_segments_merge_into_groups_up_to_segment_bytes() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("t-0");
    let cfg = LogConfig::from_pairs([("segment.bytes", "1000")]).unwrap();
    let now = crate::log::now_ms();
    let (log, _) = small_segments(&dir, &cfg, now);
    let before = log.num_segments();
    let active_base = log.segments().unwrap().last().unwrap().base_offset;
    let expect: Vec<_> = {
        let mut latest = BTreeMap::new();
        for (o, k, v) in contents(&log) {
            if o < active_base {
                latest.insert(k, (o, k, v));
            }
        }
        let mut e: Vec<_> = latest.into_values().collect();
        e.extend(contents(&log).into_iter().filter(|r| r.0 >= active_base));
        e.sort();
        e
    };
    // Segments are grouped by their sizes before cleaning (as Kafka does), those with
    // every record superseded counting as empty: the first pass merges only those and
    // shrinks the rest, the next one merges them.
    let first = log.clean(&force(now)).unwrap();
    assert!(first.segments_written <= first.segments_cleaned, "{first:?}");
    assert!(first.segments_written >= first.segments_cleaned - first.segments_unread, "{first:?}");
    let s = log.clean(&force(now)).unwrap();
    let (cleaned, written) = (first.segments_cleaned + s.segments_cleaned, first.segments_written + s.segments_written);
    assert!(written * 3 < cleaned, "{first:?} {s:?}");
    assert!(log.num_segments() < before / 3, "{} segments of {before}", log.num_segments());
    for seg in log.segments().unwrap() {
        assert!(seg.size <= 1000);
    }
    assert_eq!(contents(&log), expect);
    assert_eq!(s.log_bytes_after, log.size());
    // Reads at every offset find the batch holding it or the next one.
    for o in 0..log.log_end_offset() {
        let data = log.read(o, 1, None, true).unwrap();
        let h = crate::records::record_batch::BatchHeader::parse(&data);
        assert!(h.last_offset() >= o);
    }
    // A second pass over the merged log changes nothing; reopening reads the same.
    assert_eq!(log.clean(&force(now)).unwrap().segments_cleaned, 0);
    log.close().unwrap();
    let log = Log::open(&dir, cfg, OpenOptions::default()).unwrap();
    assert!(!log.recovered());
    assert_eq!(contents(&log), expect);
}

#[test]
fn a_crash_at_every_swap_step_reopens_with_every_retained_record() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("t-0");
    let cfg = LogConfig::from_pairs([("segment.bytes", "1500"), ("index.interval.bytes", "100")]).unwrap();
    let now = crate::log::now_ms();
    let (log, mut model) = small_segments(&dir, &cfg, now);
    // A first pass shrinks the segments; with more dirty data the next one merges them.
    log.clean(&force(now)).unwrap();
    for i in 0..100u32 {
        let key = (i % 30) as u8;
        model.insert(key, (append(&log, &keyed(key, Some(i as u8), now)), Some(i as u8)));
    }
    let original = contents(&log);
    // The directory as a SIGKILL would leave it, at every step of every group.
    let snapshots: RefCell<Vec<(SwapStep, PathBuf)>> = RefCell::new(Vec::new());
    let observer = |e: &CleanEvent| {
        if let CleanEvent::Step { step, .. } = e {
            let n = snapshots.borrow().len();
            let to = d.path().join(format!("crash{n}")).join("t-0");
            copy_dir(&dir, &to);
            snapshots.borrow_mut().push((*step, to));
        }
    };
    let s = log.clean_observed(&force(now), &observer).unwrap();
    assert!(s.segments_written >= 2 && s.segments_cleaned > s.segments_written, "{s:?}");
    let cleaned = contents(&log);
    drop(log);
    let snapshots = snapshots.into_inner();
    assert_eq!(snapshots.len(), 4 * s.segments_written);
    for (step, path) in snapshots {
        // Leftovers of later steps: a half-written .cleaned file too.
        fs::write(path.join(file_name(0, ".log.cleaned")), b"torn").unwrap();
        let log = Log::open(&path, cfg.clone(), OpenOptions::default()).unwrap();
        let got = contents(&log);
        assert!(got.windows(2).all(|w| w[0].0 < w[1].0), "{step:?}: offsets ascend, no duplicates");
        for r in &cleaned {
            assert!(got.contains(r), "{step:?}: lost {r:?}");
        }
        for r in &got {
            assert!(original.contains(r), "{step:?}: invented {r:?}");
        }
        for (k, (o, v)) in &model {
            assert!(got.contains(&(*o, *k, *v)), "{step:?}: latest of key {k} lost");
        }
        let names: Vec<String> = fs::read_dir(&path).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        assert!(names.iter().all(|n| !n.ends_with(".swap") && !n.ends_with(".cleaned") && !n.ends_with(".deleted")), "{step:?}: {names:?}");
        // The recovered log cleans on to the same records.
        let s = log.clean(&force(now)).unwrap();
        assert_eq!(contents(&log), cleaned, "{step:?} {s:?} {:?}", log.segments().unwrap().iter().map(|s| (s.base_offset, s.size)).collect::<Vec<_>>());
    }
}

#[test]
fn a_swap_file_replaces_exactly_the_segments_it_covers() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("t-0");
    let cfg = LogConfig::from_pairs([("segment.bytes", "300")]).unwrap();
    let now = crate::log::now_ms();
    let log = keyed_log(&dir, &cfg, 12, 3, now);
    let segs = log.segments().unwrap();
    assert!(segs.len() >= 4);
    log.close().unwrap();
    // A swap holding the batches of the first two segments, minus one: it covers them.
    let (s0, s1, s2) = (&segs[0], &segs[1], &segs[2]);
    let mut swap = fs::read(&s0.log_path).unwrap();
    swap.extend(fs::read(&s1.log_path).unwrap());
    let first = crate::records::record_batch::BatchHeader::parse(&swap).size();
    let swap = swap[first..].to_vec(); // as if the first batch had been cleaned away
    fs::write(dir.join(file_name(s0.base_offset, ".log.swap")), &swap).unwrap();
    fs::write(dir.join(file_name(s0.base_offset, ".index.swap")), [1u8; 8]).unwrap();
    let log = Log::open(&dir, cfg, OpenOptions::default()).unwrap();
    let names: Vec<i64> = log.segments().unwrap().iter().map(|s| s.base_offset).collect();
    assert_eq!(names[..2], [s0.base_offset, s2.base_offset]);
    let got = contents(&log);
    assert_eq!(got[0].0, 1);
    assert_eq!(got.len(), 11);
    assert!(!dir.join(file_name(s0.base_offset, ".index.swap")).exists());
}

#[test]
fn max_compaction_lag_makes_a_log_cleanable_whatever_its_ratio() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("t-0");
    let cfg = LogConfig::from_pairs([("segment.bytes", "600"), ("min.cleanable.dirty.ratio", "0.99"), ("max.compaction.lag.ms", "10000")]).unwrap();
    let t0 = 1_700_000_000_000i64;
    let log = Log::open(&dir, cfg, OpenOptions { now_ms: Some(t0), ..Default::default() }).unwrap();
    for i in 0..30u8 {
        append(&log, &keyed(i % 2, Some(i), t0));
    }
    let opts = LogCleanOptions { now_ms: t0 + 1_000, dedupe_buffer_size: 1 << 20, force: false, throttler: None };
    assert!(log.clean(&opts).unwrap().segments_cleaned > 0); // all dirty at first: ratio 1
    for i in 0..30u8 {
        append(&log, &keyed(i % 2, Some(i), t0 + 2_000));
    }
    log.roll(None).unwrap();
    // Dirty ratio now below 0.99, and the first dirty batch is 8 s old: not yet.
    assert_eq!(log.clean(&LogCleanOptions { now_ms: t0 + 10_000, ..opts.clone() }).unwrap().segments_cleaned, 0);
    // 12 s old: overdue.
    let s = log.clean(&LogCleanOptions { now_ms: t0 + 12_001, ..opts.clone() }).unwrap();
    assert!(s.segments_cleaned > 0, "{s:?}");
}

#[test]
fn aborted_transactions_are_removed_and_open_ones_stop_the_cleaner() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("t-0");
    let cfg = LogConfig::from_pairs([("segment.bytes", "400"), ("delete.retention.ms", "100")]).unwrap();
    let now = crate::log::now_ms();
    let log = Log::open(&dir, cfg, OpenOptions::default()).unwrap();
    let txn = |key: u8, value: u8, pid: i64| {
        let r = NewRecord { offset: 0, timestamp: now, key: Some(vec![key]), value: Some(vec![value; 40]), headers: vec![] };
        encode(&[r], &BatchOptions { producer_id: pid, producer_epoch: 0, base_sequence: 0, transactional: true, ..Default::default() })
    };
    let marker = |ty: i16, pid: i64| encode_control(ty, 0, now, &BatchOptions { producer_id: pid, producer_epoch: 0, ..Default::default() });
    append(&log, &keyed(1, Some(1), now));
    append(&log, &txn(1, 2, 7)); // aborted below
    append(&log, &txn(2, 3, 7));
    append(&log, &marker(0, 7));
    append(&log, &txn(3, 4, 8)); // committed
    append(&log, &marker(1, 8));
    // Producer 7 writes again, so its aborted batch is not its last (which would be kept
    // empty, and its marker with it, as Kafka keeps a producer's last sequence).
    append(&log, &txn(5, 9, 7));
    append(&log, &marker(1, 7));
    let open_txn = append(&log, &txn(4, 5, 9)); // never ends: the first unstable offset
    append(&log, &keyed(1, Some(6), now));
    for i in 0..6 {
        append(&log, &keyed(9, Some(i), now));
    }
    let s = log.clean(&force(now)).unwrap();
    assert_eq!(s.stats.aborted_records_dropped, 2, "{s:?} {:?}", log.segments().unwrap().iter().map(|s| (s.base_offset, s.size)).collect::<Vec<_>>());
    assert!(s.cleaned_up_to <= open_txn);
    let got: Vec<(u8, Option<u8>)> = contents(&log).into_iter().filter(|r| r.0 < open_txn).map(|r| (r.1, r.2)).collect();
    // Key 1 keeps its value 1: the aborted 2 never counted; the control records read back
    // too (their keys start with byte 0: version 0).
    assert!(got.contains(&(1, Some(1))) && got.contains(&(3, Some(4))));
    assert!(!got.contains(&(1, Some(2))) && !got.contains(&(2, Some(3))));
    // Nothing at or past the open transaction was touched.
    let tail: Vec<_> = contents(&log).into_iter().filter(|r| r.0 >= open_txn).collect();
    assert_eq!(tail.len(), 8);
    // Passes after the horizon: the abort marker goes; the commit markers stay while their
    // data (3=4, 5=9) does.
    log.clean(&force(now)).unwrap();
    log.clean(&force(now + 1_000)).unwrap();
    let controls = |log: &Log| -> Vec<i64> {
        let mut out = Vec::new();
        for seg in log.segments().unwrap() {
            let data = fs::read(&seg.log_path).unwrap();
            out.extend(BatchIter::new(&data, 0).map(|b| b.unwrap().1).filter(|h| h.is_control()).map(|h| h.base_offset));
        }
        out
    };
    let markers = controls(&log);
    assert_eq!(markers, vec![5, 7]);
}

#[test]
fn truncation_moves_the_cleaner_checkpoint_back() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("t-0");
    let cfg = LogConfig::from_pairs([("segment.bytes", "600")]).unwrap();
    let now = crate::log::now_ms();
    let log = keyed_log(&dir, &cfg, 40, 4, now);
    let s = log.clean(&force(now)).unwrap();
    assert_eq!(s.cleaned_up_to, log.segments().unwrap().last().unwrap().base_offset);
    // A follower truncation far below the checkpoint, then new data.
    log.truncate_to(5).unwrap();
    for i in 0..40u8 {
        append(&log, &keyed(i % 4, Some(i), now));
    }
    let s = log.clean(&LogCleanOptions { force: false, ..force(now) }).unwrap();
    assert_eq!(s.first_dirty_offset, 5);
    assert!(s.segments_cleaned > 0);
}

#[test]
fn closing_the_log_stops_a_pass_at_its_next_chunk() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("t-0");
    let cfg = LogConfig::from_pairs([("segment.bytes", "600")]).unwrap();
    let now = crate::log::now_ms();
    let log = keyed_log(&dir, &cfg, 60, 4, now);
    let before = contents(&log);
    let closer = |e: &CleanEvent| {
        if matches!(e, CleanEvent::Progress { .. }) {
            log.close().unwrap();
        }
    };
    assert!(matches!(log.clean_observed(&force(now), &closer), Err(Error::LogClosed(_))));
    let log = Log::open(&dir, cfg, OpenOptions::default()).unwrap();
    assert_eq!(contents(&log), before);
}

#[test]
fn a_truncation_during_a_pass_stops_it_before_reading_past_the_new_end() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("t-0");
    let cfg = LogConfig::from_pairs([("segment.bytes", "600")]).unwrap();
    let now = crate::log::now_ms();
    let log = keyed_log(&dir, &cfg, 60, 4, now);
    let segments = log.segments().unwrap();
    assert!(segments.len() > 4);
    // After the first segment is mapped, a follower truncation cuts the third one in
    // the middle (it becomes the active segment) and deletes the rest.
    let cut = segments[2].base_offset + 2;
    let truncated = std::cell::Cell::new(false);
    let truncator = |e: &CleanEvent| {
        if matches!(e, CleanEvent::Progress { .. }) && !truncated.replace(true) {
            log.truncate_to(cut).unwrap();
        }
    };
    let result = log.clean_observed(&force(now), &truncator);
    assert!(truncated.get());
    assert!(result.as_ref().is_err_and(|e| e.to_string().contains("truncated during the pass")), "{result:?}");
    assert_eq!(log.log_end_offset(), cut);
    let after = contents(&log);
    assert_eq!(after.last().unwrap().0, cut - 1);
    drop(log);
    let log = Log::open(&dir, cfg, OpenOptions::default()).unwrap();
    assert_eq!(contents(&log), after);
}

/// Names of the `.deleted` files in `dir`.
fn deleted_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).filter(|n| n.ends_with(".deleted")).collect();
    names.sort();
    names
}

#[test]
fn replaced_segments_are_unlinked_after_file_delete_delay_ms() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("t-0");
    let now = crate::log::now_ms();
    // The default delay (60 s): the pass leaves the old segments as `.deleted`.
    let cfg = LogConfig::from_pairs([("segment.bytes", "600")]).unwrap();
    assert_eq!(cfg.file_delete_delay_ms, 60_000);
    let log = keyed_log(&dir, &cfg, 60, 5, now);
    let summary = log.clean(&force(now)).unwrap();
    assert!(summary.segments_cleaned > 1, "{summary:?}");
    let cleaned = contents(&log);
    // Each old segment's `.log` and `.timeindex`: segments of 600 bytes get no offset
    // index entry, so their offset indexes never had a file.
    assert_eq!(deleted_files(&dir).len(), 2 * summary.segments_cleaned);
    assert!(!deleted_files(&dir).iter().any(|n| n.ends_with(".index.deleted")));
    // A crash (the log is leaked, nothing unlinked): the reopen deletes them.
    std::mem::forget(log);
    let log = Log::open(&dir, cfg.clone(), OpenOptions::default()).unwrap();
    assert!(deleted_files(&dir).is_empty());
    assert_eq!(contents(&log), cleaned);
    // `close` unlinks what is pending before it returns.
    for i in 0..30 {
        append(&log, &keyed(i % 5, Some(i), now));
    }
    log.roll(None).unwrap();
    assert!(log.clean(&force(now)).unwrap().segments_cleaned > 0);
    assert!(!deleted_files(&dir).is_empty());
    log.close().unwrap();
    assert!(deleted_files(&dir).is_empty());

    // A delay of 0: gone when the pass returns.
    let dir0 = d.path().join("t-1");
    let cfg0 = LogConfig::from_pairs([("segment.bytes", "600"), ("file.delete.delay.ms", "0")]).unwrap();
    let log = keyed_log(&dir0, &cfg0, 60, 5, now);
    assert!(log.clean(&force(now)).unwrap().segments_cleaned > 1);
    assert!(deleted_files(&dir0).is_empty());
    log.close().unwrap();

    // A short delay: the background thread unlinks them, the log still open.
    let dir1 = d.path().join("t-2");
    let cfg1 = LogConfig::from_pairs([("segment.bytes", "600"), ("file.delete.delay.ms", "100")]).unwrap();
    let log = keyed_log(&dir1, &cfg1, 60, 5, now);
    assert!(log.clean(&force(now)).unwrap().segments_cleaned > 1);
    assert!(!deleted_files(&dir1).is_empty());
    let start = std::time::Instant::now();
    while !deleted_files(&dir1).is_empty() {
        assert!(start.elapsed() < std::time::Duration::from_secs(10), "still there: {:?}", deleted_files(&dir1));
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(log.deletions.is_empty());
    assert_eq!(log.num_segments(), log.segments().unwrap().len());
    log.close().unwrap();
}

/// Every file of `dir` by name (a closed log's directory).
fn dir_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), fs::read(&p).unwrap())).collect()
}

#[test]
fn dropping_superseded_segments_unread_gives_what_a_full_rewrite_gives() {
    let mut unread = 0;
    for seed in 0..8u64 {
        let mut rng = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut below = |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("src").join("t-0");
        let cfg = LogConfig::from_pairs([("segment.bytes", "700"), ("delete.retention.ms", "1000"), ("file.delete.delay.ms", "0")]).unwrap();
        let now = crate::log::now_ms();
        let log = Log::open(&src, cfg.clone(), OpenOptions::default()).unwrap();
        let mut seq = 0;
        for _ in 0..80 {
            let n = 1 + below(3) as usize;
            let kind = below(12);
            let recs: Vec<NewRecord> = (0..n)
                .map(|i| NewRecord {
                    offset: i as i64,
                    timestamp: now,
                    key: (kind != 0).then(|| vec![below(5) as u8]),
                    value: (kind != 5 || below(2) == 0).then(|| vec![below(250) as u8; 30]),
                    headers: vec![],
                })
                .collect();
            let mut o = BatchOptions::default();
            match kind {
                1 => o.compression = crate::compression::Compression::Gzip,
                2 | 3 => (o.producer_id, o.producer_epoch, o.base_sequence) = (5 + kind as i64, 0, seq),
                4 => o.log_append_time = Some(now),
                6 => (o.producer_id, o.producer_epoch, o.base_sequence, o.transactional) = (9, 0, seq, true),
                _ => {}
            }
            seq += n as i32;
            append(&log, &encode(&recs, &o));
            if kind == 6 {
                append(&log, &encode_control(1, 0, now, &BatchOptions { producer_id: 9, producer_epoch: 0, ..Default::default() }));
            }
        }
        log.roll(None).unwrap();
        log.close().unwrap();
        let mut results = Vec::new();
        for rewrite_all in [false, true] {
            REWRITE_EVERY_SEGMENT.with(|c| c.set(rewrite_all));
            let dir = d.path().join(format!("{rewrite_all}")).join("t-0");
            copy_dir(&src, &dir);
            let log = Log::open(&dir, cfg.clone(), OpenOptions::default()).unwrap();
            for t in [now, now + 2_000] {
                let mut s = log.clean(&force(t)).unwrap();
                // Everything the summary says but how many segments went unread.
                let n = std::mem::take(&mut s.segments_unread);
                assert!(!rewrite_all || n == 0);
                unread += n;
                results.push(format!("{s:?}"));
            }
            log.close().unwrap();
            results.push(format!("{:?}", dir_files(&dir)));
        }
        REWRITE_EVERY_SEGMENT.with(|c| c.set(false));
        let (skipping, full) = results.split_at(3);
        assert_eq!(skipping, full, "seed {seed}");
    }
    assert!(unread > 0, "no segment was dropped unread");
}

#[test]
fn a_corrupt_batch_fails_the_pass_before_any_segment_changes() {
    // The CRCs checked beside the map pass (a second thread) and inside it.
    for inline in [false, true] {
        CHECK_CRC_INLINE.with(|c| c.set(inline));
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("t-0");
        // Every batch indexed: opening re-validates only what follows the last entry.
        let cfg = LogConfig::from_pairs([("segment.bytes", "1000"), ("index.interval.bytes", "1")]).unwrap();
        let now = crate::log::now_ms();
        let log = keyed_log(&dir, &cfg, 60, 5, now);
        log.roll(None).unwrap();
        log.close().unwrap();
        // A value byte of the first batch of a late segment: the CRC no longer matches,
        // the framing still holds. The segments before it would be swapped first if the
        // check came with the rewrite.
        let logs = |dir: &Path| dir_files(dir).into_iter().filter(|(n, _)| n.ends_with(".log")).collect::<BTreeMap<_, _>>();
        let names: Vec<String> = logs(&dir).into_keys().collect();
        assert!(names.len() > 5, "{names:?}");
        let victim = dir.join(&names[names.len() - 3]);
        let mut bytes = fs::read(&victim).unwrap();
        let end = BatchIter::new(&bytes, 0).next().unwrap().unwrap().1.size();
        bytes[end - 10] ^= 0xff;
        fs::write(&victim, &bytes).unwrap();
        let before = logs(&dir);
        let log = Log::open(&dir, cfg.clone(), OpenOptions::default()).unwrap();
        let err = log.clean(&force(now)).unwrap_err();
        assert!(matches!(&err, Error::CorruptRecord { reason, .. } if reason.contains("CRC")), "{err}");
        log.close().unwrap();
        assert_eq!(logs(&dir), before, "inline: {inline}");
        assert!(dir_files(&dir).keys().all(|n| !n.contains(".cleaned") && !n.contains(".swap") && !n.contains(".deleted")));
    }
    CHECK_CRC_INLINE.with(|c| c.set(false));
}
