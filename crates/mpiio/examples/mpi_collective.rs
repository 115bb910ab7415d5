//! Two-phase collective I/O over real MPI, on a local file every rank
//! opens: `mpirun -np N mpi_collective FILE [HINT=VALUE,...] [--die RANK]`.
//!
//! Every rank writes its blocks of an IOR-like segmented pattern with
//! `write_at_all`, syncs, then reads the blocks of the next rank with
//! `read_at_all` and checks them byte for byte; rank 0 prints the Cray
//! stats and timers blocks and `verified`. With `--die RANK`, that rank
//! kills itself in the middle of the second collective call, and the job
//! must end with an error rather than hang.
//!
//! The file is a plain local file, so lock requests do nothing here; the
//! point is the exchange over MPI. `lanefs ior -a MPIIO` runs the same
//! collective layer against lanefs.

use lanefs_core::client::ladvise::Advice;
use lanefs_mpiio::comm::MpiComm;
use lanefs_mpiio::{
    format_read_stats, format_write_stats, format_write_timers, CollectiveFile, Communicator, FileAccess, MpiioHints,
    Striping,
};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;

struct LocalFile(File);

impl FileAccess for LocalFile {
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<(), String> {
        self.0.write_all_at(data, offset).map_err(|e| e.to_string())
    }

    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), String> {
        let mut done = 0;
        while done < buf.len() {
            match self.0.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => {
                    buf[done..].fill(0);
                    break;
                }
                Ok(n) => done += n,
                Err(e) => return Err(e.to_string()),
            }
        }
        Ok(())
    }

    fn lock_ahead(&mut self, _: &[Advice]) -> Result<(), String> {
        Ok(())
    }

    fn no_expand(&mut self) -> Result<(), String> {
        Ok(())
    }

    fn group_lock(&mut self, _: u64) -> Result<(), String> {
        Ok(())
    }

    fn group_unlock(&mut self, _: u64) -> Result<(), String> {
        Ok(())
    }

    fn sync(&mut self) -> Result<(), String> {
        self.0.sync_data().map_err(|e| e.to_string())
    }
}

fn byte(rank: u32, offset: u64) -> u8 {
    (offset.wrapping_mul(131) ^ ((u64::from(rank) + 1) * 29)) as u8
}

const STRIPING: Striping = Striping { stripe_size: 64 << 10, stripe_count: 2 };

fn main() {
    let (_universe, comm) = MpiComm::init().unwrap_or_else(|e| panic!("{e}"));
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = args.first().expect("usage: mpi_collective FILE [HINT=VALUE,...] [--die RANK]").clone();
    let pairs: Vec<(String, String)> = args
        .get(1)
        .filter(|a| !a.starts_with("--"))
        .map(|spec| {
            spec.split(',')
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (k, v) = p.split_once('=').expect("HINT=VALUE");
                    (k.to_string(), v.to_string())
                })
                .collect()
        })
        .unwrap_or_default();
    let die = args.iter().position(|a| a == "--die").map(|i| args[i + 1].parse::<u32>().expect("a rank"));
    let hints = MpiioHints::from_pairs(&pairs).unwrap_or_else(|e| {
        comm.abort(&e.to_string());
        unreachable!()
    });
    let (rank, size) = (comm.rank(), comm.size());
    if rank == 0 {
        File::create(&path).expect("creating the file");
    }
    comm.barrier().expect("barrier");
    let file = OpenOptions::new().read(true).write(true).open(&path).expect("opening the file");
    let mut f = CollectiveFile::open(&comm, LocalFile(file), STRIPING, &hints).expect("collective open");
    let (block, transfer, segments) = (200_000u64, 48_000u64, 2u64);
    let calls = block.div_ceil(transfer);
    let offset = |seg: u64, r: u32, call: u64| (seg * u64::from(size) + u64::from(r)) * block + call * transfer;
    let len = |call: u64| transfer.min(block - call * transfer);
    for seg in 0..segments {
        for call in 0..calls {
            if die == Some(rank) && seg == 0 && call == 1 {
                eprintln!("rank {rank}: dying in the middle of the collective");
                std::process::abort();
            }
            let at = offset(seg, rank, call);
            let data: Vec<u8> = (at..at + len(call)).map(|o| byte(rank, o)).collect();
            f.write_at_all(at, &data).expect("collective write");
        }
    }
    f.sync().expect("sync");
    let other = (rank + 1) % size;
    for seg in 0..segments {
        for call in 0..calls {
            let at = offset(seg, other, call);
            let mut buf = vec![0u8; len(call) as usize];
            f.read_at_all(at, &mut buf).expect("collective read");
            if (at..at + len(call)).zip(&buf).any(|(o, &b)| b != byte(other, o)) {
                comm.abort(&format!("rank {rank} read rank {other}'s bytes at {at} wrong"));
            }
        }
    }
    let aggregators = f.write_aggregators().to_vec();
    let (report, _, _) = f.close().expect("collective close");
    if let Some(report) = report {
        print!("{}", format_write_stats(&path, &report.write_stats));
        print!("{}", format_read_stats(&path, &report.read_stats));
        let elapsed = lanefs_core::units::Duration::from_ns((report.write_elapsed_s * 1e9) as u64);
        let bytes = report.writers.iter().map(|w| w.bytes).sum();
        print!("{}", format_write_timers(&path, &report.writers, bytes, elapsed));
        println!("aggregators {aggregators:?}");
        println!("verified: {size} ranks, {} bytes", u64::from(size) * segments * block);
    }
}
