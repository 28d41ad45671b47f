//! Bytes borrowed from Python arguments without a copy, for every binding that takes
//! `bytes | bytearray | memoryview` (appends, decoders, CRC, produce records).

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// Bytes borrowed from a Python object: `bytes` directly, anything else with the
/// buffer protocol (memoryview, bytearray) when C-contiguous.
pub(super) enum Borrowed<'py> {
    Bytes(Bound<'py, PyBytes>),
    Buffer(PyBuffer<u8>),
}

impl<'py> Borrowed<'py> {
    pub(super) fn new(obj: &Bound<'py, PyAny>) -> PyResult<Self> {
        if let Ok(b) = obj.cast::<PyBytes>() {
            return Ok(Borrowed::Bytes(b.clone()));
        }
        let buf = PyBuffer::<u8>::get(obj)?;
        if !buf.is_c_contiguous() {
            return Err(PyTypeError::new_err("a contiguous bytes-like object is required"));
        }
        Ok(Borrowed::Buffer(buf))
    }

    pub(super) fn as_slice(&self) -> &[u8] {
        match self {
            Borrowed::Bytes(b) => b.as_bytes(),
            // SAFETY: the buffer is contiguous and held (exported) for our lifetime.
            Borrowed::Buffer(b) => unsafe { std::slice::from_raw_parts(b.buf_ptr() as *const u8, b.len_bytes()) },
        }
    }
}
