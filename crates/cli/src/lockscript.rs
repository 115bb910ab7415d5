//! `lanefs lock-script`: placeholder, being written.
use anyhow::Result;
use std::path::Path;

pub fn run_path(_path: &Path) -> Result<()> {
    anyhow::bail!("lock-script is not built yet")
}
