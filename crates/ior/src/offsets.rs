//! IOR's file offsets, file names and task shifts, as pure functions.
//!
//! What: where task `rank` reads and writes (ior.c `WriteOrRead` with randomOffset=0),
//! which file it uses (`GetTestFileName`), and how `-C` shifts the reading task
//! (`TestIoSys`). Everything here is arithmetic on [`IorParams`], so the tests compare it
//! with IOR's formulas on small cases.
//!
//! The formulas (segment `i` outer, transfer `j` inner,
//! `pretendRank = (rank + rankOffset) % numTasks`):
//! - shared file: `j*transferSize + i*numTasks*blockSize + pretendRank*blockSize`;
//! - file per process: `j*transferSize + i*blockSize` in `testFile.%08d` of `pretendRank`.
//!
//! `-C` (reorderTasks): the read phase uses `rankOffset = (taskPerNodeOffset*shift) %
//! numTasks`, the write check `((taskPerNodeOffset+1)*shift) % numTasks`, where `shift`
//! is 1 for a round-robin task-to-node mapping and the number of tasks on node 0 for a
//! block mapping (`QueryNodeMapping`). lanefs-ior's tasks are threads of one process (or
//! modelled), so nothing tells it where they run: `--tasks-per-node N` says so, with a
//! block mapping ([`NodeMapping::from_params`]), making `shift = N` and the read-back
//! come from `-Q` nodes further on. Without it every task is on one node, as IOR sees
//! the threads of one process: `shift = numTasks`, the offset is 0 and `-C` changes
//! nothing — exactly what IOR does on a single node.
//!
//! `-z` (randomOffset): IOR's `GetOffsetArrayRandom`, made with glibc's
//! `random()` ([`GlibcRandom`]) so that a seed gives IOR's own order. With
//! `-F` each task shuffles the transfers of its block (seed + pretendRank);
//! on a shared file every task draws the same sequence, which deals each
//! transfer slot of a segment's `numTasks` blocks to one task (`rand() %
//! numTasks`), then shuffles its slots. Each segment repeats the order.
//!
//! Not here: random task reordering (`-Z`) and `-zz`, which are refused.

use crate::params::IorParams;

/// How IOR sees tasks placed on nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeMapping {
    /// Tasks on the node of task 0 (`numTasksOnNode0`).
    pub tasks_on_node0: u32,
    /// Consecutive ranks share a node (block/by-slot mapping) rather than round-robin.
    pub block_mapping: bool,
}

impl NodeMapping {
    /// All tasks on one node: IOR's `QueryNodeMapping` reports a block mapping.
    pub fn single_node(num_tasks: u32) -> Self {
        NodeMapping { tasks_on_node0: num_tasks, block_mapping: true }
    }

    /// The placement `p` declares: blocks of `--tasks-per-node` ranks (all on one node
    /// without it), as `mpirun`'s default by-slot placement gives.
    pub fn from_params(p: &IorParams) -> Self {
        NodeMapping { tasks_on_node0: p.tasks_on_node0(), block_mapping: true }
    }

    /// IOR's `shift`: how many ranks apart "the next node" is.
    pub fn shift(&self) -> u32 {
        if self.block_mapping {
            self.tasks_on_node0
        } else {
            1
        }
    }
}

/// `rankOffset` of the read phase: `(taskPerNodeOffset*shift) % numTasks` with `-C`, else 0.
pub fn read_rank_offset(p: &IorParams, mapping: NodeMapping) -> u32 {
    if !p.reorder_tasks {
        return 0;
    }
    shifted(p.task_per_node_offset, mapping.shift(), p.num_tasks)
}

/// Whose data task `rank` reads in repetition `rep`: `-C`'s constant shift,
/// or `-Z`'s random one (IOR's `TestIoSys`): with one `-Z` each task seeds
/// glibc's `rand()` with `rank + seed` and draws `rand() % numTasks` until it
/// is at least `min(taskPerNodeOffset, nodes - 1) * tasksOnNode0` (so tasks
/// may share a source); with `-Z -Z` every task shuffles the tasks the same
/// way (Fisher-Yates from `srand(seed)`) and reads its slot's. The seed is
/// `-X`, or when negative its magnitude plus the repetition.
pub fn read_pretend_rank(p: &IorParams, mapping: NodeMapping, rank: u32, rep: u32) -> u32 {
    let n = p.num_tasks;
    if p.reorder_tasks_random == 0 {
        return pretend_rank(rank, read_rank_offset(p, mapping), n);
    }
    let seed = if p.reorder_tasks_random_seed < 0 {
        (p.reorder_tasks_random_seed.unsigned_abs() as u32).wrapping_add(rep)
    } else {
        p.reorder_tasks_random_seed as u32
    };
    if p.reorder_tasks_random == 1 {
        let nodes = p.nodes().max(1);
        let node_offset = p.task_per_node_offset.min(nodes - 1);
        let floor = u64::from(node_offset) * u64::from(p.tasks_on_node0());
        let mut rng = GlibcRandom::new(rank.wrapping_add(seed));
        let offset = loop {
            let drawn = u64::from(rng.next()) % u64::from(n);
            if drawn >= floor {
                break drawn as u32;
            }
        };
        return pretend_rank(rank, offset, n);
    }
    let mut rng = GlibcRandom::new(seed);
    let mut order: Vec<u32> = (0..n).collect();
    for i in 0..n as usize {
        let target = i + (rng.next() as usize) % (n as usize - i);
        order.swap(i, target);
    }
    order[rank as usize]
}

/// `rankOffset` of the write check: `((taskPerNodeOffset+1)*shift) % numTasks` with `-C`.
pub fn write_check_rank_offset(p: &IorParams, mapping: NodeMapping) -> u32 {
    if !p.reorder_tasks {
        return 0;
    }
    shifted(p.task_per_node_offset.saturating_add(1), mapping.shift(), p.num_tasks)
}

fn shifted(task_per_node_offset: u32, shift: u32, num_tasks: u32) -> u32 {
    ((u64::from(task_per_node_offset) * u64::from(shift)) % u64::from(num_tasks)) as u32
}

/// `(rank + rankOffset) % numTasks`: whose data a task accesses.
pub fn pretend_rank(rank: u32, rank_offset: u32, num_tasks: u32) -> u32 {
    assert!(rank < num_tasks, "rank {rank} out of {num_tasks} tasks");
    ((u64::from(rank) + u64::from(rank_offset)) % u64::from(num_tasks)) as u32
}

/// Offset of transfer `transfer` of segment `segment` for `pretend_rank`.
pub fn transfer_offset(p: &IorParams, pretend_rank: u32, segment: u64, transfer: u64) -> u64 {
    debug_assert!(segment < p.segment_count && transfer < p.transfers_per_block());
    let within_block = transfer * p.transfer_size_bytes;
    if p.file_per_proc {
        within_block + segment * p.block_size_bytes
    } else {
        within_block
            + segment * u64::from(p.num_tasks) * p.block_size_bytes
            + u64::from(pretend_rank) * p.block_size_bytes
    }
}

/// Every offset `pretend_rank` accesses, in IOR's order (segments outer, transfers inner).
pub fn offsets(p: &IorParams, pretend_rank: u32) -> Box<dyn Iterator<Item = u64> + '_> {
    if p.random_offset > 0 {
        let within = random_offsets(p, pretend_rank);
        let segment_bytes =
            if p.file_per_proc { p.block_size_bytes } else { u64::from(p.num_tasks) * p.block_size_bytes };
        return Box::new(
            (0..p.segment_count)
                .flat_map(move |segment| within.clone().into_iter().map(move |o| o + segment * segment_bytes)),
        );
    }
    let transfers = p.transfers_per_block();
    Box::new(
        (0..p.segment_count)
            .flat_map(move |segment| (0..transfers).map(move |j| transfer_offset(p, pretend_rank, segment, j))),
    )
}

/// IOR's `GetOffsetArrayRandom`: the offsets within one segment that
/// `pretend_rank` accesses with `-z`, in its shuffled order
/// (`p.random_seed` is resolved: not -1).
pub fn random_offsets(p: &IorParams, pretend_rank: u32) -> Vec<u64> {
    let transfer = p.transfer_size_bytes;
    let (mut slots, mut rng) = if p.file_per_proc {
        let seed = p.random_seed.wrapping_add(i64::from(pretend_rank)) as u32;
        ((0..p.transfers_per_block()).map(|i| i * transfer).collect::<Vec<u64>>(), GlibcRandom::new(seed))
    } else {
        // Every task draws the same sequence: each slot goes to one task.
        let mut rng = GlibcRandom::new(p.random_seed as u32);
        let tasks = u64::from(p.num_tasks);
        let span = p.block_size_bytes * tasks;
        let slots = (0..span / transfer)
            .map(|i| i * transfer)
            .filter(|_| u64::from(rng.next()) % tasks == u64::from(pretend_rank))
            .collect();
        (slots, rng)
    };
    // IOR counts the slots in a first pass, then seeds again and takes them
    // in a second; the shuffle goes on from where the second pass ended.
    let count = slots.len() as u64;
    for i in 0..slots.len() {
        let value = (u64::from(rng.next()) % count) as usize;
        slots.swap(i, value);
    }
    slots
}

/// glibc's `random()` after `srandom(seed)` (the TYPE_3 additive feedback
/// generator, which `rand()` is too), so that IOR's shuffles come out the
/// same for the same seed.
pub struct GlibcRandom {
    state: [u32; 34],
    /// Index of the next output in the rolling window.
    at: usize,
}

impl GlibcRandom {
    pub fn new(seed: u32) -> Self {
        let mut state = [0u32; 34];
        let mut word = i64::from(if seed == 0 { 1 } else { seed as i32 });
        state[0] = word as u32;
        for slot in state.iter_mut().take(31).skip(1) {
            // glibc: 16807 * word % 2147483647, by Schrage's method.
            let (hi, lo) = (word / 127_773, word % 127_773);
            word = 16_807 * lo - 2_836 * hi;
            if word < 0 {
                word += 2_147_483_647;
            }
            *slot = word as u32;
        }
        for i in 31..34 {
            state[i] = state[i - 31];
        }
        let mut rng = GlibcRandom { state, at: 0 };
        // glibc discards the first 310 outputs.
        for _ in 0..310 {
            rng.step();
        }
        rng
    }

    /// The next value of the recurrence r[k] = r[k-31] + r[k-3] (wrapping),
    /// kept in a window of the last 34 values.
    fn step(&mut self) -> u32 {
        let n = self.state.len();
        let i = self.at;
        // Slot i holds r[k] for k = i mod 34: r[k-31] is slot i+3, r[k-3] slot i+31.
        let value = self.state[(i + 3) % n].wrapping_add(self.state[(i + 31) % n]);
        self.state[i] = value;
        self.at = (i + 1) % n;
        value
    }

    /// `random()`: a value in `0..2^31`.
    pub fn next(&mut self) -> u32 {
        self.step() >> 1
    }
}

/// The file `pretend_rank` accesses: `testFile`, or `testFile.%08d` with `-F`
/// (`dir/<rank>/file.%08d` with `-F -u`).
pub fn test_file_name(p: &IorParams, pretend_rank: u32) -> String {
    if !p.file_per_proc {
        return p.test_file.clone();
    }
    let root = match unique_dir(p, pretend_rank) {
        Some(dir) => format!("{dir}/{}", file_part(&p.test_file)),
        None => p.test_file.clone(),
    };
    format!("{root}.{pretend_rank:08}")
}

/// With `-F -u`, the per-task directory `dir/<rank>` that holds the task's file.
///
/// IOR builds it by inserting the rank before the last path component; for a name
/// without a `/` IOR mangles the name, so lanefs-ior uses `<rank>/name` instead.
pub fn unique_dir(p: &IorParams, pretend_rank: u32) -> Option<String> {
    if !(p.file_per_proc && p.unique_dir) {
        return None;
    }
    Some(match p.test_file.rfind('/') {
        Some(slash) => format!("{}/{pretend_rank}", &p.test_file[..slash]),
        None => pretend_rank.to_string(),
    })
}

fn file_part(path: &str) -> &str {
    path.rfind('/').map_or(path, |slash| &path[slash + 1..])
}

/// The directory IOR runs statfs on: the test file's directory, or `.`.
pub fn directory_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) => "/",
        Some(slash) => &path[..slash],
        None => ".",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glibc_random_gives_glibcs_sequence() {
        // rand() after srand(1), as every C programmer has seen it.
        let mut rng = GlibcRandom::new(1);
        let first: Vec<u32> = (0..6).map(|_| rng.next()).collect();
        assert_eq!(first, [1804289383, 846930886, 1681692777, 1714636915, 1957747793, 424238335]);
        // srand(0) is srand(1), as in glibc.
        assert_eq!(GlibcRandom::new(0).next(), 1804289383);
    }

    #[test]
    fn random_task_reordering_draws_as_ior_does() {
        let mut p = params(64, 8, 1, 8, true);
        p.reorder_tasks_random = 2;
        p.reorder_tasks_random_seed = 9;
        let mapping = NodeMapping::from_params(&p);
        // -Z -Z: one shuffle of the tasks, the same on every task.
        let mut sources: Vec<u32> = (0..8).map(|rank| read_pretend_rank(&p, mapping, rank, 0)).collect();
        let shuffled = sources.clone();
        sources.sort_unstable();
        assert_eq!(sources, (0..8).collect::<Vec<_>>());
        assert_ne!(shuffled, (0..8).collect::<Vec<_>>());
        // IOR's first swap: srand(9), slot 0 takes slot rand() % 8.
        let first = GlibcRandom::new(9).next() % 8;
        assert_eq!(read_pretend_rank(&p, mapping, 0, 0), first);
        // -Z: each task its own draw, (rank + draw) % tasks.
        p.reorder_tasks_random = 1;
        let draw = GlibcRandom::new(3 + 9).next() % 8;
        assert_eq!(read_pretend_rank(&p, mapping, 3, 0), (3 + draw) % 8);
        // A negative seed changes with the repetition; a positive one does not.
        p.reorder_tasks_random_seed = -5;
        let reps: Vec<u32> = (0..6).map(|rep| read_pretend_rank(&p, mapping, 1, rep)).collect();
        assert!(reps.windows(2).any(|w| w[0] != w[1]), "{reps:?}");
    }

    #[test]
    fn random_offsets_shuffle_each_block_or_deal_a_shared_segment() {
        // -F: each task's offsets are its block's transfers, shuffled, and
        // the same in every segment.
        let mut p = params(64, 8, 2, 3, true);
        p.random_offset = 1;
        p.random_seed = 42;
        for rank in 0..3 {
            let all: Vec<u64> = offsets(&p, rank).collect();
            let mut first: Vec<u64> = all[..8].to_vec();
            assert_eq!(all[8..].iter().map(|o| o - 64).collect::<Vec<_>>(), first, "segment 1 repeats segment 0");
            first.sort_unstable();
            assert_eq!(first, (0..8).map(|i| i * 8).collect::<Vec<_>>());
        }
        assert_ne!(random_offsets(&p, 0), random_offsets(&p, 1), "seed + pretendRank per task");
        // Shared file: the tasks' slots of a segment part its 3 blocks exactly.
        p.file_per_proc = false;
        let mut dealt: Vec<u64> = (0..3).flat_map(|rank| random_offsets(&p, rank)).collect();
        dealt.sort_unstable();
        assert_eq!(dealt, (0..24).map(|i| i * 8).collect::<Vec<_>>());
        let second: Vec<u64> = offsets(&p, 1).skip(random_offsets(&p, 1).len()).collect();
        assert!(second.iter().all(|&o| (192..384).contains(&o)), "segment 1 is 3 blocks further: {second:?}");
    }

    fn params(block: u64, transfer: u64, segments: u64, tasks: u32, fpp: bool) -> IorParams {
        IorParams {
            block_size_bytes: block,
            transfer_size_bytes: transfer,
            segment_count: segments,
            num_tasks: tasks,
            file_per_proc: fpp,
            ..IorParams::default()
        }
    }

    #[test]
    fn shared_file_offsets_follow_iors_formula() {
        // -b 4 -t 2 -s 2 -N 3 (units of 8 bytes, scaled): segment-major, rank blocks interleaved.
        let p = params(32, 16, 2, 3, false);
        let rank1: Vec<u64> = offsets(&p, 1).collect();
        // j*t + i*N*b + r*b for i in 0..2, j in 0..2
        assert_eq!(rank1, vec![32, 48, 32 + 96, 48 + 96]);
        for rank in 0..3 {
            for (k, off) in offsets(&p, rank).enumerate() {
                let (i, j) = (k as u64 / 2, k as u64 % 2);
                assert_eq!(off, j * 16 + i * 3 * 32 + u64::from(rank) * 32);
            }
        }
        // Together the tasks tile the file exactly once.
        let mut all: Vec<u64> = (0..3).flat_map(|r| offsets(&p, r).collect::<Vec<_>>()).collect();
        all.sort_unstable();
        assert_eq!(all, (0..12).map(|k| k * 16).collect::<Vec<_>>());
        assert_eq!(p.expected_agg_file_size_bytes(), 192);
    }

    #[test]
    fn file_per_process_offsets_and_names() {
        let p = IorParams { test_file: "/d/testFile".into(), ..params(32, 8, 2, 4, true) };
        let offs: Vec<u64> = offsets(&p, 3).collect();
        assert_eq!(offs, vec![0, 8, 16, 24, 32, 40, 48, 56]);
        assert_eq!(offs, offsets(&p, 0).collect::<Vec<_>>());
        assert_eq!(test_file_name(&p, 3), "/d/testFile.00000003");
        let shared = IorParams { file_per_proc: false, ..p.clone() };
        assert_eq!(test_file_name(&shared, 3), "/d/testFile");
    }

    #[test]
    fn unique_dir_inserts_the_rank() {
        let p = IorParams { test_file: "/d/testFile".into(), unique_dir: true, ..params(8, 8, 1, 12, true) };
        assert_eq!(unique_dir(&p, 11).as_deref(), Some("/d/11"));
        assert_eq!(test_file_name(&p, 11), "/d/11/testFile.00000011");
        let relative = IorParams { test_file: "testFile".into(), ..p.clone() };
        assert_eq!(test_file_name(&relative, 2), "2/testFile.00000002");
        let shared = IorParams { file_per_proc: false, ..p };
        assert_eq!(unique_dir(&shared, 1), None);
    }

    #[test]
    fn reorder_shift_on_one_node_is_a_no_op() {
        let p = IorParams { reorder_tasks: true, task_per_node_offset: 1, ..params(8, 8, 1, 8, false) };
        let one_node = NodeMapping::single_node(8);
        assert_eq!(read_rank_offset(&p, one_node), 0);
        assert_eq!(write_check_rank_offset(&p, one_node), 0);
    }

    #[test]
    fn reorder_shift_across_nodes() {
        // 8 tasks on 4 nodes, 2 per node.
        let p = IorParams { reorder_tasks: true, task_per_node_offset: 1, ..params(8, 8, 1, 8, false) };
        let block = NodeMapping { tasks_on_node0: 2, block_mapping: true };
        assert_eq!(read_rank_offset(&p, block), 2);
        assert_eq!(write_check_rank_offset(&p, block), 4);
        let round_robin = NodeMapping { tasks_on_node0: 2, block_mapping: false };
        assert_eq!(read_rank_offset(&p, round_robin), 1);
        assert_eq!(write_check_rank_offset(&p, round_robin), 2);
        let q3 = IorParams { task_per_node_offset: 3, ..p.clone() };
        assert_eq!(read_rank_offset(&q3, block), 6);
        assert_eq!(write_check_rank_offset(&q3, block), 0);
        // Without -C nothing moves.
        let plain = IorParams { reorder_tasks: false, ..p };
        assert_eq!(read_rank_offset(&plain, block), 0);
        // The shifted task reads the block its neighbour wrote.
        assert_eq!(pretend_rank(7, 2, 8), 1);
        let fpp = IorParams { file_per_proc: true, test_file: "f".into(), ..q3 };
        assert_eq!(test_file_name(&fpp, pretend_rank(5, read_rank_offset(&fpp, block), 8)), "f.00000003");
    }

    #[test]
    fn tasks_per_node_gives_the_block_mapping() {
        let p = IorParams { reorder_tasks: true, ..params(8, 8, 1, 8, false) };
        assert_eq!(NodeMapping::from_params(&p), NodeMapping::single_node(8));
        let p = IorParams { tasks_per_node: Some(2), ..p };
        assert_eq!(NodeMapping::from_params(&p), NodeMapping { tasks_on_node0: 2, block_mapping: true });
        assert_eq!(read_rank_offset(&p, NodeMapping::from_params(&p)), 2);
        assert_eq!(write_check_rank_offset(&p, NodeMapping::from_params(&p)), 4);
        // Not a divisor: 10 tasks, 4 per node, -Q 2 shifts by 8.
        let p = IorParams { num_tasks: 10, tasks_per_node: Some(4), task_per_node_offset: 2, ..p };
        assert_eq!(read_rank_offset(&p, NodeMapping::from_params(&p)), 8);
    }

    #[test]
    fn statfs_directory() {
        assert_eq!(directory_of("/scratch/ior/testfile"), "/scratch/ior");
        assert_eq!(directory_of("testFile"), ".");
        assert_eq!(directory_of("/testFile"), "/");
    }
}
