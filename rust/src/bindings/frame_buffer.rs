//! `FrameBuffer`: a request frame read from the socket straight into the `bytes` object
//! that becomes the frame, so a large frame costs no copy in user space.
//!
//! Holds a `bytes` object of the frame's size, created uninitialized and seen by no one
//! else until it is whole. Its unfilled tail is lent as a writable buffer (the buffer
//! protocol: `memoryview(fb)` covers bytes `filled..len`, the socket's `recv_into`
//! writes there, `advance(n)` records what it wrote); `write` copies bytes in.
//!
//! Invariants:
//! - `filled <= len`; bytes `0..filled` were written, none past them is ever read.
//! - `take` hands the `bytes` out only when `filled == len` and no lent buffer is still
//!   exported, so nothing can write into it once Python code may see it; after `take`
//!   the buffer holds nothing and every method but `len`/`filled` raises.
//! - A lent buffer holds a reference to this object (`Py_buffer.obj`), and this object
//!   holds the `bytes` while any is exported, so the memory a buffer points at lives
//!   as long as the buffer.

use std::ffi::c_int;

use pyo3::exceptions::{PyBufferError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::buffer::Borrowed;

#[pyclass(module = "logstore._native", name = "FrameBuffer", unsendable)]
pub(super) struct PyFrameBuffer {
    bytes: Option<Py<PyBytes>>,
    len: usize,
    filled: usize,
    exports: usize,
}

impl PyFrameBuffer {
    /// The start of the `bytes` object's storage.
    fn storage(&self, py: Python<'_>) -> PyResult<*mut u8> {
        let bytes = self.bytes.as_ref().ok_or_else(|| PyValueError::new_err("the frame was taken"))?;
        // SAFETY: a live bytes object; PyBytes_AsString only reads its storage pointer.
        Ok(unsafe { ffi::PyBytes_AsString(bytes.bind(py).as_ptr()) } as *mut u8)
    }
}

#[pymethods]
impl PyFrameBuffer {
    #[new]
    fn new(py: Python<'_>, size: usize) -> PyResult<Self> {
        let n = ffi::Py_ssize_t::try_from(size).map_err(|_| PyValueError::new_err("frame size out of range"))?;
        // SAFETY: a NULL source makes an uninitialized bytes object of n bytes, which
        // no Python code sees before `take` (every byte is written by then).
        let bytes = unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyBytes_FromStringAndSize(std::ptr::null(), n))? };
        let bytes = bytes.cast_into::<PyBytes>().map_err(PyErr::from)?.unbind();
        Ok(Self { bytes: Some(bytes), len: size, filled: 0, exports: 0 })
    }

    /// The frame's size.
    fn __len__(&self) -> usize {
        self.len
    }

    /// How many of its bytes have been written.
    #[getter]
    fn filled(&self) -> usize {
        self.filled
    }

    /// Copies the start of `data` in after the bytes written; returns how many bytes were
    /// taken (all of them, or what was left of the frame).
    fn write(&mut self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<usize> {
        let data = Borrowed::new(data)?;
        let src = data.as_slice();
        let take = src.len().min(self.len - self.filled);
        let dst = self.storage(py)?;
        // SAFETY: filled + take <= len, the bytes object's size; the source is another
        // object's memory (the frame's storage is never lent as an argument).
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst.add(self.filled), take) };
        self.filled += take;
        Ok(take)
    }

    /// `n` more bytes were written into the lent buffer.
    fn advance(&mut self, n: usize) -> PyResult<()> {
        if n > self.len - self.filled {
            return Err(PyValueError::new_err(format!("advance({n}) past the frame's {} unfilled bytes", self.len - self.filled)));
        }
        self.filled += n;
        Ok(())
    }

    /// The whole frame as `bytes`; BufferError while a lent buffer is exported,
    /// ValueError before it is whole.
    fn take(&mut self, py: Python<'_>) -> PyResult<Py<PyBytes>> {
        if self.exports > 0 {
            return Err(PyBufferError::new_err("a buffer lent for the frame is still exported"));
        }
        if self.filled < self.len {
            return Err(PyValueError::new_err(format!("{} of the frame's {} bytes written", self.filled, self.len)));
        }
        let _ = self.storage(py)?;
        Ok(self.bytes.take().expect("checked by storage"))
    }

    /// Lends bytes `filled..len`, writable.
    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        let py = slf.py();
        let (ptr, len) = {
            let this = slf.borrow();
            (unsafe { this.storage(py)?.add(this.filled) }, this.len - this.filled)
        };
        let len = ffi::Py_ssize_t::try_from(len).map_err(|_| PyBufferError::new_err("frame too large"))?;
        // SAFETY: view is the caller's Py_buffer to fill; ptr..ptr+len lies in the bytes
        // object this object holds until the export is released (take refuses before).
        if unsafe { ffi::PyBuffer_FillInfo(view, slf.as_ptr(), ptr.cast(), len, 0, flags) } != 0 {
            return Err(PyErr::fetch(py));
        }
        slf.borrow_mut().exports += 1;
        Ok(())
    }

    unsafe fn __releasebuffer__(&mut self, _view: *mut ffi::Py_buffer) {
        self.exports -= 1;
    }
}
