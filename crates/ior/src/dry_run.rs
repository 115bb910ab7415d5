//! `--dryRun`: IOR's run without I/O. IOR's backends return at once from
//! every file operation when asked for a dry run; here one wrapper does it
//! for every backend: each rank's handle succeeds without touching a file,
//! and deleting or making a directory does nothing. The test runs as usual
//! otherwise (barriers, timers, the report), so its options, its layout of
//! ranks and the shape of its output can be seen before the real run.

use crate::backend::{Backend, BackendReport, FsInfo, Module, ModuleOption, RankIo};
use crate::error::IorError;
use crate::params::IorParams;

/// `backend` with every file operation skipped.
pub struct DryRun<'b>(pub &'b dyn Backend);

impl Backend for DryRun<'_> {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn version(&self) -> String {
        self.0.version()
    }

    fn options(&self) -> &'static [ModuleOption] {
        self.0.options()
    }

    fn other_modules(&self) -> &'static [Module] {
        self.0.other_modules()
    }

    fn check_params(&self, p: &IorParams) -> Result<(), IorError> {
        self.0.check_params(p)
    }

    fn rank<'a>(&'a self, _rank: u32, _p: &IorParams) -> Result<Box<dyn RankIo + 'a>, IorError> {
        Ok(Box::new(NoIo))
    }

    fn delete(&self, _path: &str) -> Result<(), IorError> {
        Ok(())
    }

    fn mkdir(&self, _path: &str) -> Result<(), IorError> {
        Ok(())
    }

    /// The file system's capacity is read as in a real run (IOR's statfs
    /// ignores the dry run too).
    fn fs_info(&self, path: &str) -> Result<FsInfo, IorError> {
        self.0.fs_info(path)
    }

    /// No I/O, so nothing of the backend's own to report.
    fn reports(&self) -> Vec<BackendReport> {
        Vec::new()
    }
}

/// A rank's handle that does nothing and never fails.
pub(crate) struct NoIo;

impl RankIo for NoIo {
    fn create(&mut self, _path: &str, _p: &IorParams) -> Result<(), IorError> {
        Ok(())
    }

    fn open(&mut self, _path: &str, _p: &IorParams) -> Result<(), IorError> {
        Ok(())
    }

    fn write_at(&mut self, _offset: u64, _buf: &[u8]) -> Result<(), IorError> {
        Ok(())
    }

    fn read_at(&mut self, _offset: u64, _buf: &mut [u8]) -> Result<(), IorError> {
        Ok(())
    }

    fn fsync(&mut self) -> Result<(), IorError> {
        Ok(())
    }

    fn close(&mut self) -> Result<(), IorError> {
        Ok(())
    }
}
