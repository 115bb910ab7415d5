//! The POSIX backend: `std::fs` files and positioned I/O.
//!
//! What: each rank opens its own file descriptor; transfers are `pwrite`/`pread` at the
//! transfer's offset (IOR's POSIX backend does `lseek` + `write`, which moves the same
//! bytes); `-e`/`-Y` call `fsync`; the `FS` line comes from `statvfs` of the test file's
//! directory. `--posix.odirect` opens with `O_DIRECT` (the run's buffers are 4 KiB
//! aligned); the file system must support it and `-t` must be a multiple of its logical
//! block size.
//!
//! Not here: IOR's `--posix.rangelocks` and the Lustre/GPFS/BeeGFS tuning options
//! (`--posix.lustre.*`): they are refused as unknown module options.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};

use crate::backend::{check_module_options, Backend, FsInfo, ModuleOption, RankIo};
use crate::error::IorError;
use crate::params::IorParams;

const NAME: &str = crate::Api::Posix.name();
/// Alignment `--posix.odirect` asks of `-t` (a conservative logical block size).
pub const ODIRECT_ALIGN_BYTES: u64 = 512;
/// IOR's file mode: `S_IRUSR | S_IWUSR | S_IRGRP | S_IWGRP`.
const FILE_MODE: u32 = 0o660;

const OPTIONS: &[ModuleOption] =
    &[ModuleOption { name: "odirect", takes_value: false, help: "open files with O_DIRECT (bypass the page cache)" }];

/// The POSIX backend. Stateless: each rank's file lives in its [`RankIo`].
#[derive(Debug, Clone, Copy, Default)]
pub struct PosixBackend;

impl Backend for PosixBackend {
    fn name(&self) -> &'static str {
        NAME
    }

    fn options(&self) -> &'static [ModuleOption] {
        OPTIONS
    }

    fn check_params(&self, p: &IorParams) -> Result<(), IorError> {
        check_module_options(NAME, OPTIONS, p)?;
        if p.module_flag("posix.odirect") && !p.transfer_size_bytes.is_multiple_of(ODIRECT_ALIGN_BYTES) {
            return Err(IorError::option(
                format!("--posix.odirect -t {}", p.transfer_size_bytes),
                format!("O_DIRECT needs -t to be a multiple of {ODIRECT_ALIGN_BYTES} bytes (the device's logical block size)"),
            ));
        }
        Ok(())
    }

    fn rank<'a>(&'a self, _rank: u32, p: &IorParams) -> Result<Box<dyn RankIo + 'a>, IorError> {
        Ok(Box::new(PosixRank { file: None, path: String::new(), odirect: p.module_flag("posix.odirect") }))
    }

    fn delete(&self, path: &str) -> Result<(), IorError> {
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(io_error("unlink", path, e)),
            _ => Ok(()),
        }
    }

    fn file_size(&self, path: &str) -> Option<u64> {
        std::fs::metadata(path).ok().map(|m| m.len())
    }

    fn mkdir(&self, path: &str) -> Result<(), IorError> {
        match std::fs::create_dir(path) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => Err(io_error("mkdir", path, e)),
            _ => Ok(()),
        }
    }

    fn fs_info(&self, path: &str) -> Result<FsInfo, IorError> {
        statvfs(path)
    }
}

fn io_error(op: impl Into<String>, path: &str, source: io::Error) -> IorError {
    IorError::Io { backend: NAME, op: op.into(), path: path.to_string(), source }
}

/// One rank's open file.
struct PosixRank {
    file: Option<File>,
    path: String,
    odirect: bool,
}

impl PosixRank {
    fn open_with(&mut self, path: &str, options: &mut OpenOptions, op: &str) -> Result<(), IorError> {
        assert!(self.file.is_none(), "rank opened {path} while {} is still open", self.path);
        if self.odirect {
            options.custom_flags(libc::O_DIRECT);
        }
        let file = options.open(path).map_err(|e| {
            let op = if self.odirect && e.raw_os_error() == Some(libc::EINVAL) {
                format!("{op} with O_DIRECT (the file system refuses it; drop --posix.odirect)")
            } else {
                op.to_string()
            };
            io_error(op, path, e)
        })?;
        self.file = Some(file);
        self.path = path.to_string();
        Ok(())
    }

    fn file(&self) -> &File {
        self.file.as_ref().expect("transfer on a rank with no open file")
    }
}

impl RankIo for PosixRank {
    fn create(&mut self, path: &str, _p: &IorParams) -> Result<(), IorError> {
        self.open_with(path, OpenOptions::new().read(true).write(true).create(true).mode(FILE_MODE), "create")
    }

    fn open(&mut self, path: &str, _p: &IorParams) -> Result<(), IorError> {
        self.open_with(path, OpenOptions::new().read(true), "open")
    }

    fn write_at(&mut self, offset: u64, buf: &[u8]) -> Result<(), IorError> {
        self.file().write_all_at(buf, offset).map_err(|e| io_error(format!("pwrite at offset {offset}"), &self.path, e))
    }

    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), IorError> {
        self.file().read_exact_at(buf, offset).map_err(|e| {
            let op = if e.kind() == io::ErrorKind::UnexpectedEof {
                format!("pread at offset {offset} hit end of file (file shorter than -b x -s expects)")
            } else {
                format!("pread at offset {offset}")
            };
            io_error(op, &self.path, e)
        })
    }

    fn fsync(&mut self) -> Result<(), IorError> {
        self.file().sync_all().map_err(|e| io_error("fsync", &self.path, e))
    }

    fn close(&mut self) -> Result<(), IorError> {
        assert!(self.file.is_some(), "close without an open file");
        self.file = None;
        Ok(())
    }
}

/// `statvfs(2)` of `path`.
// The field types are u64 on 64-bit Linux but narrower elsewhere, hence the casts.
#[allow(clippy::unnecessary_cast)]
fn statvfs(path: &str) -> Result<FsInfo, IorError> {
    let c_path = std::ffi::CString::new(path)
        .map_err(|e| io_error("statvfs", path, io::Error::new(io::ErrorKind::InvalidInput, e)))?;
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: c_path is a valid NUL-terminated string and stat points to writable memory
    // of the right type; statvfs only writes into it.
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), stat.as_mut_ptr()) };
    if rc != 0 {
        return Err(io_error("statvfs", path, io::Error::last_os_error()));
    }
    // SAFETY: statvfs returned 0, so it initialised the whole struct.
    let stat = unsafe { stat.assume_init() };
    let fragment = stat.f_frsize as u64;
    Ok(FsInfo {
        total_bytes: stat.f_blocks as u64 * fragment,
        free_bytes: stat.f_bfree as u64 * fragment,
        total_inodes: stat.f_files as u64,
        free_inodes: stat.f_ffree as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(line: &str) -> IorParams {
        let args: Vec<String> = line.split_whitespace().map(str::to_string).collect();
        crate::options::parse_args(&args).unwrap()
    }

    #[test]
    fn round_trip_and_delete() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f").to_str().unwrap().to_string();
        let p = params("");
        let mut io = PosixBackend.rank(0, &p).unwrap();
        io.create(&path, &p).unwrap();
        io.write_at(8, b"abcdefgh").unwrap();
        io.fsync().unwrap();
        io.close().unwrap();
        io.open(&path, &p).unwrap();
        let mut buf = [0u8; 8];
        io.read_at(8, &mut buf).unwrap();
        assert_eq!(&buf, b"abcdefgh");
        let short = io.read_at(12, &mut buf).unwrap_err().to_string();
        assert!(short.contains("hit end of file"), "{short}");
        io.close().unwrap();
        PosixBackend.delete(&path).unwrap();
        PosixBackend.delete(&path).unwrap();
        assert!(!std::path::Path::new(&path).exists());
    }

    #[test]
    fn open_of_a_missing_file_names_it() {
        let p = params("");
        let mut io = PosixBackend.rank(0, &p).unwrap();
        let e = io.open("/nonexistent/dir/f", &p).unwrap_err().to_string();
        assert!(e.starts_with("POSIX: open /nonexistent/dir/f:"), "{e}");
    }

    #[test]
    fn statvfs_reports_capacity() {
        let info = PosixBackend.fs_info(".").unwrap();
        assert!(info.total_bytes > 0 && info.free_bytes <= info.total_bytes);
        assert!(PosixBackend.fs_info("/nonexistent/dir").is_err());
    }

    #[test]
    fn odirect_is_checked() {
        assert!(PosixBackend.check_params(&params("--posix.odirect -t 4k -b 4k")).is_ok());
        let e = PosixBackend.check_params(&params("--posix.odirect -t 1000 -b 1000")).unwrap_err().to_string();
        assert!(e.contains("multiple of 512"), "{e}");
        let e = PosixBackend.check_params(&params("--posix.rangelocks")).unwrap_err().to_string();
        assert!(e.contains("supports: --posix.odirect"), "{e}");
    }
}
