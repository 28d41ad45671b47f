//! `FileSlice` (the byte range of whole batches a read returns) and `sendfile`: the
//! zero-copy path of Fetch; `read_slice_bytes` copies a slice into `bytes` instead.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::error::Error;
use crate::file_slice::{self, FileSlice};

#[pyclass(frozen, name = "FileSlice", module = "logstore._native")]
pub(super) struct PyFileSlice(FileSlice);

impl PyFileSlice {
    pub(super) fn inner(&self) -> &FileSlice {
        &self.0
    }
}

impl From<FileSlice> for PyFileSlice {
    fn from(slice: FileSlice) -> Self {
        PyFileSlice(slice)
    }
}

#[pymethods]
impl PyFileSlice {
    #[getter]
    fn path(&self) -> String {
        self.0.path.to_string_lossy().into_owned()
    }
    #[getter]
    fn position(&self) -> u64 {
        self.0.position
    }
    #[getter]
    fn length(&self) -> u64 {
        self.0.length
    }
    #[getter]
    fn base_offset(&self) -> i64 {
        self.0.base_offset
    }
    #[getter]
    fn last_offset(&self) -> i64 {
        self.0.last_offset
    }

    #[pyo3(signature = (out_fd, offset = 0, count = None))]
    fn sendfile(&self, py: Python<'_>, out_fd: i32, offset: u64, count: Option<u64>) -> PyResult<usize> {
        Ok(py.detach(|| self.0.send(out_fd, offset, count))?)
    }

    fn read<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        read_slice_bytes(py, &self.0)
    }

    fn __len__(&self) -> usize {
        self.0.length as usize
    }

    fn __repr__(&self) -> String {
        format!("FileSlice(path={:?}, position={}, length={})", self.0.path, self.0.position, self.0.length)
    }
}

/// Reads a slice straight into a new `bytes` object, with the GIL released for the read.
pub(super) fn read_slice_bytes<'py>(py: Python<'py>, slice: &FileSlice) -> PyResult<Bound<'py, PyBytes>> {
    PyBytes::new_with(py, slice.length as usize, |buf| {
        py.detach(|| {
            use std::os::unix::fs::FileExt;
            slice.file.read_exact_at(buf, slice.position)
        })
        .map_err(|e| PyErr::from(Error::Io { op: "read segment", path: slice.path.clone(), source: e }))
    })
}

#[pyfunction]
pub(super) fn sendfile(py: Python<'_>, out_fd: i32, in_fd: i32, offset: u64, count: usize) -> PyResult<usize> {
    Ok(py.detach(|| file_slice::sendfile(out_fd, in_fd, offset, count))?)
}
