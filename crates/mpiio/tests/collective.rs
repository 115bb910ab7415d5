//! Two-phase collective I/O run by ranks as threads over one in-memory
//! file: every byte lands where its rank put it, in every lock mode and
//! with several aggregator counts; uneven, empty and gappy contributions;
//! a failing rank ends the collective for all, never a hang.

use lanefs_core::client::ladvise::Advice;
use lanefs_mpiio::collective::{AGGREGATORS_GROUP_ID, CLEARING_GROUP_ID};
use lanefs_mpiio::{
    CollectiveError, CollectiveFile, CommError, Communicator, FileAccess, MpiioHints, Striping, ThreadComm,
};
use std::sync::{Arc, Mutex};

/// What the ranks did to the file, besides its bytes.
#[derive(Debug, Default)]
struct Log {
    /// `(rank, advices)` of each lockahead call.
    lockahead: Vec<(u32, Vec<Advice>)>,
    /// `(rank, gid, taken)` of each group lock and unlock.
    group: Vec<(u32, u64, bool)>,
    no_expand: Vec<u32>,
    /// `(rank, offset, len)` of each write.
    writes: Vec<(u32, u64, u64)>,
}

#[derive(Clone)]
struct MemFile {
    rank: u32,
    bytes: Arc<Mutex<Vec<u8>>>,
    log: Arc<Mutex<Log>>,
    /// Writes by this rank fail with this reason.
    fail_writes: Option<&'static str>,
}

impl FileAccess for MemFile {
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<(), String> {
        if let Some(reason) = self.fail_writes {
            return Err(reason.to_string());
        }
        let mut bytes = self.bytes.lock().unwrap();
        let end = offset as usize + data.len();
        if bytes.len() < end {
            bytes.resize(end, 0);
        }
        bytes[offset as usize..end].copy_from_slice(data);
        self.log.lock().unwrap().writes.push((self.rank, offset, data.len() as u64));
        Ok(())
    }

    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), String> {
        let bytes = self.bytes.lock().unwrap();
        for (i, b) in buf.iter_mut().enumerate() {
            *b = bytes.get(offset as usize + i).copied().unwrap_or(0);
        }
        Ok(())
    }

    fn lock_ahead(&mut self, advices: &[Advice]) -> Result<(), String> {
        self.log.lock().unwrap().lockahead.push((self.rank, advices.to_vec()));
        Ok(())
    }

    fn no_expand(&mut self) -> Result<(), String> {
        self.log.lock().unwrap().no_expand.push(self.rank);
        Ok(())
    }

    fn group_lock(&mut self, gid: u64) -> Result<(), String> {
        self.log.lock().unwrap().group.push((self.rank, gid, true));
        Ok(())
    }

    fn group_unlock(&mut self, gid: u64) -> Result<(), String> {
        self.log.lock().unwrap().group.push((self.rank, gid, false));
        Ok(())
    }

    fn sync(&mut self) -> Result<(), String> {
        Ok(())
    }
}

const STRIPE: u64 = 64 << 10;
const STRIPING: Striping = Striping { stripe_size: STRIPE, stripe_count: 3 };

/// Runs `body` on `ranks` threads (`per_node` to a node), each with its
/// handle on one shared file; returns their results, the file and the log.
fn run<T: Send>(
    ranks: u32,
    per_node: u32,
    failing: Option<u32>,
    body: impl Fn(&ThreadComm, MemFile) -> T + Sync,
) -> (Vec<T>, Vec<u8>, Log) {
    let bytes = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::new(Mutex::new(Log::default()));
    let comms = ThreadComm::world(ranks, per_node);
    let results = std::thread::scope(|s| {
        let handles: Vec<_> = comms
            .iter()
            .map(|comm| {
                let file = MemFile {
                    rank: comm.rank(),
                    bytes: bytes.clone(),
                    log: log.clone(),
                    fail_writes: (failing == Some(comm.rank())).then_some("EIO: the disk failed"),
                };
                let body = &body;
                s.spawn(move || body(comm, file))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a rank panicked")).collect()
    });
    let bytes = std::mem::take(&mut *bytes.lock().unwrap());
    let log = std::mem::take(&mut *log.lock().unwrap());
    (results, bytes, log)
}

/// The byte rank `rank` writes at `offset`.
fn byte(rank: u32, offset: u64) -> u8 {
    (offset.wrapping_mul(31) ^ (u64::from(rank) * 7 + 1)) as u8
}

fn hints(pairs: &[(&str, &str)]) -> MpiioHints {
    MpiioHints::from_pairs(pairs).unwrap()
}

/// IOR's segmented pattern with `-c`: each call, every rank writes one
/// transfer of its block; then every rank reads the block of the next rank
/// collectively and checks it byte for byte.
fn ior_pattern(h: &MpiioHints, ranks: u32, per_node: u32) -> Log {
    let (block, transfer, segments) = (3 * STRIPE + 4096, STRIPE / 2 + 100, 2u64);
    let calls = block.div_ceil(transfer);
    let offset = |seg: u64, rank: u32, call: u64| (seg * u64::from(ranks) + u64::from(rank)) * block + call * transfer;
    let len = |call: u64| transfer.min(block - call * transfer);
    let (results, bytes, log) = run(ranks, per_node, None, |comm, file| {
        let mut f = CollectiveFile::open(comm, file, STRIPING, h).unwrap();
        for seg in 0..segments {
            for call in 0..calls {
                let at = offset(seg, comm.rank(), call);
                let data: Vec<u8> = (at..at + len(call)).map(|o| byte(comm.rank(), o)).collect();
                f.write_at_all(at, &data).unwrap();
            }
        }
        let other = (comm.rank() + 1) % ranks;
        for seg in 0..segments {
            for call in 0..calls {
                let at = offset(seg, other, call);
                let mut buf = vec![0u8; len(call) as usize];
                f.read_at_all(at, &mut buf).unwrap();
                let expected: Vec<u8> = (at..at + len(call)).map(|o| byte(other, o)).collect();
                assert!(buf == expected, "rank {} read rank {other}'s bytes at {at} wrong", comm.rank());
            }
        }
        let aggregators = f.write_aggregators().to_vec();
        let (report, _, _) = f.close().unwrap();
        (aggregators, report)
    });
    for rank in 0..ranks {
        for seg in 0..segments {
            let start = offset(seg, rank, 0);
            let ok = (start..start + block).all(|o| bytes[o as usize] == byte(rank, o));
            assert!(ok, "rank {rank}'s block of segment {seg} is wrong in the file");
        }
    }
    let (aggregators, report) = &results[0];
    assert!(results.iter().all(|(a, _)| a == aggregators), "every rank sees the same aggregators");
    assert!(results[1..].iter().all(|(_, r)| r.is_none()), "the job's report is rank 0's");
    let report = report.as_ref().expect("rank 0's report");
    // Only aggregators write, and only whole stripes they own.
    let avail = aggregators.len() as u64;
    for &(rank, offset, len) in &log.writes {
        let index = aggregators.iter().position(|&a| a == rank).expect("only aggregators write") as u64;
        assert_eq!((offset / STRIPE) % avail, index, "rank {rank} wrote a stripe it does not own");
        assert_eq!(offset / STRIPE, (offset + len - 1) / STRIPE, "a write within one stripe");
    }
    assert_eq!(report.write_stats.collective_ops, u64::from(ranks) * segments * calls);
    assert_eq!(report.write_stats.independent_ops, 0);
    let written: u64 = report.writers.iter().map(|w| w.bytes).sum();
    assert_eq!(written, log.writes.iter().map(|w| w.2).sum::<u64>());
    log
}

#[test]
fn every_lock_mode_and_aggregator_count_puts_every_byte_in_place() {
    for (name, h, per_node) in [
        ("default, ROMIO's one per node", hints(&[]), 2),
        ("default, cb_nodes=2", hints(&[("cb_nodes", "2")]), 1),
        ("group, multiplier 2", hints(&[("cray_cb_write_lock_mode", "1"), ("cray_cb_nodes_multiplier", "2")]), 2),
        ("lockahead", hints(&[("cray_cb_write_lock_mode", "2")]), 2),
        (
            "lockahead, 2 extents",
            hints(&[("cray_cb_write_lock_mode", "2"), ("romio_lustre_cb_lock_ahead_num_extents", "2")]),
            3,
        ),
        (
            "romio lockahead, reads too",
            hints(&[("romio_lustre_cb_lock_ahead_write", "1"), ("romio_lustre_cb_lock_ahead_read", "1")]),
            1,
        ),
    ] {
        eprintln!("{name}");
        ior_pattern(&h, 6, per_node);
    }
}

#[test]
fn lockahead_clears_the_file_once_and_locks_exactly_the_aggregators_stripes() {
    let h = hints(&[("cray_cb_write_lock_mode", "2"), ("romio_lustre_cb_lock_ahead_num_extents", "4")]);
    let log = ior_pattern(&h, 6, 2);
    assert_eq!(log.group, vec![(0, CLEARING_GROUP_ID, true), (0, CLEARING_GROUP_ID, false)]);
    let mut no_expand = log.no_expand.clone();
    no_expand.sort();
    assert_eq!(no_expand, (0..6).collect::<Vec<_>>(), "every rank sets lock-no-expand");
    let written: std::collections::BTreeSet<(u32, u64)> =
        log.writes.iter().map(|&(rank, offset, _)| (rank, offset / STRIPE)).collect();
    let locked: std::collections::BTreeSet<(u32, u64)> = log
        .lockahead
        .iter()
        .flat_map(|(rank, advices)| advices.iter().map(move |a| (*rank, a.start / STRIPE)))
        .collect();
    for (rank, stripe) in &written {
        assert!(locked.contains(&(*rank, *stripe)), "rank {rank} wrote stripe {stripe} without locking it ahead");
    }
    for (rank, advices) in &log.lockahead {
        assert!(advices.len() <= 4, "at most num_extents per request");
        assert!(advices.iter().all(|a| a.end - a.start + 1 == STRIPE), "one stripe per extent");
        let stripes: Vec<u64> = advices.iter().map(|a| a.start / STRIPE).collect();
        assert!(written.iter().any(|(r, _)| r == rank), "rank {rank} locks but never writes");
        assert!(stripes.windows(2).all(|w| w[1] > w[0]), "ascending extents");
    }
}

#[test]
fn group_mode_aggregators_hold_one_group_lock_until_close() {
    let h = hints(&[("cray_cb_write_lock_mode", "1")]);
    let log = ior_pattern(&h, 4, 1);
    let writers: std::collections::BTreeSet<u32> = log.writes.iter().map(|w| w.0).collect();
    for rank in writers {
        let mine: Vec<_> = log.group.iter().filter(|g| g.0 == rank).collect();
        assert_eq!(mine, vec![&(rank, AGGREGATORS_GROUP_ID, true), &(rank, AGGREGATORS_GROUP_ID, false)]);
    }
}

/// Some ranks send nothing; others send odd lengths that leave a gap
/// between two ranks' pieces inside one stripe: the aggregator reads the
/// stripe first (read-modify-write), so the gap keeps the file's bytes.
#[test]
fn uneven_empty_and_gappy_contributions_keep_the_bytes_between() {
    let ranks = 5;
    // Rank r's piece of the second call: ranks 1 and 3 send nothing; 0 and
    // 2 share stripe 4 with a gap between them; 4 writes across stripes 6-7.
    let piece = |r: u32| match r {
        0 => (4 * STRIPE + 1000, 1000),
        2 => (4 * STRIPE + 5000, 1234),
        4 => (7 * STRIPE - 77, 300),
        _ => (0, 0),
    };
    let (results, bytes, log) = run(ranks, 1, None, |comm, file| {
        let mut f = CollectiveFile::open(comm, file, STRIPING, &hints(&[])).unwrap();
        // First every rank fills its own 2-stripe region with 0xEE.
        let region = 2 * STRIPE;
        f.write_at_all(u64::from(comm.rank()) * region, &vec![0xEE; region as usize]).unwrap();
        let (at, len) = piece(comm.rank());
        let data: Vec<u8> = (at..at + len).map(|o| byte(comm.rank(), o)).collect();
        f.write_at_all(at, &data).unwrap();
        f.close().unwrap().0
    });
    for o in 0..10 * STRIPE {
        let owner = (0..ranks).find(|&r| {
            let (at, len) = piece(r);
            (at..at + len).contains(&o)
        });
        let expected = owner.map_or(0xEE, |r| byte(r, o));
        assert_eq!(bytes[o as usize], expected, "byte {o}");
    }
    assert_eq!(results[0].as_ref().expect("rank 0's report").write_stats.rmw_count, 1, "stripe 4 had a hole");
    assert!(log.writes.iter().any(|&(_, offset, len)| offset == 4 * STRIPE + 1000 && len == 4000 + 1234));
}

/// A rank whose system write fails gets its error, naming it; every other
/// rank's next collective step fails naming that rank, and none hangs.
#[test]
fn a_failing_aggregator_ends_the_collective_for_every_rank() {
    let (results, _, _) = run(4, 1, Some(0), |comm, file| {
        let mut f = CollectiveFile::open(comm, file, STRIPING, &hints(&[])).unwrap();
        let mut outcome = Ok(());
        for call in 0..4u64 {
            let at = (call * 4 + u64::from(comm.rank())) * STRIPE;
            outcome = f.write_at_all(at, &vec![1; STRIPE as usize]);
            if outcome.is_err() {
                break;
            }
        }
        outcome
    });
    match &results[0] {
        Err(CollectiveError::Io { rank: 0, operation: "write", reason }) => assert!(reason.contains("EIO")),
        other => panic!("rank 0: {other:?}"),
    }
    for r in &results[1..] {
        match r {
            Err(CollectiveError::Comm(CommError::Aborted { rank: 0, reason })) => {
                assert!(reason.contains("EIO"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn romio_cb_write_disable_writes_each_rank_on_its_own() {
    let h = hints(&[("romio_cb_write", "disable")]);
    let (results, bytes, log) = run(3, 1, None, |comm, file| {
        let mut f = CollectiveFile::open(comm, file, STRIPING, &h).unwrap();
        let at = u64::from(comm.rank()) * 1000;
        f.write_at_all(at, &[comm.rank() as u8 + 1; 1000]).unwrap();
        f.close().unwrap().0
    });
    assert_eq!(log.writes.len(), 3, "one write per rank");
    assert!((0..3000).all(|o| bytes[o] == (o / 1000) as u8 + 1));
    let report = results[0].as_ref().expect("rank 0's report");
    assert_eq!(report.write_stats.independent_ops, 3);
    assert_eq!(report.write_stats.collective_ops, 0);
}
