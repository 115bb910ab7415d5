//! `lanefs demo`: the shared-file demonstration, as a table or as JSON.

use anyhow::{bail, Result};
use lanefs_core::harness::demo::{self, DemoConfig, DemoRun};

pub fn run(json: bool, seed: u64) -> Result<()> {
    let config = DemoConfig { seed, ..DemoConfig::default() };
    let runs = demo::run(config)?;
    if json {
        #[derive(serde::Serialize)]
        struct Report<'a> {
            runs: &'a [DemoRun],
        }
        println!("{}", serde_json::to_string(&Report { runs: &runs })?);
    } else {
        print_table(&config, &runs);
    }
    for r in &runs {
        if r.bytes_verified != r.bytes_written {
            bail!("{}: only {} of {} bytes read back correctly", r.name, r.bytes_verified, r.bytes_written);
        }
    }
    Ok(())
}

fn print_table(c: &DemoConfig, runs: &[DemoRun]) {
    const MIB: u64 = 1 << 20;
    println!(
        "lanefs demo: {} clients, IOR segmented (-b {}m -t {}m -s {}), {} stripes of {} MiB over {} OSTs, seed {}",
        c.tasks,
        c.block_bytes / MIB,
        c.transfer_bytes / MIB,
        c.segments,
        c.stripe_count,
        c.stripe_size / MIB,
        c.osts,
        c.seed
    );
    println!("deterministic harness (virtual time, in-memory OSTs); lock counts are for the write phase\n");
    println!(
        "{:<15} {:>9} {:>10} {:>8} {:>11} {:>14} {:>15}",
        "run", "enqueues", "callbacks", "cancels", "write RPCs", "bytes written", "bytes verified"
    );
    for r in runs {
        println!(
            "{:<15} {:>9} {:>10} {:>8} {:>11} {:>14} {:>15}",
            r.name,
            r.lock_enqueues,
            r.blocking_callbacks,
            r.lock_cancels,
            r.write_rpcs,
            r.bytes_written,
            r.bytes_verified
        );
    }
    println!();
    println!("ssf-default:   Lustre's expanding locks; writers of one file revoke each other's locks (false sharing)");
    println!("ssf-lockahead: each client locks ahead exactly its own transfers (ladvise lockahead, no expansion)");
    println!("fpp:           one file per client; no object has two writers");
}
