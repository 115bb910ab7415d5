//! The faults a run injects, and when.
//!
//! Nine classes ([`FaultClass`]), each a verb of the harness or of the
//! swarm's MDS node ([`crate::mds`]): a dropped connection, a slow network
//! (every link's latency multiplied for a while, the MDS's links too), a
//! client that dies, an OST whose machine dies (what it had not committed
//! is lost) and restarts later, a partition between one client and one OST
//! (healed later), a disk whose writes fail (`EIO`, `ENOSPC`), a disk
//! whose commits fail, an MDS whose machine dies and restarts later (what
//! SQLite had committed stays, answers on the wire are lost), and a
//! dropped client-MDS connection. The [`FaultPlan`] draws, from the run's
//! seed and its [`FaultMix`], the step at which the next fault strikes
//! (exponential gaps at the mix's total rate) and its class; the driver
//! picks its target from the cluster as it is then (a live client, an OST
//! that is up) with the plan's generator, so the whole schedule replays
//! from the seed. Every fault that breaks something schedules its repair
//! (restart, heal, a working disk, a calm network) a drawn number of steps
//! later; a cluster that has nothing left to do gets its next repair at
//! once, so a run never waits on a fault forever.

use lanefs_core::Errno;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultClass {
    Drop,
    Delay,
    ClientCrash,
    OstCrash,
    Partition,
    WriteFailure,
    CommitFailure,
    MdsCrash,
    MdsDrop,
}

impl FaultClass {
    pub const COUNT: usize = 9;
    pub const ALL: [FaultClass; FaultClass::COUNT] = [
        FaultClass::Drop,
        FaultClass::Delay,
        FaultClass::ClientCrash,
        FaultClass::OstCrash,
        FaultClass::Partition,
        FaultClass::WriteFailure,
        FaultClass::CommitFailure,
        FaultClass::MdsCrash,
        FaultClass::MdsDrop,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FaultClass::Drop => "drop",
            FaultClass::Delay => "delay",
            FaultClass::ClientCrash => "client_crash",
            FaultClass::OstCrash => "ost_crash",
            FaultClass::Partition => "partition",
            FaultClass::WriteFailure => "write_failure",
            FaultClass::CommitFailure => "commit_failure",
            FaultClass::MdsCrash => "mds_crash",
            FaultClass::MdsDrop => "mds_drop",
        }
    }

    pub fn from_name(name: &str) -> Option<FaultClass> {
        FaultClass::ALL.into_iter().find(|c| c.name() == name)
    }

    /// How often the class strikes relative to the others at the same
    /// drawn rate: crashes are rarer, since each ends much of a run.
    pub fn weight(self) -> f64 {
        match self {
            FaultClass::ClientCrash => 0.3,
            FaultClass::OstCrash | FaultClass::MdsCrash => 0.5,
            FaultClass::Drop
            | FaultClass::Delay
            | FaultClass::Partition
            | FaultClass::WriteFailure
            | FaultClass::CommitFailure
            | FaultClass::MdsDrop => 1.0,
        }
    }
}

/// The rate of each fault class: expected faults per thousand harness
/// steps (0: the class is off).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FaultMix {
    pub per_kilostep: [f64; FaultClass::COUNT],
}

impl FaultMix {
    pub fn is_quiet(&self) -> bool {
        self.per_kilostep.iter().all(|r| *r == 0.0)
    }

    pub fn rate(&self, class: FaultClass) -> f64 {
        self.per_kilostep[class as usize]
    }

    pub fn total_per_kilostep(&self) -> f64 {
        self.per_kilostep.iter().sum()
    }
}

/// A fault with its target, as the driver injected it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    Drop {
        client: u32,
        ost: u32,
    },
    /// Every link's latency becomes `[min, max]` until the network calms.
    Delay {
        latency_min_us: u64,
        latency_max_us: u64,
    },
    ClientCrash {
        client: u32,
    },
    OstCrash {
        ost: u32,
    },
    Partition {
        client: u32,
        ost: u32,
    },
    FailWrites {
        ost: u32,
        errno: Errno,
    },
    FailCommits {
        ost: u32,
        errno: Errno,
    },
    MdsCrash,
    /// Client `client`'s connection to the MDS dropped.
    MdsDrop {
        client: u32,
    },
}

impl Fault {
    pub fn class(self) -> FaultClass {
        match self {
            Fault::Drop { .. } => FaultClass::Drop,
            Fault::Delay { .. } => FaultClass::Delay,
            Fault::ClientCrash { .. } => FaultClass::ClientCrash,
            Fault::OstCrash { .. } => FaultClass::OstCrash,
            Fault::Partition { .. } => FaultClass::Partition,
            Fault::FailWrites { .. } => FaultClass::WriteFailure,
            Fault::FailCommits { .. } => FaultClass::CommitFailure,
            Fault::MdsCrash => FaultClass::MdsCrash,
            Fault::MdsDrop { .. } => FaultClass::MdsDrop,
        }
    }

    /// Whether it may explain a lost write or a failed data operation:
    /// the MDS's faults touch no data.
    pub fn touches_data(self) -> bool {
        !matches!(self, Fault::MdsCrash | Fault::MdsDrop { .. })
    }

    /// The client it touches (`None`: every client).
    pub fn client(self) -> Option<u32> {
        match self {
            Fault::Drop { client, .. }
            | Fault::Partition { client, .. }
            | Fault::ClientCrash { client }
            | Fault::MdsDrop { client } => Some(client),
            _ => None,
        }
    }

    /// The OST it touches (`None`: every OST).
    pub fn ost(self) -> Option<u32> {
        match self {
            Fault::Drop { ost, .. }
            | Fault::Partition { ost, .. }
            | Fault::OstCrash { ost }
            | Fault::FailWrites { ost, .. }
            | Fault::FailCommits { ost, .. } => Some(ost),
            Fault::Delay { .. } | Fault::ClientCrash { .. } | Fault::MdsCrash | Fault::MdsDrop { .. } => None,
        }
    }
}

/// What undoes a fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Repair {
    RestartOst { ost: u32 },
    Heal { client: u32, ost: u32 },
    WritesWork { ost: u32 },
    CommitsWork { ost: u32 },
    CalmNetwork,
    RestartMds,
}

/// Faults injected, by class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultCounts {
    pub by_class: [u64; FaultClass::COUNT],
}

impl FaultCounts {
    pub fn add(&mut self, class: FaultClass) {
        self.by_class[class as usize] += 1;
    }

    pub fn total(&self) -> u64 {
        self.by_class.iter().sum()
    }
}

impl std::ops::AddAssign for FaultCounts {
    fn add_assign(&mut self, other: FaultCounts) {
        for (a, b) in self.by_class.iter_mut().zip(other.by_class) {
            *a += b;
        }
    }
}

/// Repairs waiting at once, at most: one per OST and link, and the network.
pub const REPAIRS_PENDING_MAX: usize = 4096;

/// When faults strike and repairs come (see the module docs).
pub struct FaultPlan {
    rng: ChaCha8Rng,
    mix: FaultMix,
    /// The step of the next fault (`u64::MAX`: none will come).
    next_at: u64,
    /// Repairs by the step they are due, in the order scheduled.
    repairs: BTreeMap<(u64, u64), Repair>,
    repair_seq: u64,
}

impl FaultPlan {
    pub fn new(seed: u64, mix: FaultMix) -> FaultPlan {
        let mut plan = FaultPlan {
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0x6661_756c_7473_2121),
            mix,
            next_at: 0,
            repairs: BTreeMap::new(),
            repair_seq: 0,
        };
        plan.next_at = plan.gap(0);
        plan
    }

    /// The generator the driver draws targets and durations from.
    pub fn rng(&mut self) -> &mut ChaCha8Rng {
        &mut self.rng
    }

    /// The class of the fault due at `step`, if one is (then the next one
    /// is drawn).
    pub fn due_fault(&mut self, step: u64) -> Option<FaultClass> {
        if step < self.next_at {
            return None;
        }
        self.next_at = self.gap(step);
        let total = self.mix.total_per_kilostep();
        let mut pick = self.rng.gen_range(0.0..total);
        for class in FaultClass::ALL {
            let rate = self.mix.rate(class);
            if pick < rate {
                return Some(class);
            }
            pick -= rate;
        }
        FaultClass::ALL.into_iter().rev().find(|c| self.mix.rate(*c) > 0.0)
    }

    /// Schedule `repair` `after_steps` from `step`.
    pub fn schedule(&mut self, step: u64, after_steps: u64, repair: Repair) {
        assert!(self.repairs.len() < REPAIRS_PENDING_MAX, "repairs pending past their bound");
        self.repair_seq += 1;
        self.repairs.insert((step + after_steps, self.repair_seq), repair);
    }

    /// The next repair due at `step`, if any.
    pub fn due_repair(&mut self, step: u64) -> Option<Repair> {
        let (&(at, _), _) = self.repairs.first_key_value()?;
        if at > step {
            return None;
        }
        self.repairs.pop_first().map(|(_, r)| r)
    }

    /// The earliest repair, due or not (the cluster has nothing else to do).
    pub fn next_repair(&mut self) -> Option<Repair> {
        self.repairs.pop_first().map(|(_, r)| r)
    }

    /// Forget the repairs still scheduled (the liveness phase heals all).
    pub fn clear_repairs(&mut self) {
        self.repairs.clear();
    }

    pub fn repairs_pending(&self) -> usize {
        self.repairs.len()
    }

    /// The step of the fault after one at `step`: exponential gaps at the
    /// mix's total rate.
    fn gap(&mut self, step: u64) -> u64 {
        let per_step = self.mix.total_per_kilostep() / 1000.0;
        if per_step <= 0.0 {
            return u64::MAX;
        }
        let u: f64 = self.rng.gen_range(f64::EPSILON..1.0);
        step + 1 + (-u.ln() / per_step) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quiet_mix_never_strikes_and_a_busy_one_strikes_at_its_rate() {
        let mut quiet = FaultPlan::new(1, FaultMix::default());
        assert!((0..100_000).all(|s| quiet.due_fault(s).is_none()));
        let mut mix = FaultMix::default();
        mix.per_kilostep[FaultClass::Drop as usize] = 10.0;
        mix.per_kilostep[FaultClass::OstCrash as usize] = 10.0;
        let mut plan = FaultPlan::new(1, mix);
        let classes: Vec<FaultClass> = (0..100_000).filter_map(|s| plan.due_fault(s)).collect();
        assert!((1500..2500).contains(&classes.len()), "{} faults at 20 per thousand steps", classes.len());
        assert!(classes.iter().all(|c| matches!(c, FaultClass::Drop | FaultClass::OstCrash)));
        assert!(classes.contains(&FaultClass::Drop) && classes.contains(&FaultClass::OstCrash));
    }

    #[test]
    fn repairs_come_in_step_order() {
        let mut plan = FaultPlan::new(2, FaultMix::default());
        plan.schedule(10, 5, Repair::CalmNetwork);
        plan.schedule(10, 1, Repair::RestartOst { ost: 1 });
        assert_eq!(plan.due_repair(10), None);
        assert_eq!(plan.due_repair(11), Some(Repair::RestartOst { ost: 1 }));
        assert_eq!(plan.next_repair(), Some(Repair::CalmNetwork));
        assert_eq!(plan.repairs_pending(), 0);
    }
}
