//! `lanefs demo`: placeholder, being written.
use anyhow::Result;

pub fn run(_json: bool, _seed: u64) -> Result<()> {
    anyhow::bail!("demo is not built yet")
}
