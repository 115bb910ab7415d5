//! The arithmetic that turns the phases' CPU times and counts into costs
//! per unit of work: pure functions, so that every step is checked.
//!
//! The servers: the phase of writes that each take a lock the same
//! client gave back (an enqueue, the other lock's page written, its
//! cancel) and the phase of 4 KiB write RPCs each cost
//! `requests x lock + rpcs x rpc`, two equations solved for `lock` and
//! `rpc`; the phase of the same writes by two clients in turn, which
//! calls back each other's lock instead, less its requests and RPCs at
//! those costs, divided by its callbacks, is a callback's cost. The
//! lock-ahead phase, less its RPCs, divided by its requests, is a
//! lock-ahead request's cost, and the phase of lock requests alone (an
//! enqueue, and the cancel of a lock nothing was written under), less
//! its RPCs, divided by its requests, a lock request's when they come one
//! at a time, both shown beside. The phase of 1 MiB write
//! RPCs, less its requests and RPCs at those costs and the copy of its
//! bytes into the page cache at the rate measured, divided by its pages
//! beyond each RPC's first, is a page's: the service's work that grows
//! with an RPC's size (its bulk's pages, the commits' writeback).
//!
//! The client, the same way: the cached 4 KiB writes (and the few
//! messages the cache sent meanwhile) and the 4 KiB writes that each
//! became an RPC each cost `calls x call + messages x message`, solved
//! for both; the 1 MiB writes, less their calls, their messages, and the
//! copy of their bytes beyond a page at the copy rate measured, divided
//! by their pages beyond each RPC's first (a message's cost, measured
//! with one page, has that page), a page's. The writes that each took a
//! lock the client had given back, less their calls and messages at
//! those costs, divided by their enqueues, are a lock's: the client's
//! work to take a lock, match it and give it back that a message's cost
//! does not hold.
//!
//! The phases run in rounds, and each cost is the median of the rounds'
//! (their spread kept, for the preset to show): a burst of other work on
//! the machine then moves one round, not the result. A cost that comes
//! out below zero (the noise of a small cost taken as the difference of
//! large ones) is written as zero, and says so.

use crate::load::{Sample, LARGE_WRITE_BYTES, PAGE_BYTES};

/// Microseconds of CPU time per unit of work.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cost {
    /// At least zero.
    pub us: f64,
    /// The arithmetic gave less than zero: `us` is zero in its place.
    pub clamped: bool,
    /// The lowest and the highest of the rounds' (unclamped).
    pub spread_us: (f64, f64),
}

impl Cost {
    fn of(us: f64) -> Cost {
        Cost { us: us.max(0.0), clamped: us < 0.0, spread_us: (us, us) }
    }

    /// The median of the rounds' costs, with their spread.
    fn median(rounds: &[Cost]) -> Cost {
        // A round's own cost, unclamped, is both ends of its spread.
        let mut values: Vec<f64> = rounds.iter().map(|c| c.spread_us.0).collect();
        let spread_us = (
            values.iter().copied().fold(f64::INFINITY, f64::min),
            values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        );
        Cost { spread_us, ..Cost::of(crate::median_f64(&mut values)) }
    }
}

/// The phases of one round (see [`crate::load`]).
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
    /// The same writes by one client, each taking back a lock it gave up.
    pub retakes: Sample,
    /// Lock requests by one client, each taking back a lock it gave up,
    /// with nothing written.
    pub lock_retakes: Sample,
    /// Lock-ahead lock requests.
    pub locks: Sample,
}

impl std::ops::AddAssign for Phases {
    fn add_assign(&mut self, o: Phases) {
        self.cached += o.cached;
        self.page_rpcs += o.page_rpcs;
        self.large_rpcs += o.large_rpcs;
        self.callbacks += o.callbacks;
        self.retakes += o.retakes;
        self.lock_retakes += o.lock_retakes;
        self.locks += o.locks;
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ServerCosts {
    pub rpc: Cost,
    pub lock: Cost,
    pub callback: Cost,
    /// A lock-ahead request's, on a new file (shown).
    pub lockahead: Cost,
    /// A lock request's with nothing else to do (shown).
    pub lock_alone: Cost,
    /// A page of a write RPC beyond its first, beyond the copy.
    pub page: Cost,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClientCosts {
    /// One call of the library (a cached 4 KiB write, its copy included).
    pub call: Cost,
    pub message: Cost,
    pub page: Cost,
    /// A lock taken and given back, beyond its messages.
    pub lock: Cost,
}

fn us(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// `x` and `y` of `a.0 x + a.1 y = a.2` and `b.0 x + b.1 y = b.2`, if
/// the phases tell them apart: the product of the coefficients across is
/// at most [`ACROSS_MAX`] of the product of the diagonal ones, so that
/// noise in one phase cannot swing the other unknown far.
pub fn solve(a: (f64, f64, f64), b: (f64, f64, f64)) -> Option<(f64, f64)> {
    let (diagonal, across) = (a.0 * b.1, a.1 * b.0);
    let apart = diagonal > 0.0 && across <= ACROSS_MAX * diagonal;
    let determinant = diagonal - across;
    apart.then(|| ((a.2 * b.1 - a.1 * b.2) / determinant, (a.0 * b.2 - a.2 * b.0) / determinant))
}

/// See [`solve`]: at a half, each unknown's error is at most twice the
/// phases' own.
const ACROSS_MAX: f64 = 0.5;

/// One round's server costs per lock request, per I/O RPC, per callback,
/// per lock-ahead request and per page; `cache_write_gib_s`: one core's
/// rate of writing into the page cache.
pub fn server_costs(p: &Phases, cache_write_gib_s: f64) -> Result<ServerCosts, String> {
    let (l, a) = (&p.retakes.counts, &p.page_rpcs.counts);
    let retakes = (l.requests as f64, l.io_rpcs as f64, us(p.retakes.server_cpu));
    let rpcs = (a.requests as f64, a.io_rpcs as f64, us(p.page_rpcs.server_cpu));
    let Some((lock, rpc)) = solve(retakes, rpcs) else {
        return Err(format!(
            "the servers' counts cannot tell lock requests from I/O RPCs: the lock-retaking phase had {} requests \
             and {} RPCs, the 4 KiB write phase {} requests and {} RPCs (each should be mostly its own kind; is \
             another client using these servers?)",
            l.requests, l.io_rpcs, a.requests, a.io_rpcs
        ));
    };
    let per = |s: &Sample, what: u64, name: &str| -> Result<Cost, String> {
        if what == 0 {
            return Err(format!("the servers counted no {name} in the phase made of them"));
        }
        let rest = us(s.server_cpu) - s.counts.requests as f64 * lock - s.counts.io_rpcs as f64 * rpc;
        Ok(Cost::of(rest / what as f64))
    };
    let callback = per(&p.callbacks, p.callbacks.counts.callbacks, "blocking callback")?;
    // Lock-ahead requests are the phase's requests: none is left at `lock`.
    let ahead = &p.locks;
    let lockahead = match ahead.counts.requests {
        0 => return Err("the servers counted no lock-ahead request in the phase made of them".into()),
        n => Cost::of((us(ahead.server_cpu) - ahead.counts.io_rpcs as f64 * rpc) / n as f64),
    };
    let alone = &p.lock_retakes;
    let lock_alone = match alone.counts.requests {
        0 => return Err("the servers counted no lock request in the phase made of them alone".into()),
        n => Cost::of((us(alone.server_cpu) - alone.counts.io_rpcs as f64 * rpc) / n as f64),
    };
    let large = &p.large_rpcs;
    let extra_pages = (large.counts.bytes_written / PAGE_BYTES).saturating_sub(large.counts.io_rpcs);
    if extra_pages == 0 {
        return Err("the servers counted no write RPC of more than one page in the 1 MiB write phase".into());
    }
    let copy_us = large.counts.bytes_written as f64 / (cache_write_gib_s * (1u64 << 30) as f64) * 1e6;
    let rest = us(large.server_cpu) - large.counts.requests as f64 * lock - large.counts.io_rpcs as f64 * rpc;
    let page = Cost::of((rest - copy_us) / extra_pages as f64);
    Ok(ServerCosts { rpc: Cost::of(rpc), lock: Cost::of(lock), callback, lockahead, lock_alone, page })
}

/// One round's client costs per call, per message and per page;
/// `copy_gib_s`: one core's copy rate.
pub fn client_costs(p: &Phases, copy_gib_s: f64) -> Result<ClientCosts, String> {
    let (cached, small, large) = (&p.cached, &p.page_rpcs, &p.large_rpcs);
    let equation = |s: &Sample| (s.ops as f64, s.counts.messages() as f64, us(s.client_cpu));
    let Some((call, message)) = solve(equation(cached), equation(small)) else {
        return Err(format!(
            "the client's phases cannot tell calls from messages: {} cached writes sent {} messages, {} writes \
             of a page each {} (is the client's cache flushing on its own?)",
            cached.ops,
            cached.counts.messages(),
            small.ops,
            small.counts.messages()
        ));
    };
    let pages = large.counts.bytes_written / PAGE_BYTES;
    let extra_pages = pages.saturating_sub(large.counts.io_rpcs);
    if extra_pages == 0 {
        return Err("the servers counted no write RPC of more than one page in the 1 MiB write phase".into());
    }
    let copy_bytes = large.ops as f64 * (LARGE_WRITE_BYTES - PAGE_BYTES) as f64;
    let copy_us = copy_bytes / (copy_gib_s * (1u64 << 30) as f64) * 1e6;
    let rest = us(large.client_cpu) - large.ops as f64 * call - large.counts.messages() as f64 * message - copy_us;
    let page = Cost::of(rest / extra_pages as f64);
    let retakes = &p.retakes;
    if retakes.counts.enqueues == 0 {
        return Err("the servers counted no enqueue in the phase of writes that each take a lock".into());
    }
    let lock_rest = us(retakes.client_cpu) - retakes.ops as f64 * call - retakes.counts.messages() as f64 * message;
    let lock = Cost::of(lock_rest / retakes.counts.enqueues as f64);
    Ok(ClientCosts { call: Cost::of(call), message: Cost::of(message), page, lock })
}

/// The median of each server cost over the rounds.
pub fn median_server_costs(rounds: &[ServerCosts]) -> ServerCosts {
    let of = |f: fn(&ServerCosts) -> Cost| Cost::median(&rounds.iter().map(f).collect::<Vec<_>>());
    ServerCosts {
        rpc: of(|c| c.rpc),
        lock: of(|c| c.lock),
        callback: of(|c| c.callback),
        lockahead: of(|c| c.lockahead),
        lock_alone: of(|c| c.lock_alone),
        page: of(|c| c.page),
    }
}

/// The median of each client cost over the rounds.
pub fn median_client_costs(rounds: &[ClientCosts]) -> ClientCosts {
    let of = |f: fn(&ClientCosts) -> Cost| Cost::median(&rounds.iter().map(f).collect::<Vec<_>>());
    ClientCosts { call: of(|c| c.call), message: of(|c| c.message), page: of(|c| c.page), lock: of(|c| c.lock) }
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
    /// the servers; call 4, message 10, page 0.5, lock 6 us at the client.
    fn phases() -> Phases {
        let mut large = sample(100, 100, 10, 0, 0.0, 0.0);
        large.counts.bytes_written = 100 * LARGE_WRITE_BYTES;
        // calls + messages + 255 extra pages per RPC + the copy of
        // 100 x 1020 KiB at 1 GiB/s.
        let copy_us = 100.0 * (LARGE_WRITE_BYTES - PAGE_BYTES) as f64 / (1u64 << 30) as f64 * 1e6;
        large.client_cpu = Duration::from_secs_f64((100.0 * 4.0 + 110.0 * 10.0 + 25_500.0 * 0.5 + copy_us) / 1e6);
        // At the servers: RPCs, requests, 255 extra pages per RPC at 0.25
        // us and the copy of 100 MiB into the page cache at 1 GiB/s.
        let cache_us = 100.0 * LARGE_WRITE_BYTES as f64 / (1u64 << 30) as f64 * 1e6;
        large.server_cpu = Duration::from_secs_f64((100.0 * 50.0 + 10.0 * 30.0 + 25_500.0 * 0.25 + cache_us) / 1e6);
        Phases {
            // The cache sent 7 write RPCs meanwhile.
            cached: sample(1000, 7, 0, 0, 7.0 * 50.0, 1000.0 * 4.0 + 7.0 * 10.0),
            page_rpcs: sample(1000, 1000, 2, 0, 1000.0 * 50.0 + 2.0 * 30.0, 1000.0 * 4.0 + 1002.0 * 10.0),
            large_rpcs: large,
            callbacks: sample(200, 200, 400, 200, 200.0 * 50.0 + 400.0 * 30.0 + 200.0 * 20.0, 0.0),
            // 200 enqueues, 200 cancels and a sync.
            retakes: Sample {
                counts: Counts { enqueues: 200, ..sample(0, 200, 401, 0, 0.0, 0.0).counts },
                ..sample(200, 200, 401, 0, 200.0 * 50.0 + 401.0 * 30.0, 200.0 * 4.0 + 601.0 * 10.0 + 200.0 * 6.0)
            },
            // A lock request alone costs 40 (its servers' wake-ups).
            lock_retakes: sample(400, 0, 800, 0, 800.0 * 40.0, 0.0),
            // A lock-ahead request costs 70.
            locks: sample(512, 1, 512, 0, 512.0 * 70.0 + 50.0, 0.0),
        }
    }

    fn close(cost: Cost, us: f64) -> bool {
        !cost.clamped && (cost.us - us).abs() < 1e-3
    }

    #[test]
    fn the_servers_costs_come_back_from_phases_made_of_them() {
        let c = server_costs(&phases(), 1.0).unwrap();
        assert!(close(c.lock, 30.0) && close(c.rpc, 50.0) && close(c.callback, 20.0), "{c:?}");
        assert!(close(c.lockahead, 70.0) && close(c.page, 0.25), "{c:?}");
        assert!(close(c.lock_alone, 40.0), "{c:?}");
    }

    #[test]
    fn the_clients_costs_come_back_from_phases_made_of_them() {
        let c = client_costs(&phases(), 1.0).unwrap();
        assert!(close(c.call, 4.0) && close(c.message, 10.0) && close(c.page, 0.5), "{c:?}");
        assert!(close(c.lock, 6.0), "{c:?}");
    }

    #[test]
    fn a_cost_below_zero_is_zero_and_says_so() {
        let mut p = phases();
        p.callbacks.server_cpu = Duration::from_micros(1);
        let c = server_costs(&p, 1.0).unwrap();
        assert_eq!((c.callback.us, c.callback.clamped), (0.0, true));
        assert!(c.callback.spread_us.0 < 0.0, "the round's own value is kept: {c:?}");
        // A slower copy than the one measured leaves less than nothing
        // for the pages.
        let c = client_costs(&p, 0.01).unwrap();
        assert!(c.page.clamped && c.page.us == 0.0, "{c:?}");
    }

    #[test]
    fn phases_that_cannot_tell_the_costs_apart_are_an_error() {
        let mut p = phases();
        p.retakes.counts = p.page_rpcs.counts;
        let e = server_costs(&p, 1.0).unwrap_err();
        assert!(e.contains("cannot tell lock requests from I/O RPCs"), "{e}");
        let mut p = phases();
        p.callbacks.counts.callbacks = 0;
        assert!(server_costs(&p, 1.0).unwrap_err().contains("no blocking callback"));
        let mut p = phases();
        p.locks.counts.requests = 0;
        assert!(server_costs(&p, 1.0).unwrap_err().contains("no lock-ahead request"));
        let mut p = phases();
        p.lock_retakes.counts.requests = 0;
        assert!(server_costs(&p, 1.0).unwrap_err().contains("made of them alone"));
        let mut p = phases();
        p.cached.counts = p.page_rpcs.counts;
        assert!(client_costs(&p, 1.0).unwrap_err().contains("cannot tell calls from messages"));
        let mut p = phases();
        p.retakes.counts.enqueues = 0;
        assert!(client_costs(&p, 1.0).unwrap_err().contains("no enqueue"));
    }

    #[test]
    fn the_median_of_rounds_is_taken_with_their_spread() {
        let rounds: Vec<ServerCosts> = [40.0, -5.0, 60.0, 50.0, 45.0]
            .iter()
            .map(|&rpc| ServerCosts {
                rpc: Cost::of(rpc),
                lock: Cost::of(30.0),
                callback: Cost::of(-1.0),
                lockahead: Cost::of(70.0),
                lock_alone: Cost::of(40.0),
                page: Cost::of(0.5),
            })
            .collect();
        let m = median_server_costs(&rounds);
        assert_eq!(m.rpc, Cost { us: 45.0, clamped: false, spread_us: (-5.0, 60.0) });
        assert_eq!(m.lock, Cost { us: 30.0, clamped: false, spread_us: (30.0, 30.0) });
        assert_eq!(m.callback, Cost { us: 0.0, clamped: true, spread_us: (-1.0, -1.0) });
    }
}
