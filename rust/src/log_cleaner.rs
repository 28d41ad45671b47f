//! Compacting one log: `Log::clean` drives the cleaner (`cleaner.rs`) over its segments.
//!
//! A pass maps the dirty part of the log (from the `cleaner-offset-checkpoint`, one
//! entry in Kafka's checkpoint format, in the partition directory) to the latest offset
//! per key, then rewrites every non-active segment below the mapped end in place:
//!
//! 1. the cleaned bytes go to `<base>.log.cleaned`, which is fsynced;
//! 2. under the log's write lock, the segment's `.index` and `.timeindex` are deleted
//!    and `.cleaned` is renamed over `<base>.log` (an atomic replace), then the
//!    directory is fsynced and the segment reopened with its indexes rebuilt.
//!
//! A crash at any point leaves either the old or the new `.log` whole: a leftover
//! `.cleaned` is deleted on open, and missing indexes are rebuilt. Offsets never change,
//! so readers (and `FileSlice`s holding the old file) stay consistent. Segments are not
//! merged; only non-active segments whose data is older than `min.compaction.lag.ms`
//! are cleaned, and only when the dirty ratio reaches `min.cleanable.dirty.ratio`.

use std::fs::{self, File};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;

use crate::checkpoint;
use crate::cleaner::{build_offset_map, clean_segment, CleanOptions, CleanStats};
use crate::error::{IoContext, Result};
use crate::log::Log;
use crate::offset_map::OffsetMap;
use crate::segment::{file_name, LogSegment};

pub const CLEANER_CHECKPOINT_FILE: &str = "cleaner-offset-checkpoint";

#[derive(Clone, Debug)]
pub struct LogCleanOptions {
    pub now_ms: i64,
    /// `log.cleaner.dedupe.buffer.size`: memory for the offset map (24 bytes per key).
    pub dedupe_buffer_size: usize,
    /// Clean even when the dirty ratio is below `min.cleanable.dirty.ratio` (or nothing
    /// is dirty: tombstones past their delete horizon are still dropped).
    pub force: bool,
}

#[derive(Clone, Debug, Default)]
pub struct LogCleanSummary {
    pub stats: CleanStats,
    pub segments_cleaned: usize,
    pub keys_mapped: usize,
    /// The dirty section started here and ends here (the new checkpoint).
    pub first_dirty_offset: i64,
    pub cleaned_up_to: i64,
}

struct SegmentView {
    base: i64,
    size: u64,
    next_offset: i64,
    largest_timestamp: i64,
    path: PathBuf,
    file: Arc<File>,
}

fn read_all(v: &SegmentView) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; v.size as usize];
    v.file.read_exact_at(&mut buf, 0).ctx("read segment", &v.path)?;
    Ok(buf)
}

impl Log {
    fn cleaner_checkpoint(&self) -> Result<Option<i64>> {
        let entries = checkpoint::read(&self.dir.join(CLEANER_CHECKPOINT_FILE))?;
        Ok(entries.and_then(|e| e.first().and_then(|f| f.get(2)?.parse().ok())))
    }

    /// One cleaning pass; see the module comment. Returns what it did.
    pub fn clean(&self, opts: &LogCleanOptions) -> Result<LogCleanSummary> {
        let (segments, config, log_start) = {
            let inner = self.inner.read();
            inner.check_open(&self.dir)?;
            let active = inner.active().base_offset();
            let views: Vec<SegmentView> = inner
                .segments
                .values()
                .filter(|s| s.base_offset() < active)
                .map(|s| SegmentView {
                    base: s.base_offset(),
                    size: s.size(),
                    next_offset: s.next_offset(),
                    largest_timestamp: s.largest_timestamp(),
                    path: s.log_path().to_path_buf(),
                    file: Arc::clone(s.file()),
                })
                .collect();
            (views, inner.config.clone(), inner.log_start_offset)
        };
        let other = |key: &str, default: &str| config.other.get(key).cloned().unwrap_or_else(|| default.to_string());
        let delete_retention_ms: i64 = other("delete.retention.ms", "86400000").parse().unwrap_or(86_400_000);
        let min_lag_ms: i64 = other("min.compaction.lag.ms", "0").parse().unwrap_or(0);
        let min_ratio: f64 = other("min.cleanable.dirty.ratio", "0.5").parse().unwrap_or(0.5);

        // Only segments old enough to clean, from the start, count.
        let cleanable: Vec<&SegmentView> =
            segments.iter().take_while(|s| opts.now_ms - s.largest_timestamp >= min_lag_ms).collect();
        let first_dirty = self.cleaner_checkpoint()?.unwrap_or(log_start).max(log_start);
        let mut summary = LogCleanSummary { first_dirty_offset: first_dirty, cleaned_up_to: first_dirty, ..Default::default() };
        let total: u64 = cleanable.iter().map(|s| s.size).sum();
        let dirty: u64 = cleanable.iter().filter(|s| s.next_offset > first_dirty).map(|s| s.size).sum();
        // A forced pass runs even with nothing dirty: it then only drops tombstones whose
        // delete horizon has passed.
        if total == 0 || (!opts.force && (dirty == 0 || (dirty as f64) / (total as f64) < min_ratio)) {
            return Ok(summary);
        }

        let mut map = OffsetMap::with_memory(opts.dedupe_buffer_size)?;
        let mut mapped_end = first_dirty;
        for s in cleanable.iter().filter(|s| s.next_offset > first_dirty) {
            let next = build_offset_map(&read_all(s)?, &mut map)?;
            if next >= 0 {
                mapped_end = next;
            }
            if next < s.next_offset {
                break; // the map is full: this pass cleans up to here
            }
        }
        summary.keys_mapped = map.len();
        let clean_opts = CleanOptions { now_ms: opts.now_ms, delete_retention_ms };
        for s in cleanable.iter().filter(|s| s.base < mapped_end) {
            let input = read_all(s)?;
            let (output, stats) = clean_segment(&input, &map, &clean_opts)?;
            summary.stats.add(&stats);
            if output == input {
                continue;
            }
            if self.replace_segment(s, &output, &config)? {
                summary.segments_cleaned += 1;
            }
        }
        summary.cleaned_up_to = mapped_end;
        checkpoint::write(&self.dir.join(CLEANER_CHECKPOINT_FILE), &[format!("{} {mapped_end}", self.topic_partition_label())])?;
        Ok(summary)
    }

    /// Swaps a segment's `.log` for its cleaned bytes (see the module comment). Returns
    /// false when the segment changed meanwhile (truncated or deleted): nothing is done.
    fn replace_segment(&self, s: &SegmentView, cleaned: &[u8], config: &crate::log_config::LogConfig) -> Result<bool> {
        let cleaned_path = self.dir.join(file_name(s.base, ".log.cleaned"));
        {
            let mut f = File::create(&cleaned_path).ctx("create cleaned segment", &cleaned_path)?;
            f.write_all(cleaned).ctx("write cleaned segment", &cleaned_path)?;
            f.sync_all().ctx("fsync cleaned segment", &cleaned_path)?;
        }
        let mut inner = self.inner.write();
        let unchanged = inner.segments.get(&s.base).is_some_and(|seg| seg.size() == s.size && seg.base_offset() != inner.active().base_offset());
        if inner.check_open(&self.dir).is_err() || !unchanged {
            let _ = fs::remove_file(&cleaned_path);
            return Ok(false);
        }
        for suffix in [".index", ".timeindex"] {
            let p = self.dir.join(file_name(s.base, suffix));
            match fs::remove_file(&p) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e).ctx("delete index", &p),
                _ => {}
            }
        }
        fs::rename(&cleaned_path, &s.path).ctx("rename cleaned segment", &cleaned_path)?;
        checkpoint::sync_dir(&self.dir)?;
        let mut seg = LogSegment::open(&self.dir, s.base, config, false, crate::log::now_ms())?;
        seg.recover(config)?;
        seg.on_become_inactive()?;
        inner.segments.insert(s.base, seg);
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::log::{AppendOptions, OpenOptions};
    use crate::log_config::LogConfig;
    use crate::record::NewRecord;
    use crate::record_batch::{encode, BatchOptions, BatchIter, DecodedBatch};

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
        let opts = LogCleanOptions { now_ms: now, dedupe_buffer_size: 1 << 20, force: true };
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
}
