//! An OST's settable parameters (`lctl set_param obdfilter.*.NAME=VALUE`)
//! and the ones kept across restarts (`set_param -P`), in the OST's own
//! directory as `params`: one `name=value` line each, read when the OST
//! starts. Lustre keeps `-P` settings in the MGS's configuration logs and
//! replays them to every target that starts; lanefs keeps an OST's in its
//! directory, so they go wherever its directory goes.
//!
//! Bounds: the file holds at most [`PARAMS_BYTES_MAX`] bytes; only names
//! of [`NAMES`] are written or read (an unknown line fails the start, with
//! its name).

use crate::filestore::FileStore;
use lanefs_core::ost::{Ost, SyncLockCancel};
use std::path::{Path, PathBuf};

/// The parameters an OST takes.
pub const NAMES: [&str; 1] = ["sync_lock_cancel"];
/// The largest `params` file read.
pub const PARAMS_BYTES_MAX: u64 = 64 << 10;

fn path(dir: &Path) -> PathBuf {
    dir.join("params")
}

/// Set `name` to `value` on `ost` now, and with `permanent` in its
/// `params` file too; the error names the parameter, the value and what
/// is accepted.
pub fn set(ost: &mut Ost<FileStore>, name: &str, value: &str, permanent: bool) -> Result<(), String> {
    apply(ost, name, value)?;
    if permanent {
        save(ost.store().dir(), name, value.trim())
            .map_err(|e| format!("{name}={value}: set, but not kept for the next start: {e}"))?;
    }
    Ok(())
}

fn apply(ost: &mut Ost<FileStore>, name: &str, value: &str) -> Result<(), String> {
    match name {
        "sync_lock_cancel" => {
            let policy = SyncLockCancel::from_name(value.trim())
                .ok_or_else(|| format!("sync_lock_cancel={value}: give one of {}", SyncLockCancel::NAMES.join(", ")))?;
            ost.set_sync_lock_cancel(policy);
            Ok(())
        }
        _ => Err(format!("{name}: not a parameter an OST sets; it takes {}", NAMES.join(", "))),
    }
}

/// Apply the OST's kept parameters (none without a `params` file).
pub fn load(ost: &mut Ost<FileStore>) -> std::io::Result<()> {
    let file = path(ost.store().dir());
    let invalid = |e: String| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{}: {e}", file.display()));
    let text = match std::fs::metadata(&file) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
        Ok(m) if m.len() > PARAMS_BYTES_MAX => return Err(invalid(format!("past {PARAMS_BYTES_MAX} bytes"))),
        Ok(_) => std::fs::read_to_string(&file)?,
    };
    for (name, value) in parse(&text).map_err(invalid)? {
        apply(ost, &name, &value).map_err(invalid)?;
    }
    Ok(())
}

fn parse(text: &str) -> Result<Vec<(String, String)>, String> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| match l.split_once('=') {
            Some((n, v)) => Ok((n.trim().to_string(), v.trim().to_string())),
            None => Err(format!("line {l:?} is not name=value")),
        })
        .collect()
}

/// Write `name=value` into the `params` file, replacing the line of the
/// same name (written to a new file, then renamed over the old one).
fn save(dir: &Path, name: &str, value: &str) -> std::io::Result<()> {
    let file = path(dir);
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    let mut lines = parse(&text).unwrap_or_default();
    lines.retain(|(n, _)| n != name);
    lines.push((name.to_string(), value.to_string()));
    let body: String = lines.iter().map(|(n, v)| format!("{n}={v}\n")).collect();
    let new = dir.join("params.new");
    std::fs::write(&new, body)?;
    std::fs::File::open(&new)?.sync_all()?;
    std::fs::rename(&new, &file)?;
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use lanefs_core::ost::OstConfig;
    use lanefs_core::OstIndex;

    #[test]
    fn kept_settings_apply_at_the_next_start() {
        let dir = tempfile::tempdir().unwrap();
        let open = || {
            let store = FileStore::open(dir.path()).unwrap();
            let mut ost = Ost::new(OstIndex(0), OstConfig::default(), store);
            load(&mut ost).unwrap();
            ost
        };
        let mut ost = open();
        assert_eq!(ost.config().sync_lock_cancel, SyncLockCancel::Never);
        let error = set(&mut ost, "sync_lock_cancel", "sometimes", true).unwrap_err();
        assert!(error.contains("sometimes") && error.contains("never, blocking, always"), "{error}");
        set(&mut ost, "sync_lock_cancel", "blocking", false).unwrap();
        assert_eq!(open().config().sync_lock_cancel, SyncLockCancel::Never, "not kept without -P");
        set(&mut ost, "sync_lock_cancel", "always", true).unwrap();
        assert_eq!(open().config().sync_lock_cancel, SyncLockCancel::Always);
        std::fs::write(path(dir.path()), "nonsense=1\n").unwrap();
        let store = FileStore::open(dir.path()).unwrap();
        let mut ost = Ost::new(OstIndex(0), OstConfig::default(), store);
        assert!(load(&mut ost).unwrap_err().to_string().contains("nonsense"));
    }
}
