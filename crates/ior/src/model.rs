//! Backends that model a whole phase instead of moving bytes.
//!
//! What: a [`PhaseModel`] answers "what would each rank's timers read" for a whole write
//! or read phase of every rank at once, in modelled seconds — a discrete-event simulator
//! of tens of thousands of ranks cannot be given one thread and one [`crate::RankIo`]
//! per rank. A backend offers one through [`crate::Backend::phase_model`]; [`crate::run`]
//! then:
//! - never calls [`crate::Backend::rank`], `delete` or `mkdir`, and never starts a rank
//!   thread: the model does the phase's work (removing the old file unless `-E`, the
//!   `-g` barriers, `-e`/`-Y` fsyncs, the `-C` shift) in its own time;
//! - never sleeps for `-d`: the model may add `inter_test_delay_s` to its clock; the
//!   `-v` "delaying" line is still printed, so the output keeps its shape;
//! - reduces the returned [`RankPhase`]s with the same [`crate::reduce_phase`], summaries
//!   and printers as for real I/O, so the text, JSON and CSV reports have the same shape;
//! - refuses the data checks `-W` and `-R` before printing anything, since a model has no
//!   bytes to compare ([`check_params`]);
//! - allows `-N` up to [`crate::NUM_TASKS_MAX`] rather than the thread limit
//!   [`crate::NUM_TASK_THREADS_MAX`].
//!
//! Clocks: a phase's timestamps may start at 0 or continue one modelled clock across
//! phases and repetitions — every reported figure is a difference of timestamps of the
//! same phase (IOR's MIN of starts and MAX of stops), so the origin never shows.
//!
//! Invariants checked on every answer ([`check_phase`]): one entry per rank, rank `r`
//! at index `r`; finite timestamps in each rank's order (open start ≤ open stop ≤
//! transfer start ≤ transfer stop ≤ close start ≤ close stop); a phase that takes time.
//! A model that breaks them gets an [`IorError::Backend`] naming the rank, not a report
//! with infinite bandwidth.
//!
//! Not here: the model itself (lanefs-sim), and where ranks read under `-C` — the model
//! asks [`crate::read_rank_offset`] with [`crate::NodeMapping::from_params`].

use crate::error::IorError;
use crate::params::IorParams;
use crate::timing::{RankPhase, RankTimes};

/// A whole-phase model of an I/O system. Methods take `&self` because the backend that
/// owns the model is shared (`Backend: Sync`): keep mutable state (a modelled clock,
/// counters for [`crate::Backend::reports`]) behind a `Mutex`.
pub trait PhaseModel {
    /// The timed write phase of repetition `rep` (0-based): one [`RankPhase`] per rank,
    /// rank order, timestamps in modelled seconds.
    fn write_phase(&self, p: &IorParams, rep: u32) -> Result<Vec<RankPhase>, IorError>;

    /// The timed read phase of repetition `rep` (`-r`), as [`PhaseModel::write_phase`].
    fn read_phase(&self, p: &IorParams, rep: u32) -> Result<Vec<RankPhase>, IorError>;

    /// Remove the test file(s) after repetition `rep` (unless `-k`); the modelled seconds
    /// rank 0 spent, barriers included (the `-v` `remove` row).
    fn remove(&self, p: &IorParams, rep: u32) -> Result<f64, IorError>;
}

/// Refuse what a model cannot do: the data checks `-W` and `-R`, which compare bytes,
/// and stonewalling (`-D`), which stops ranks in the middle of a phase.
/// [`crate::run`] calls it for every backend with a model, after
/// [`crate::Backend::check_params`]; a backend may call it first to order its errors.
/// Exported as `model_check_params`.
pub fn check_params(backend: &str, p: &IorParams) -> Result<(), IorError> {
    if p.random_offset > 0 || p.reorder_tasks_random > 0 {
        return Err(IorError::option(
            if p.random_offset > 0 { "-z" } else { "-Z" },
            format!(
                "the {backend} backend models IOR's sequential offsets and constant task shifts only; drop -z and -Z"
            ),
        ));
    }
    let stonewalled = p.deadline_for_stonewalling_s > 0
        || p.stonewalling_wear_out_iterations > 0
        || p.stonewalling_status_file.is_some();
    if stonewalled {
        return Err(IorError::option(
            "-D",
            format!(
                "the {backend} backend models whole phases and cannot stop them at a deadline or a transfer count; drop -D and the stoneWalling* directives"
            ),
        ));
    }
    let mut given = Vec::new();
    let mut fixes = Vec::new();
    if p.check_write {
        given.push("-W");
        fixes.push("drop -W");
    }
    if p.check_read {
        given.push("-R");
        fixes.push(if p.read_file { "drop -R" } else { "use -r instead of -R" });
    }
    if given.is_empty() {
        return Ok(());
    }
    Err(IorError::option(
        given.join(" "),
        format!(
            "the {backend} backend models I/O in simulated time and moves no data bytes, so data checks are not available; {}",
            fixes.join(" and ")
        ),
    ))
}

/// Check a model's answer for one phase (see the module's invariants).
pub fn check_phase(backend: &'static str, p: &IorParams, phase: &str, ranks: &[RankPhase]) -> Result<(), IorError> {
    let fail = |message: String| Err(IorError::backend(backend, format!("{phase} phase model: {message}")));
    if ranks.len() != p.num_tasks as usize {
        return fail(format!("returned {} rank results for -N {} tasks", ranks.len(), p.num_tasks));
    }
    for (rank, r) in ranks.iter().enumerate() {
        let t = timestamps(&r.times);
        if let Some(bad) = t.iter().find(|s| !s.is_finite()) {
            return fail(format!("rank {rank} has a timestamp of {bad} s"));
        }
        if t.windows(2).any(|pair| pair[0] > pair[1]) {
            return fail(format!(
                "rank {rank}'s timestamps are out of order (open, transfer, close start/stop): {t:?}"
            ));
        }
    }
    let start_s = ranks.iter().map(|r| r.times.open_start_s).fold(f64::INFINITY, f64::min);
    let stop_s = ranks.iter().map(|r| r.times.close_stop_s).fold(f64::NEG_INFINITY, f64::max);
    if stop_s <= start_s {
        return fail(format!("the phase takes no time (from {start_s} s to {stop_s} s)"));
    }
    Ok(())
}

/// Check a model's removal time.
pub fn check_remove(backend: &'static str, elapsed_s: f64) -> Result<f64, IorError> {
    if !(elapsed_s.is_finite() && elapsed_s >= 0.0) {
        return Err(IorError::backend(backend, format!("remove model: took {elapsed_s} s")));
    }
    Ok(elapsed_s)
}

fn timestamps(t: &RankTimes) -> [f64; 6] {
    [t.open_start_s, t.open_stop_s, t.xfer_start_s, t.xfer_stop_s, t.close_start_s, t.close_stop_s]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rank(t: [f64; 6]) -> RankPhase {
        let [open_start_s, open_stop_s, xfer_start_s, xfer_stop_s, close_start_s, close_stop_s] = t;
        RankPhase {
            times: RankTimes { open_start_s, open_stop_s, xfer_start_s, xfer_stop_s, close_start_s, close_stop_s },
            bytes: 8,
            transfers: 1,
        }
    }

    fn two_tasks() -> IorParams {
        IorParams { num_tasks: 2, ..IorParams::default() }
    }

    #[test]
    fn data_checks_are_refused_with_the_fix() {
        let p = IorParams { write_file: true, read_file: true, ..IorParams::default() };
        assert!(check_params("SIM", &p).is_ok());
        let e = check_params("SIM", &IorParams { check_write: true, check_read: true, ..p.clone() }).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid option -W -R: the SIM backend models I/O in simulated time and moves no data bytes, so data checks are not available; drop -W and drop -R"
        );
        let e = check_params("SIM", &IorParams { read_file: false, check_read: true, ..p.clone() }).unwrap_err();
        assert!(e.to_string().ends_with("use -r instead of -R"), "{e}");
        let e = check_params("SIM", &IorParams { deadline_for_stonewalling_s: 300, ..p }).unwrap_err();
        assert!(e.to_string().contains("cannot stop them at a deadline"), "{e}");
    }

    #[test]
    fn answers_are_checked() {
        let p = two_tasks();
        let good = [rank([0.0, 1.0, 1.0, 2.0, 2.0, 3.0]), rank([5.0, 5.0, 5.0, 5.0, 5.0, 5.0])];
        assert!(check_phase("SIM", &p, "write", &good).is_ok());
        let e = check_phase("SIM", &p, "write", &good[..1]).unwrap_err().to_string();
        assert_eq!(e, "SIM: write phase model: returned 1 rank results for -N 2 tasks");
        let e = check_phase("SIM", &p, "read", &[good[0], rank([0.0, 2.0, 1.0, 2.0, 2.0, 3.0])]).unwrap_err();
        assert!(e.to_string().contains("rank 1's timestamps are out of order"), "{e}");
        let e = check_phase("SIM", &p, "read", &[good[0], rank([0.0, f64::NAN, 1.0, 2.0, 2.0, 3.0])]).unwrap_err();
        assert!(e.to_string().contains("rank 1 has a timestamp of NaN s"), "{e}");
        let still = [rank([1.0; 6]), rank([1.0; 6])];
        assert!(check_phase("SIM", &p, "write", &still).unwrap_err().to_string().contains("takes no time"));
        assert_eq!(check_remove("SIM", 0.5).unwrap(), 0.5);
        assert!(check_remove("SIM", -1.0).is_err());
    }
}
