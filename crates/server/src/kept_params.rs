//! Settings kept across restarts (`lctl set_param -P`): a file of
//! `name=value` lines, one per name, replaced whole on every change
//! (written beside it, synced, renamed over it). An OST keeps its own in
//! its directory ([`crate::ost_params`]); the MDS keeps the clients' in its
//! data directory, as Lustre's MGS keeps `-P` settings for the clients
//! that mount later (see [`crate::mds_server`]).
//!
//! Bounds: a file of at most [`KEPT_BYTES_MAX`] bytes and [`KEPT_MAX`]
//! lines; a name or value holds no newline and no `=` in the name.

use std::path::Path;

/// The largest file read or written.
pub const KEPT_BYTES_MAX: u64 = 64 << 10;
/// Settings one file keeps.
pub const KEPT_MAX: usize = 256;

/// The settings in `file` (none if it does not exist).
pub fn load(file: &Path) -> std::io::Result<Vec<(String, String)>> {
    let invalid = |e: String| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{}: {e}", file.display()));
    let text = match std::fs::metadata(file) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
        Ok(m) if m.len() > KEPT_BYTES_MAX => return Err(invalid(format!("past {KEPT_BYTES_MAX} bytes"))),
        Ok(_) => std::fs::read_to_string(file)?,
    };
    let lines: Vec<(String, String)> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| match l.split_once('=') {
            Some((n, v)) => Ok((n.trim().to_string(), v.trim().to_string())),
            None => Err(invalid(format!("line {l:?} is not name=value"))),
        })
        .collect::<Result<_, _>>()?;
    if lines.len() > KEPT_MAX {
        return Err(invalid(format!("{} settings, past {KEPT_MAX}", lines.len())));
    }
    Ok(lines)
}

/// Keep `name=value` in `file`, in place of the setting of that name.
pub fn save(file: &Path, name: &str, value: &str) -> std::io::Result<()> {
    let refuse = |e: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, e);
    if name.contains(['=', '\n']) || value.contains('\n') || name.trim().is_empty() {
        return Err(refuse(format!("{name:?}={value:?} cannot be kept: a name without '=' and newlines, please")));
    }
    let mut lines = load(file)?;
    lines.retain(|(n, _)| n != name);
    if lines.len() >= KEPT_MAX {
        return Err(refuse(format!("{KEPT_MAX} settings are kept already: the most a file keeps")));
    }
    lines.push((name.to_string(), value.trim().to_string()));
    write(file, &lines)
}

/// Forget the setting of `name` in `file`; whether it was kept.
pub fn forget(file: &Path, name: &str) -> std::io::Result<bool> {
    let mut lines = load(file)?;
    let before = lines.len();
    lines.retain(|(n, _)| n != name);
    if lines.len() == before {
        return Ok(false);
    }
    write(file, &lines)?;
    Ok(true)
}

/// Replace `file` with `lines`: written beside it, synced, renamed over it.
fn write(file: &Path, lines: &[(String, String)]) -> std::io::Result<()> {
    let body: String = lines.iter().map(|(n, v)| format!("{n}={v}\n")).collect();
    if body.len() as u64 > KEPT_BYTES_MAX {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("the settings would pass {KEPT_BYTES_MAX} bytes"),
        ));
    }
    let dir = file.parent().unwrap_or(Path::new("."));
    let new = file.with_extension("new");
    std::fs::write(&new, body)?;
    std::fs::File::open(&new)?.sync_all()?;
    std::fs::rename(&new, file)?;
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_replaced_by_name_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("params");
        assert!(load(&file).unwrap().is_empty());
        save(&file, "osc.*.max_dirty_mb", "64").unwrap();
        save(&file, "llite.*.max_cached_mb", "8").unwrap();
        save(&file, "osc.*.max_dirty_mb", "16").unwrap();
        let kept = load(&file).unwrap();
        assert_eq!(kept, [("llite.*.max_cached_mb".into(), "8".into()), ("osc.*.max_dirty_mb".into(), "16".into())]);
        assert!(save(&file, "a\nb", "1").is_err() && save(&file, "a", "1\nb=2").is_err());
        assert!(forget(&file, "llite.*.max_cached_mb").unwrap());
        assert!(!forget(&file, "llite.*.max_cached_mb").unwrap(), "forgotten already");
        assert_eq!(load(&file).unwrap(), [("osc.*.max_dirty_mb".into(), "16".into())]);
        std::fs::write(&file, "x".repeat(KEPT_BYTES_MAX as usize + 1)).unwrap();
        assert!(load(&file).unwrap_err().to_string().contains("past"));
    }
}
