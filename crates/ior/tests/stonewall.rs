//! Stonewalling as IOR 4 does it (`-D`, `-O stoneWallingWearOut=1`,
//! `-O stoneWallingWearOutIterations=N`, `-O stoneWallingStatusFile=F`): ranks
//! stop at the deadline, even out their counts with wear-out, and a later read
//! stops where the write did.

mod common;

use common::{run_line, MemBackend};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Rank 0 makes a write every 10 ms and rank 1 one every 50 ms, each for
/// longer than the one-second deadline; past it they write at once.
fn uneven() -> MemBackend {
    MemBackend {
        slow_writes: vec![(150, Duration::from_millis(10)), (40, Duration::from_millis(50))],
        ..MemBackend::default()
    }
}

fn stonewall_counts(out: &str) -> (u64, u64) {
    let line =
        out.lines().find(|l| l.starts_with("stonewalling pairs accessed min: ")).unwrap_or_else(|| panic!("{out}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    // stonewalling pairs accessed min: A max: B -- min data: ...
    (words[4].parse().unwrap(), words[6].parse().unwrap())
}

#[test]
fn wear_out_evens_the_ranks_and_the_read_stops_where_the_write_did() {
    let backend = uneven();
    let dir = tempfile::tempdir().unwrap();
    let status = dir.path().join("stonewall");
    let line = format!(
        "-a MEM -N 2 -w -W -r -R -G 7 -k -b 2m -t 4k -D 1 -O stoneWallingWearOut=1 -O stoneWallingStatusFile={}",
        status.display()
    );
    let (summary, out) = run_line(&line, &backend);
    let (min, max) = stonewall_counts(&out);
    // Rank 1 had made about 20 writes at the deadline, rank 0 about 100, of 512.
    assert!(min < max && max < 512, "{out}");
    let write = summary.iterations[0].write.unwrap();
    assert_eq!(write.agg_bytes, 2 * max * 4096, "both ranks make the most's count");
    assert!(write.stonewall.is_some());
    assert!(summary.passed(), "the check stops where the write did: {out}");
    // The read stops where the write did, on both ranks.
    assert_eq!(summary.iterations[0].read.unwrap().agg_bytes, 2 * max * 4096);
    assert!(out.contains("WARNING: Expected aggregate file size       = 4194304\n"), "{out}");
    assert!(out.contains("WARNING: Maybe caused by deadlineForStonewalling\n"), "{out}");
    // IOR's ShowSetup prints both keys left-aligned in 20 columns.
    assert!(out.contains("stonewallingTime    : 1\n") && out.contains("stoneWallingWearOut : 1\n"), "{out}");
    // The summary's Stonewall(s) and Stonewall(MiB) columns have figures.
    let row = out.lines().find(|l| l.starts_with("write ") && l.contains("MEM")).unwrap();
    let stonewall_s: f64 = row.split_whitespace().nth(10).unwrap().parse().unwrap_or_else(|_| panic!("{row}"));
    assert!((0.9..5.0).contains(&stonewall_s), "{row}");
    assert_eq!(std::fs::read_to_string(&status).unwrap(), max.to_string());

    // A later run reads back what the stonewalled write stored.
    let before = backend.bytes_read.load(Ordering::SeqCst);
    let line = format!("-a MEM -N 2 -r -R -G 7 -k -b 2m -t 4k -O stoneWallingStatusFile={}", status.display());
    let (summary, out) = run_line(&line, &backend);
    assert!(summary.passed(), "{out}");
    assert_eq!(backend.bytes_read.load(Ordering::SeqCst) - before, 2 * max * 4096);
}

#[test]
fn without_a_status_file_the_count_is_printed() {
    let (_, out) = run_line("-a MEM -N 2 -w -b 2m -t 4k -D 1 -O stoneWallingWearOut=1", &uneven());
    let (_, max) = stonewall_counts(&out);
    assert!(out.contains(&format!("Pairs deadlineForStonewallingaccessed: {max}\n")), "{out}");
}

#[test]
fn a_missing_status_file_warns_and_reads_everything() {
    let backend = MemBackend::default();
    run_line("-a MEM -N 2 -w -k -b 64k -t 4k", &backend);
    let (summary, out) = run_line("-a MEM -N 2 -r -k -b 64k -t 4k -O stoneWallingStatusFile=/nonexistent/sw", &backend);
    assert!(out.contains("WARNING: Could not read back the stonewalling status from the file!\n"), "{out}");
    assert_eq!(summary.iterations[0].read.unwrap().agg_bytes, 2 * 64 * 1024);
}

#[test]
fn a_transfer_count_stops_every_rank_and_stat_shows_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    let line = format!("-a POSIX -N 2 -w -k -b 64k -t 4k -O stoneWallingWearOutIterations=3 -o {}", file.display());
    let (summary, out) = run_line(&line, &lanefs_ior::PosixBackend);
    assert_eq!(summary.iterations[0].write.unwrap().agg_bytes, 2 * 3 * 4096);
    // Rank 1's three transfers end at 64 KiB + 12 KiB.
    assert!(out.contains("WARNING: Stat() of aggregate file size      = 77824\n"), "{out}");
    assert!(out.contains("WARNING: Using actual aggregate bytes moved = 24576\n"), "{out}");
    assert!(!out.contains("deadlineForStonewalling"), "{out}");
}
