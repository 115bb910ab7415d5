//! An OST's settable parameters (`lctl set_param obdfilter.*.NAME=VALUE`)
//! and the ones kept across restarts (`set_param -P`), in the OST's own
//! directory as `params`: one `name=value` line each, read when the OST
//! starts. Lustre keeps `-P` settings in the MGS's configuration logs and
//! replays them to every target that starts; lanefs keeps an OST's in its
//! directory, so they go wherever its directory goes.
//!
//! Bounds: those of [`crate::kept_params`]; only names of [`NAMES`] are
//! written or read (an unknown line fails the start, with its name).

use crate::filestore::FileStore;
use lanefs_core::ost::{Ost, SyncLockCancel};
use std::path::{Path, PathBuf};

/// The parameters an OST takes.
pub const NAMES: [&str; 1] = ["sync_lock_cancel"];

fn path(dir: &Path) -> PathBuf {
    dir.join("params")
}

/// Set `name` to `value` on `ost` now, and with `permanent` in its
/// `params` file too; the error names the parameter, the value and what
/// is accepted. Without a value, forget the kept setting of `name` (the
/// value now stays).
pub fn set(ost: &mut Ost<FileStore>, name: &str, value: Option<&str>, permanent: bool) -> Result<(), String> {
    let Some(value) = value else {
        if !NAMES.contains(&name) {
            return Err(format!("{name}: not a parameter an OST sets; it takes {}", NAMES.join(", ")));
        }
        return match crate::kept_params::forget(&path(ost.store().dir()), name) {
            Ok(true) => Ok(()),
            Ok(false) => Err(format!("{name}: no setting of it is kept")),
            Err(e) => Err(format!("{name}: {e}")),
        };
    };
    apply(ost, name, value)?;
    if permanent {
        crate::kept_params::save(&path(ost.store().dir()), name, value.trim())
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
    for (name, value) in crate::kept_params::load(&file)? {
        apply(ost, &name, &value)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{}: {e}", file.display())))?;
    }
    Ok(())
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
        let error = set(&mut ost, "sync_lock_cancel", Some("sometimes"), true).unwrap_err();
        assert!(error.contains("sometimes") && error.contains("never, blocking, always"), "{error}");
        set(&mut ost, "sync_lock_cancel", Some("blocking"), false).unwrap();
        assert_eq!(open().config().sync_lock_cancel, SyncLockCancel::Never, "not kept without -P");
        set(&mut ost, "sync_lock_cancel", Some("always"), true).unwrap();
        assert_eq!(open().config().sync_lock_cancel, SyncLockCancel::Always);
        set(&mut ost, "sync_lock_cancel", None, true).unwrap();
        assert_eq!(ost.config().sync_lock_cancel, SyncLockCancel::Always, "forgetting keeps the value now");
        assert_eq!(open().config().sync_lock_cancel, SyncLockCancel::Never, "and the next start has the default");
        assert!(set(&mut ost, "sync_lock_cancel", None, true).unwrap_err().contains("no setting of it is kept"));
        std::fs::write(path(dir.path()), "nonsense=1\n").unwrap();
        let store = FileStore::open(dir.path()).unwrap();
        let mut ost = Ost::new(OstIndex(0), OstConfig::default(), store);
        assert!(load(&mut ost).unwrap_err().to_string().contains("nonsense"));
    }
}
