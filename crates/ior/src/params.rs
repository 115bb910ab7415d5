//! The parameters of one IOR test, named after IOR's `IOR_param_t`.
//!
//! What: [`IorParams`] with IOR's defaults (`init_IOR_Param_t`): block 1 MiB, transfer
//! 256 KiB, one segment, one repetition, `testFile`, POSIX. The field names follow IOR's
//! so each maps to one key of IOR's JSON report; the booleans mirror IOR's 0/1 flags on
//! purpose, since each is printed as such.
//!
//! Not here: parsing and validation (`options`).

use std::collections::BTreeMap;

/// Program name printed on the `Command line` line.
pub const PROGRAM: &str = "lanefs ior";
/// Upper bound on `-N` (and `--tasks-per-node`): what a backend that models whole phases
/// ([`crate::PhaseModel`]) may be asked to run. IOR runs have reached about a million ranks.
pub const NUM_TASKS_MAX: u32 = 1 << 20;
/// Upper bound on `-N` for backends that run each task as a thread with its own buffers
/// and client; [`crate::run`] refuses more.
pub const NUM_TASK_THREADS_MAX: u32 = 4096;
/// IOR's access unit, `sizeof(IOR_size_t)`: block and transfer sizes are multiples of it.
pub const ACCESS_UNIT_BYTES: u64 = 8;

/// `-O summaryFormat=`: IOR's three output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SummaryFormat {
    /// IOR's default human-readable text.
    Default,
    /// `-O summaryFormat=JSON`.
    Json,
    /// `-O summaryFormat=CSV`: only the per-iteration table.
    Csv,
}

/// `-l`/`--dataPacketType`: what the transfers carry (see `pattern`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PacketType {
    /// No `-l`: lanefs's pattern (IOR's signature words and each word's offset).
    #[default]
    Generic,
    /// `-l t`: IOR's timestamp packet.
    Timestamp,
    /// `-l o`: IOR's offset packet.
    Offset,
    /// `-l i`: IOR's incompressible packet.
    Incompressible,
    /// `-l r`: IOR's random packet.
    Random,
}

impl PacketType {
    /// IOR's `parsePacketType`: the first letter of the value.
    pub fn from_name(name: &str) -> Option<PacketType> {
        match name.chars().next() {
            None | Some('t') => Some(PacketType::Timestamp),
            Some('o') => Some(PacketType::Offset),
            Some('i') => Some(PacketType::Incompressible),
            Some('r') => Some(PacketType::Random),
            Some(_) => None,
        }
    }

    /// IOR's `dataPacketType` number (its enum; lanefs's default counts as
    /// timestamp, IOR's default).
    pub fn number(self) -> i64 {
        match self {
            PacketType::Generic | PacketType::Timestamp => 0,
            PacketType::Offset => 1,
            PacketType::Incompressible => 2,
            PacketType::Random => 3,
        }
    }

    /// IOR's `data packet type` letter, which IOR takes from
    /// `{"g","t","o","i"}` by that number: offset prints `t`, random `i`.
    pub fn letter(self) -> &'static str {
        ["g", "t", "o", "i"][self.number() as usize]
    }
}

/// One test's parameters, named after IOR's `IOR_param_t` fields so the JSON keys map
/// one to one. The booleans mirror IOR's 0/1 flags on purpose: each is printed as such.
#[derive(Debug, Clone, PartialEq)]
pub struct IorParams {
    /// `-a`: backend name as typed (matched case-insensitively).
    pub api: String,
    /// `-A`: user reference number, echoed in the summary.
    pub reference_number: i64,
    /// `-b`: contiguous bytes per task per segment.
    pub block_size_bytes: u64,
    /// `-t`: bytes per I/O call.
    pub transfer_size_bytes: u64,
    /// `-s`: number of segments.
    pub segment_count: u64,
    /// `-N`: number of tasks (ranks), each a thread with its own client (or modelled).
    pub num_tasks: u32,
    /// `--tasks-per-node`: tasks on each node, placed in blocks (node `k` holds ranks
    /// `k*N .. (k+1)*N`); `None` puts every task on one node, as the threads of one
    /// process are. IOR derives this from MPI; see [`IorParams::tasks_on_node0`].
    pub tasks_per_node: Option<u32>,
    /// `-i`: repetitions.
    pub repetitions: u32,
    /// `-o`: test file name (with `-F`, the prefix of `name.%08d`).
    pub test_file: String,
    /// `-F`: one file per task.
    pub file_per_proc: bool,
    /// `-c`: collective I/O (meaningful to MPI-IO-like backends; POSIX ignores it, as IOR's).
    pub collective: bool,
    /// `--mpiio.showHints` (IOR 3: `-H`): show the MPI-IO hints at open. Printing them is
    /// the business of a backend that uses hints; the others ignore it, as IOR's POSIX does.
    pub show_hints: bool,
    /// `--mpiio.hintsFileName=F` (IOR 3: `-U F`): a file of `IOR_HINT__MPI__key=value`
    /// lines, read with the `IOR_HINT__` environment by [`crate::mpi_hints`].
    pub hints_file_name: Option<String>,
    /// `-w`: write phase.
    pub write_file: bool,
    /// `-r`: read phase.
    pub read_file: bool,
    /// `-W`: read back and verify right after writing.
    pub check_write: bool,
    /// `-R`: verify the data of the read phase.
    pub check_read: bool,
    /// `-e`: one fsync at the end of the write phase, inside the timer.
    pub fsync: bool,
    /// `-Y`: fsync after every write call.
    pub fsync_per_write: bool,
    /// `-C`: shift tasks for the read-back so a task reads another node's data.
    pub reorder_tasks: bool,
    /// `-Q`: node shift used by `-C`.
    pub task_per_node_offset: u32,
    /// `-Z`: the read phase takes each task to a random task's data (`-Z`:
    /// each task draws its own shift; `-Z -Z`: a shuffle of the tasks).
    pub reorder_tasks_random: u32,
    /// `-X`: seed for `-Z` (negative: its magnitude plus the repetition).
    pub reorder_tasks_random_seed: i64,
    /// `-k`: keep the files.
    pub keep_file: bool,
    /// `-K`: keep the files when a data check failed.
    pub keep_file_with_error: bool,
    /// `-E`: do not remove the file before writing.
    pub use_existing_test_file: bool,
    /// `-g`: barriers between open, transfer and close.
    pub intra_test_barriers: bool,
    /// `-u`: with `-F`, each task's file lives in its own directory `dir/<rank>/`.
    pub unique_dir: bool,
    /// `-z`: accesses in IOR's shuffled order (each `-z` adds one; lanefs
    /// takes one).
    pub random_offset: u32,
    /// `--random-offset-seed`: the seed of `-z`'s shuffle; -1 draws one from
    /// the clock (rank 0's).
    pub random_seed: i64,
    /// `--dryRun`: run the test without any I/O (every file operation of
    /// the backend succeeds at once), to see the options and the report.
    pub dry_run: bool,
    /// lanefs's `--timeseries`: seconds per bin of the run's time series
    /// (`timeseries`); 0: none recorded. Not IOR's, and not in its
    /// options or summaries.
    pub timeseries_interval_s: f64,
    /// `-T`: minutes after a test's start past which it starts no further
    /// phase (IOR checks between phases, never within one); 0: no limit.
    pub max_time_duration_min: u32,
    /// `-d`: seconds to wait before each write and read phase.
    pub inter_test_delay_s: u32,
    /// `-D`: seconds after which a rank stops the write or read phase at its
    /// next transfer (IOR's stonewall); 0: no deadline.
    pub deadline_for_stonewalling_s: u32,
    /// `-O stoneWallingWearOut=1`: once the deadline is hit, every rank goes
    /// on until it has made as many transfers as the rank that made the most.
    pub stonewalling_wear_out: bool,
    /// `-O stoneWallingWearOutIterations=N`: stop a phase after N transfers
    /// per rank (0: no limit); a read after a stonewalled write in the same
    /// run takes the write's count.
    pub stonewalling_wear_out_iterations: u64,
    /// `-O stoneWallingStatusFile=F`: a stonewalled write stores its
    /// transfer count here, and a later run's read takes it back.
    pub stonewalling_status_file: Option<String>,
    /// `-O saveRankPerformanceDetailsCSV=F`: each rank's times and
    /// throughput of every phase, appended to this CSV file (by rank 0).
    pub save_rank_details_csv: Option<String>,
    /// `-l`/`--dataPacketType`: what the transfers carry.
    pub data_packet_type: PacketType,
    /// `-G`: data signature; 0 means IOR's default, the clock's seconds at each repetition.
    pub time_stamp_signature: i64,
    /// `-v`: verbosity (each `-v` adds one).
    pub verbose: u32,
    /// `-O summaryFormat=`.
    pub summary_format: SummaryFormat,
    /// `-O summaryFile=`: results go to this file instead of stdout.
    pub summary_file: Option<String>,
    /// `--<api>.<name>[=value]` and `-O <api>.<name>=value`, keyed `"<api>.<name>"` with
    /// the API part lower-cased; `None` for a bare flag.
    pub module_options: BTreeMap<String, Option<String>>,
    /// The `Command line` line of the report.
    pub command_line: String,
    /// `-f`: the IOR script the tests come from.
    pub script_file: Option<String>,
    /// The test's number in the report (`TestID`, `Test#`): its place in a
    /// `-f` script, from 0.
    pub test_id: u32,
    /// `-f`: the tests of the script after this one, each starting from the
    /// one before (see [`crate::options::script_tests`]); empty without a
    /// script.
    pub next_tests: Vec<IorParams>,
}

impl Default for IorParams {
    /// IOR's defaults (`init_IOR_Param_t`), before `-w -r` are implied.
    fn default() -> Self {
        IorParams {
            api: "POSIX".to_string(),
            reference_number: 0,
            block_size_bytes: 1 << 20,
            transfer_size_bytes: 256 << 10,
            segment_count: 1,
            num_tasks: 1,
            tasks_per_node: None,
            repetitions: 1,
            test_file: "testFile".to_string(),
            file_per_proc: false,
            collective: false,
            show_hints: false,
            hints_file_name: None,
            write_file: false,
            read_file: false,
            check_write: false,
            check_read: false,
            fsync: false,
            fsync_per_write: false,
            reorder_tasks: false,
            task_per_node_offset: 1,
            reorder_tasks_random: 0,
            reorder_tasks_random_seed: 0,
            keep_file: false,
            keep_file_with_error: false,
            use_existing_test_file: false,
            intra_test_barriers: false,
            unique_dir: false,
            inter_test_delay_s: 0,
            deadline_for_stonewalling_s: 0,
            stonewalling_wear_out: false,
            stonewalling_wear_out_iterations: 0,
            stonewalling_status_file: None,
            save_rank_details_csv: None,
            time_stamp_signature: 0,
            data_packet_type: PacketType::Generic,
            verbose: 0,
            summary_format: SummaryFormat::Default,
            summary_file: None,
            module_options: BTreeMap::new(),
            command_line: PROGRAM.to_string(),
            script_file: None,
            max_time_duration_min: 0,
            dry_run: false,
            timeseries_interval_s: 0.0,
            random_offset: 0,
            random_seed: -1,
            test_id: 0,
            next_tests: Vec::new(),
        }
    }
}

impl IorParams {
    /// `blockSize * segmentCount * numTasks`: bytes one phase moves.
    pub fn expected_agg_file_size_bytes(&self) -> u64 {
        self.block_size_bytes * self.segment_count * u64::from(self.num_tasks)
    }

    /// Tasks on node 0, IOR's `tasksPerNode`: `--tasks-per-node` capped at `-N` (a node
    /// is never fuller than the job), or every task when it is not given. With the block
    /// placement node 0 is always full; only the last node may hold fewer.
    pub fn tasks_on_node0(&self) -> u32 {
        self.tasks_per_node.map_or(self.num_tasks, |n| n.clamp(1, self.num_tasks.max(1)))
    }

    /// Nodes the tasks occupy: `ceil(numTasks / tasksPerNode)` (IOR does not require
    /// `-N` to be a multiple of the tasks per node, and neither does lanefs-ior).
    pub fn nodes(&self) -> u32 {
        self.num_tasks.div_ceil(self.tasks_on_node0().max(1))
    }

    /// Transfers per task per segment.
    pub fn transfers_per_block(&self) -> u64 {
        self.block_size_bytes / self.transfer_size_bytes
    }

    /// Whether module flag `key` (`"posix.odirect"`) is on: present without a value or
    /// with a value other than `0`.
    pub fn module_flag(&self, key: &str) -> bool {
        match self.module_options.get(key) {
            None => false,
            Some(None) => true,
            Some(Some(value)) => value != "0",
        }
    }

    /// The value of module option `key` (`"lanefs.lock-mode"`), if given with one.
    pub fn module_value(&self, key: &str) -> Option<&str> {
        self.module_options.get(key).and_then(|value| value.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placed(num_tasks: u32, tasks_per_node: Option<u32>) -> (u32, u32) {
        let p = IorParams { num_tasks, tasks_per_node, ..IorParams::default() };
        (p.tasks_on_node0(), p.nodes())
    }

    #[test]
    fn nodes_are_the_ceiling_of_tasks_over_tasks_per_node() {
        assert_eq!(placed(8, None), (8, 1), "default: every task on one node");
        assert_eq!(placed(8, Some(2)), (2, 4));
        assert_eq!(placed(10, Some(4)), (4, 3), "the last node holds 2");
        assert_eq!(placed(8, Some(64)), (8, 1), "a node is never fuller than the job");
        assert_eq!(placed(75_000, Some(64)), (64, 1172));
        assert_eq!(placed(1, Some(1)), (1, 1));
    }
}
