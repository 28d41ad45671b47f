//! A byte range of whole batches in one segment file, and zero-copy `sendfile(2)`.
//!
//! A slice holds its own reference to the open segment file, so it stays readable
//! after the segment is rolled, or deleted by retention (the inode lives until the last
//! descriptor closes). Bytes inside the range never change while the log keeps them:
//! appends only write past the published segment size.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::os::unix::io::{AsRawFd, RawFd};
use std::path::PathBuf;
use std::sync::Arc;

use crate::error::{IoContext, Result};

#[derive(Clone, Debug)]
pub struct FileSlice {
    pub file: Arc<File>,
    pub path: PathBuf,
    pub position: u64,
    pub length: u64,
    pub base_offset: i64,
    pub last_offset: i64,
}

impl FileSlice {
    pub fn read(&self) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; self.length as usize];
        self.file.read_exact_at(&mut buf, self.position).ctx("read segment", &self.path)?;
        Ok(buf)
    }

    /// Sends `[offset, offset + count)` of the slice (clamped to it) to `out_fd`.
    /// Returns the bytes sent, which may be fewer than asked (non-blocking sockets).
    pub fn send(&self, out_fd: RawFd, offset: u64, count: Option<u64>) -> std::io::Result<usize> {
        if offset >= self.length {
            return Ok(0);
        }
        let left = self.length - offset;
        let count = count.map_or(left, |c| c.min(left));
        sendfile(out_fd, self.file.as_raw_fd(), self.position + offset, count as usize)
    }
}

/// One or more `sendfile(2)` calls moving `count` bytes of `in_fd` from `offset` to
/// `out_fd` in the kernel. Stops early (returning what was sent) when `out_fd` would
/// block; fails with `WouldBlock` only if nothing at all could be sent.
pub fn sendfile(out_fd: RawFd, in_fd: RawFd, offset: u64, count: usize) -> std::io::Result<usize> {
    let mut sent = 0usize;
    let mut off = offset as libc::off_t;
    while sent < count {
        // Linux moves at most 0x7ffff000 bytes per call.
        let chunk = (count - sent).min(0x7fff_f000);
        // SAFETY: plain syscall on caller-provided descriptors; `off` is a valid pointer.
        let n = unsafe { libc::sendfile(out_fd, in_fd, &mut off, chunk) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            match e.kind() {
                std::io::ErrorKind::Interrupted => continue,
                std::io::ErrorKind::WouldBlock if sent > 0 => break,
                _ => return Err(e),
            }
        }
        if n == 0 {
            break; // end of the input file
        }
        sent += n as usize;
    }
    Ok(sent)
}
