//! Which OSTs are slow: much slower than their peers under the same load
//! in one interval.
//!
//! The rule: an OST is *busy* in an interval when it moved data (bytes
//! written or read) or has RPCs in flight at the interval's end. When at
//! least [`BUSY_OSTS_MIN`] OSTs are busy, let M be the median of the busy
//! OSTs' bandwidths (bytes written plus read per second; the mean of the
//! two middle ones for an even count). A busy OST whose bandwidth is
//! below [`SLOW_FRACTION`] of M is slow. Nothing is flagged when fewer
//! than two OSTs are busy (no peer to compare with) or when M is zero
//! (most busy OSTs moved nothing: no one is slower than the median).
//!
//! Why so: an idle OST (no file of the load striped over it) is not
//! under the same load and is never flagged; an OST that holds requests
//! but moves nothing (a stuck disk) is, when its peers move data. Two
//! busy OSTs are enough: their median is their mean, so one is flagged
//! when it moved less than a third of the other's bytes. A load that
//! ends within an interval can make its last OST look slow for that one
//! interval; a slow OST is one flagged interval after interval.

/// Busy OSTs needed before any is compared with the others.
pub const BUSY_OSTS_MIN: usize = 2;
/// A busy OST below this fraction of the busy OSTs' median is slow.
pub const SLOW_FRACTION: f64 = 0.5;

/// One OST's part in an interval.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Activity {
    /// Bytes written and read per second over the interval.
    pub bandwidth_bytes_s: f64,
    /// Bytes written and read in the interval.
    pub bytes_moved: u64,
    /// Requests not yet handled at the interval's end.
    pub rpcs_in_flight: u64,
}

impl Activity {
    pub fn is_busy(&self) -> bool {
        self.bytes_moved > 0 || self.rpcs_in_flight > 0
    }
}

/// For each OST of `activity`, whether it is slow (see the module docs).
pub fn slow(activity: &[Activity]) -> Vec<bool> {
    let mut busy: Vec<f64> = activity.iter().filter(|a| a.is_busy()).map(|a| a.bandwidth_bytes_s.max(0.0)).collect();
    if busy.len() < BUSY_OSTS_MIN {
        return vec![false; activity.len()];
    }
    busy.sort_by(f64::total_cmp);
    let middle = busy.len() / 2;
    let median = if busy.len() % 2 == 1 { busy[middle] } else { (busy[middle - 1] + busy[middle]) / 2.0 };
    let limit = median * SLOW_FRACTION;
    activity.iter().map(|a| median > 0.0 && a.is_busy() && a.bandwidth_bytes_s < limit).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: f64 = 1048576.0;

    fn moving(mib_s: f64) -> Activity {
        Activity { bandwidth_bytes_s: mib_s * MIB, bytes_moved: (mib_s * MIB * 2.0) as u64, rpcs_in_flight: 0 }
    }

    fn idle() -> Activity {
        Activity::default()
    }

    #[test]
    fn the_slow_one_of_four_is_flagged() {
        let osts = [moving(400.0), moving(380.0), moving(60.0), moving(410.0)];
        assert_eq!(slow(&osts), [false, false, true, false]);
    }

    #[test]
    fn equal_osts_are_not_flagged() {
        assert_eq!(slow(&[moving(200.0); 4]), [false; 4]);
        // Near-equal: noise is not slowness.
        assert_eq!(slow(&[moving(200.0), moving(150.0), moving(180.0)]), [false; 3]);
    }

    #[test]
    fn idle_osts_are_not_flagged_nor_counted() {
        assert_eq!(slow(&[idle(), idle(), idle()]), [false; 3]);
        // An OST without load is no peer: one busy OST has none.
        assert_eq!(slow(&[moving(300.0), idle(), idle()]), [false; 3]);
        // Two busy ones are compared; the idle one stays out.
        assert_eq!(slow(&[moving(300.0), moving(20.0), idle()]), [false, true, false]);
    }

    #[test]
    fn a_stuck_ost_with_work_in_flight_is_flagged() {
        let stuck = Activity { rpcs_in_flight: 8, ..idle() };
        assert_eq!(slow(&[moving(300.0), stuck]), [false, true]);
        // Most of them stuck: the median is zero, no one is below it.
        assert_eq!(slow(&[moving(300.0), stuck, stuck]), [false; 3]);
    }

    #[test]
    fn the_limit_is_half_the_median() {
        // Median of 100, 100, 100, 49, 51: 100; 49 is below 50, 51 is not.
        let osts = [moving(100.0), moving(100.0), moving(100.0), moving(49.0), moving(51.0)];
        assert_eq!(slow(&osts), [false, false, false, true, false]);
    }
}
