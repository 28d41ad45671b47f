//! Kafka's checkpoint text files, written atomically.
//!
//! ```text
//! 0                 version
//! N                 number of entries
//! <entry> x N       one per line, fields separated by single spaces
//! ```
//! Used for `leader-epoch-checkpoint` (entries `epoch startOffset`) and the offset
//! checkpoints (entries `topic partition offset`). A write goes to `<name>.tmp`, is
//! fsynced, renamed over the old file, and the directory is fsynced. Writes of one path
//! are serialized in this process (a background flush and a reopen of the same log may
//! write the same checkpoint at once; they must not share `<name>.tmp` unguarded).

use std::collections::hash_map::DefaultHasher;
use std::fs::{self, File};
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::Path;

use parking_lot::Mutex;

use crate::error::{Error, IoContext, Result};

const VERSION: &str = "0";

/// Reads the entries of a checkpoint file (None when it does not exist). Each entry is
/// split into its space-separated fields.
pub fn read(path: &Path) -> Result<Option<Vec<Vec<String>>>> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).ctx("read checkpoint", path),
    };
    let bad = |reason: &str| Error::Io {
        op: "parse checkpoint",
        path: path.to_path_buf(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, reason.to_string()),
    };
    let mut lines = text.lines();
    if lines.next().map(str::trim) != Some(VERSION) {
        return Err(bad("unsupported version line"));
    }
    let count: usize = lines.next().and_then(|l| l.trim().parse().ok()).ok_or_else(|| bad("bad entry count"))?;
    let entries: Vec<Vec<String>> = lines.filter(|l| !l.trim().is_empty()).map(|l| l.split_whitespace().map(String::from).collect()).collect();
    if entries.len() != count {
        return Err(bad("entry count disagrees with the entries"));
    }
    Ok(Some(entries))
}

/// Locks striped by path: two writers of one path always take the same lock.
const WRITE_LOCKS: usize = 64;
static WRITE_LOCK: [Mutex<()>; WRITE_LOCKS] = [const { Mutex::new(()) }; WRITE_LOCKS];

fn write_lock(path: &Path) -> &'static Mutex<()> {
    let mut h = DefaultHasher::new();
    path.hash(&mut h);
    &WRITE_LOCK[(h.finish() % WRITE_LOCKS as u64) as usize]
}

pub fn write(path: &Path, entries: &[String]) -> Result<()> {
    write_file(path, entries)?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// As `write`, but the rename is durable only once the caller fsyncs the directory
/// (one fsync for several checkpoints of one directory).
pub fn write_file(path: &Path, entries: &[String]) -> Result<()> {
    write_file_with(path, entries, true)
}

/// As `write_file`; with `sync` false the file is not fsynced either, for a caller that
/// makes the whole filesystem durable later (`sync_filesystem`). A crash before that may
/// leave the file torn or empty: readers set such a checkpoint aside and fall back to
/// the safe value (recovery from 0, the first segment's base).
pub fn write_file_with(path: &Path, entries: &[String], sync: bool) -> Result<()> {
    let _serialized = write_lock(path).lock();
    let tmp = path.with_extension("tmp");
    {
        let mut f = File::create(&tmp).ctx("create checkpoint", &tmp)?;
        let mut text = format!("{VERSION}\n{}\n", entries.len());
        for e in entries {
            text.push_str(e);
            text.push('\n');
        }
        f.write_all(text.as_bytes()).ctx("write checkpoint", &tmp)?;
        if sync {
            f.sync_all().ctx("fsync checkpoint", &tmp)?;
        }
    }
    fs::rename(&tmp, path).ctx("rename checkpoint", path)
}

pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).ctx("fsync directory", dir)
}

/// `syncfs(2)` of the filesystem holding `path`: every file's data and metadata there,
/// in one call (one journal commit where an fsync per directory would make one each).
pub fn sync_filesystem(path: &Path) -> Result<()> {
    use std::os::fd::AsRawFd;
    let f = File::open(path).ctx("open for syncfs", path)?;
    // SAFETY: syncfs takes a descriptor that `f` keeps open for the call.
    if unsafe { libc::syncfs(f.as_raw_fd()) } != 0 {
        return Err(std::io::Error::last_os_error()).ctx("syncfs", path);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_missing() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("leader-epoch-checkpoint");
        assert!(read(&p).unwrap().is_none());
        write(&p, &["0 0".into(), "3 120".into()]).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "0\n2\n0 0\n3 120\n");
        assert_eq!(read(&p).unwrap().unwrap()[1], vec!["3", "120"]);
        fs::write(&p, "0\n3\n1 1\n").unwrap();
        assert!(read(&p).is_err());
    }

    #[test]
    fn concurrent_writers_of_one_path_all_succeed() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("recovery-point-offset-checkpoint");
        std::thread::scope(|s| {
            for t in 0..8 {
                let p = &p;
                s.spawn(move || {
                    for i in 0..25 {
                        write(p, &[format!("t 0 {}", t * 100 + i)]).unwrap();
                    }
                });
            }
        });
        assert_eq!(read(&p).unwrap().unwrap().len(), 1);
        assert!(!p.with_extension("tmp").exists());
    }
}
