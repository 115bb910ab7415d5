//! The arithmetic that turns the phases' CPU times and counts into costs
//! per unit of work: pure functions, so that every step is checked.
//!
//! The servers: the lock-ahead phase (lock requests) and the phase of
//! 4 KiB write RPCs each cost `requests x lock + rpcs x rpc` (each also
//! has a few of the other kind: the fsyncs' sync requests, the first
//! write's lock), two equations solved for `lock` and `rpc`; the phase
//! of writes calling back each other's locks, less its requests and RPCs
//! at those costs, divided by its callbacks, is a callback's cost.
//!
//! The client: a cached 4 KiB write (no RPC) is a call's cost; the 4 KiB
//! writes that each became an RPC, less their calls, divided by the
//! messages sent, a message's; the 1 MiB writes, less their calls, their
//! messages, and the copy of their bytes beyond a page at the copy rate
//! measured, divided by their pages beyond each RPC's first (a message's
//! cost, measured with one page, has that page), a page's.
//!
//! A cost that comes out below zero (the noise of a small cost taken as
//! the difference of large ones) is written as zero, and says so.

use crate::load::{Sample, LARGE_WRITE_BYTES, PAGE_BYTES};

/// Microseconds of CPU time per unit of work.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cost {
    pub us: f64,
    /// The arithmetic gave less than zero: `us` is zero in its place.
    pub clamped: bool,
}

impl Cost {
    fn of(us: f64) -> Cost {
        match us < 0.0 {
            true => Cost { us: 0.0, clamped: true },
            false => Cost { us, clamped: false },
        }
    }
}

/// The phases measured (see [`crate::load`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct Phases {
    /// 4 KiB writes to a cached page.
    pub cached: Sample,
    /// 4 KiB writes, each its own write RPC.
    pub page_rpcs: Sample,
    /// 1 MiB writes, each its own write RPC.
    pub large_rpcs: Sample,
    /// Two clients' writes, each calling back the other's lock.
    pub callbacks: Sample,
    /// Lock-ahead lock requests.
    pub locks: Sample,
}

#[derive(Clone, Copy, Debug)]
pub struct ServerCosts {
    pub rpc: Cost,
    pub lock: Cost,
    pub callback: Cost,
}

#[derive(Clone, Copy, Debug)]
pub struct ClientCosts {
    /// One call of the library (a cached 4 KiB write, its copy included).
    pub call: Cost,
    pub message: Cost,
    pub page: Cost,
    /// Pages the 1 MiB phase's write RPCs carried, on average.
    pub pages_per_large_rpc: f64,
}

fn us(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// The servers' costs per lock request, per I/O RPC and per callback.
pub fn server_costs(p: &Phases) -> Result<ServerCosts, String> {
    let (l, a) = (&p.locks, &p.page_rpcs);
    let (rl, il, sl) = (l.counts.requests as f64, l.counts.io_rpcs as f64, us(l.server_cpu));
    let (ra, ia, sa) = (a.counts.requests as f64, a.counts.io_rpcs as f64, us(a.server_cpu));
    // sl = rl * lock + il * rpc; sa = ra * lock + ia * rpc.
    let determinant = rl * ia - ra * il;
    if determinant <= 0.0 || rl < 2.0 * il || ia < 2.0 * ra {
        return Err(format!(
            "the servers' counts cannot tell lock requests from I/O RPCs: the lock phase had {rl} requests and \
             {il} RPCs, the 4 KiB write phase {ra} requests and {ia} RPCs (each should be mostly its own kind; \
             is another client using these servers?)"
        ));
    }
    let lock = (sl * ia - sa * il) / determinant;
    let rpc = (rl * sa - ra * sl) / determinant;
    let c = &p.callbacks;
    if c.counts.callbacks == 0 {
        return Err("the servers counted no blocking callback while two clients wrote the same page in turn".into());
    }
    let rest = us(c.server_cpu) - c.counts.requests as f64 * lock - c.counts.io_rpcs as f64 * rpc;
    Ok(ServerCosts { rpc: Cost::of(rpc), lock: Cost::of(lock), callback: Cost::of(rest / c.counts.callbacks as f64) })
}

/// The client's costs per call, per message and per page; `copy_gib_s`:
/// one core's copy rate.
pub fn client_costs(p: &Phases, copy_gib_s: f64) -> Result<ClientCosts, String> {
    let none = |what: &str| format!("the servers counted no {what}");
    let (cached, small, large) = (&p.cached, &p.page_rpcs, &p.large_rpcs);
    if cached.ops == 0 || small.counts.messages() == 0 || large.counts.io_rpcs == 0 {
        return Err(none("messages in a write phase, or no cached write was made"));
    }
    let call = us(cached.client_cpu) / cached.ops as f64;
    let message = (us(small.client_cpu) - small.ops as f64 * call) / small.counts.messages() as f64;
    let pages = large.counts.bytes_written / PAGE_BYTES;
    let extra_pages = pages.saturating_sub(large.counts.io_rpcs);
    if extra_pages == 0 {
        return Err(none("write RPC of more than one page in the 1 MiB write phase"));
    }
    let copy_bytes = large.ops as f64 * (LARGE_WRITE_BYTES - PAGE_BYTES) as f64;
    let copy_us = copy_bytes / (copy_gib_s * (1u64 << 30) as f64) * 1e6;
    let rest = us(large.client_cpu) - large.ops as f64 * call - large.counts.messages() as f64 * message - copy_us;
    Ok(ClientCosts {
        call: Cost::of(call),
        message: Cost::of(message),
        page: Cost::of(rest / extra_pages as f64),
        pages_per_large_rpc: pages as f64 / large.counts.io_rpcs as f64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::Counts;
    use std::time::Duration;

    fn sample(ops: u64, io_rpcs: u64, requests: u64, callbacks: u64, server_us: f64, client_us: f64) -> Sample {
        let counts = Counts { io_rpcs, requests, enqueues: 0, callbacks, bytes_written: io_rpcs * PAGE_BYTES };
        let d = |us: f64| Duration::from_secs_f64(us / 1e6);
        Sample { ops, counts, server_cpu: d(server_us), client_cpu: d(client_us), wall: Duration::ZERO }
    }

    /// Phases made from known costs: lock 30, rpc 50, callback 20 us at
    /// the servers; call 4, message 10, page 0.5 us at the client.
    fn phases() -> Phases {
        let mut large = sample(100, 100, 10, 0, 0.0, 0.0);
        large.counts.bytes_written = 100 * LARGE_WRITE_BYTES;
        // calls + messages + 255 extra pages per RPC + the copy of
        // 100 x 1020 KiB at 1 GiB/s.
        let copy_us = 100.0 * (LARGE_WRITE_BYTES - PAGE_BYTES) as f64 / (1u64 << 30) as f64 * 1e6;
        large.client_cpu = Duration::from_secs_f64((100.0 * 4.0 + 110.0 * 10.0 + 25_500.0 * 0.5 + copy_us) / 1e6);
        Phases {
            cached: sample(1000, 0, 0, 0, 0.0, 4000.0),
            page_rpcs: sample(1000, 1000, 2, 0, 1000.0 * 50.0 + 2.0 * 30.0, 1000.0 * 4.0 + 1002.0 * 10.0),
            large_rpcs: large,
            callbacks: sample(200, 200, 400, 200, 200.0 * 50.0 + 400.0 * 30.0 + 200.0 * 20.0, 0.0),
            locks: sample(512, 1, 512, 0, 512.0 * 30.0 + 50.0, 0.0),
        }
    }

    fn close(cost: Cost, us: f64) -> bool {
        !cost.clamped && (cost.us - us).abs() < 1e-3
    }

    #[test]
    fn the_servers_costs_come_back_from_phases_made_of_them() {
        let c = server_costs(&phases()).unwrap();
        assert!(close(c.lock, 30.0) && close(c.rpc, 50.0) && close(c.callback, 20.0), "{c:?}");
    }

    #[test]
    fn the_clients_costs_come_back_from_phases_made_of_them() {
        let c = client_costs(&phases(), 1.0).unwrap();
        assert!(close(c.call, 4.0) && close(c.message, 10.0) && close(c.page, 0.5), "{c:?}");
        assert_eq!(c.pages_per_large_rpc, 256.0);
    }

    #[test]
    fn a_cost_below_zero_is_zero_and_says_so() {
        let mut p = phases();
        p.callbacks.server_cpu = Duration::from_micros(1);
        let c = server_costs(&p).unwrap();
        assert_eq!(c.callback, Cost { us: 0.0, clamped: true });
        // A faster copy than the one measured leaves more for the pages.
        let c = client_costs(&p, 0.01).unwrap();
        assert!(c.page.clamped && c.page.us == 0.0, "{c:?}");
    }

    #[test]
    fn phases_that_cannot_tell_the_costs_apart_are_an_error() {
        let mut p = phases();
        p.locks.counts = p.page_rpcs.counts;
        let e = server_costs(&p).unwrap_err();
        assert!(e.contains("cannot tell lock requests from I/O RPCs"), "{e}");
        let mut p = phases();
        p.callbacks.counts.callbacks = 0;
        assert!(server_costs(&p).unwrap_err().contains("no blocking callback"));
    }
}
