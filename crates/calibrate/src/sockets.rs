//! The host's sockets, as a local lanefs cluster's clients and servers
//! use them: the one-way latency (half the median round trip of a 64-byte
//! message echoed back, between two threads) and the bandwidth of 1 MiB
//! writes streamed to a reader, over a Unix socket pair and over TCP on
//! loopback.
//!
//! And the CPU time of a hand-off: a thread that sleeps waiting for a
//! message, woken to take it. Round trips over a Unix socket pair hand
//! each message to a thread that sleeps (two context switches each); the
//! same messages streamed, the reader mostly finds the next one waiting.
//! Both threads' CPU time and switches (`getrusage(RUSAGE_THREAD)`) in
//! the two runs give two equations, `messages x message + switches x
//! switch = CPU`, solved for a message's and a switch's cost: a hand-off
//! is a switch. Measured three times, the threads pinned to one core (the
//! woken thread takes the core the other leaves), to two (each wake-up
//! finds its core idle and wakes it first), and to two each running a
//! spinning thread at `SCHED_IDLE` (each wake-up crosses to a core that
//! is busy, as when a host's every core runs something): in a virtual
//! machine the second and the third cost several times the first.

use crate::{gib_s, median};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

const MESSAGE_BYTES: usize = 64;
const CHUNK_BYTES: usize = 1 << 20;

#[derive(Clone, Debug)]
pub struct Socket {
    /// Half the median round trip.
    pub one_way: Duration,
    /// Half the 10th and the 90th percentile round trip: a thread woken
    /// from sleep takes far longer than one already running, and which a
    /// round trip meets depends on the scheduler, so the spread is shown.
    pub one_way_spread: (Duration, Duration),
    pub gib_s: f64,
}

/// Both threads' CPU time per context switch, and per message sent and
/// received.
#[derive(Clone, Copy, Debug)]
pub struct Handoff {
    pub switch_us: f64,
    pub message_us: f64,
    /// Switches per round trip, and per message streamed.
    pub switches_per_round_trip: f64,
    pub switches_per_streamed: f64,
}

/// Both threads' CPU time and context switches over a run.
#[derive(Clone, Copy, Debug, Default)]
struct Busy {
    cpu: Duration,
    switches: u64,
}

impl Busy {
    /// The calling thread's so far.
    fn this_thread() -> Busy {
        // SAFETY: an all-zero rusage is a valid value to write over.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `usage` is a valid rusage to write.
        let failed = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) } != 0;
        let switches = if failed { 0 } else { (usage.ru_nvcsw + usage.ru_nivcsw) as u64 };
        Busy { cpu: crate::cpu::this_thread(), switches }
    }

    fn since(self, before: Busy) -> Busy {
        Busy { cpu: self.cpu.saturating_sub(before.cpu), switches: self.switches.saturating_sub(before.switches) }
    }

    fn plus(self, o: Busy) -> Busy {
        Busy { cpu: self.cpu + o.cpu, switches: self.switches + o.switches }
    }
}

/// A switch's and a message's cost from a ping-pong of `round_trips`
/// (two messages each) and a stream of `streamed` messages.
fn handoff(ping_pong: Busy, round_trips: usize, stream: Busy, streamed: usize) -> Option<Handoff> {
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let a = (ping_pong.switches as f64, (2 * round_trips) as f64, us(ping_pong.cpu));
    let b = (stream.switches as f64, streamed as f64, us(stream.cpu));
    let (switch_us, message_us) = crate::costs::solve(a, b)?;
    (switch_us > 0.0 && message_us >= 0.0).then(|| Handoff {
        switch_us,
        message_us,
        switches_per_round_trip: a.0 / round_trips.max(1) as f64,
        switches_per_streamed: b.0 / streamed.max(1) as f64,
    })
}

pub fn measure_unix(round_trips: usize, bytes: u64) -> Result<Socket, String> {
    let failed = |e: std::io::Error| format!("a Unix socket pair: {e}");
    let (a, b) = UnixStream::pair().map_err(failed)?;
    let (one_way, one_way_spread, _) = latency(a, b, round_trips, None).map_err(failed)?;
    let (a, b) = UnixStream::pair().map_err(failed)?;
    let gib_s = bandwidth(a, b, bytes).map_err(failed)?;
    Ok(Socket { one_way, one_way_spread, gib_s })
}

pub fn measure_tcp(round_trips: usize, bytes: u64) -> Result<Socket, String> {
    let failed = |e: std::io::Error| format!("TCP on 127.0.0.1: {e}");
    let pair = || -> std::io::Result<(TcpStream, TcpStream)> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let a = TcpStream::connect(listener.local_addr()?)?;
        let (b, _) = listener.accept()?;
        a.set_nodelay(true)?;
        b.set_nodelay(true)?;
        Ok((a, b))
    };
    let (a, b) = pair().map_err(failed)?;
    let (one_way, one_way_spread, _) = latency(a, b, round_trips, None).map_err(failed)?;
    let (a, b) = pair().map_err(failed)?;
    let gib_s = bandwidth(a, b, bytes).map_err(failed)?;
    Ok(Socket { one_way, one_way_spread, gib_s })
}

/// A hand-off's cost on a core that is busy (both threads on one core:
/// the woken one runs when the other blocks), on an idle one (each
/// thread on a core of its own, which sleeps between messages; `None`
/// with one core), and on another core while every core is busy (each
/// thread on a core of its own, beside a thread that spins there at
/// `SCHED_IDLE`, so that no core sleeps and every wake-up crosses to a
/// core that runs something; `None` with one core), over Unix socket
/// pairs.
#[derive(Clone, Copy, Debug)]
pub struct Handoffs {
    pub busy_core: Option<Handoff>,
    pub idle_core: Option<Handoff>,
    pub other_busy_core: Option<Handoff>,
}

pub fn measure_handoffs(round_trips: usize, cores: u32) -> Result<Handoffs, String> {
    let on = |first: usize, second: usize| -> std::io::Result<Option<Handoff>> {
        on_core(first, || {
            let (a, b) = UnixStream::pair()?;
            let (_, _, ping_pong) = latency(a, b, round_trips, Some(second))?;
            let (a, b) = UnixStream::pair()?;
            let stream = small_stream(a, b, round_trips, Some(second))?;
            Ok(handoff(ping_pong, round_trips, stream, round_trips))
        })
    };
    let failed = |e: std::io::Error| format!("hand-offs over a Unix socket pair, on pinned threads: {e}");
    let busy_core = on(0, 0).map_err(failed)?;
    let idle_core = if cores > 1 { on(0, 1).map_err(failed)? } else { None };
    let other_busy_core = if cores > 1 { beside_spinners(&[0, 1], || on(0, 1)).map_err(failed)? } else { None };
    Ok(Handoffs { busy_core, idle_core, other_busy_core })
}

/// Runs `work` while a thread spins on each of `cores` at `SCHED_IDLE`
/// (it runs only when nothing else would, and is preempted at once by a
/// thread woken there): the cores never sleep, and take no CPU time from
/// the threads measured.
fn beside_spinners<T>(cores: &[usize], work: impl FnOnce() -> std::io::Result<T>) -> std::io::Result<T> {
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let spinners: Vec<_> = cores
            .iter()
            .map(|&core| {
                let stop = &stop;
                scope.spawn(move || -> std::io::Result<()> {
                    pin(Some(core))?;
                    let param = libc::sched_param { sched_priority: 0 };
                    // SAFETY: a valid policy and parameter for this thread.
                    if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                    Ok(())
                })
            })
            .collect();
        let result = {
            // Stops the spinners however `work` ends (a panic too, or the
            // scope would wait for them forever).
            let _stop = StopOnDrop(&stop);
            work()
        };
        for spinner in spinners {
            spinner.join().expect("a spinning thread")?;
        }
        result
    })
}

/// Sets its flag when dropped.
struct StopOnDrop<'a>(&'a std::sync::atomic::AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Runs `work` on a thread of its own, pinned to core `core`.
fn on_core<T: Send>(core: usize, work: impl FnOnce() -> std::io::Result<T> + Send) -> std::io::Result<T> {
    std::thread::scope(|scope| {
        scope
            .spawn(move || {
                pin(Some(core))?;
                work()
            })
            .join()
            .expect("a pinned thread")
    })
}

/// Pins the calling thread to core `core`, if one is given.
fn pin(core: Option<usize>) -> std::io::Result<()> {
    let Some(core) = core else { return Ok(()) };
    // SAFETY: an all-zero cpu_set_t is the empty set; CPU_SET writes
    // within it (`core` is below the cores online, far below its size).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(core, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Half the median round trip, half its 10th and 90th percentiles, and
/// both threads' CPU time and switches.
fn latency<S: Read + Write + Send>(
    mut a: S,
    mut b: S,
    round_trips: usize,
    echo_on: Option<usize>,
) -> std::io::Result<(Duration, (Duration, Duration), Busy)> {
    if round_trips == 0 {
        return Err(std::io::Error::other("no round trips to time"));
    }
    std::thread::scope(|scope| {
        let echo = scope.spawn(move || -> std::io::Result<Busy> {
            pin(echo_on)?;
            let mut message = [0u8; MESSAGE_BYTES];
            b.read_exact(&mut message)?;
            let before = Busy::this_thread();
            for _ in 1..round_trips {
                b.write_all(&message)?;
                b.read_exact(&mut message)?;
            }
            let busy = Busy::this_thread().since(before);
            b.write_all(&message)?;
            Ok(busy)
        });
        let mut message = [7u8; MESSAGE_BYTES];
        let mut samples = Vec::with_capacity(round_trips);
        let before = Busy::this_thread();
        for _ in 0..round_trips {
            let began = Instant::now();
            a.write_all(&message)?;
            a.read_exact(&mut message)?;
            samples.push(began.elapsed());
        }
        let busy = Busy::this_thread().since(before);
        let echoed = echo.join().expect("the echoing thread")?;
        let middle = median(&mut samples);
        let at = |fraction: f64| samples[((samples.len() - 1) as f64 * fraction) as usize] / 2;
        Ok((middle / 2, (at(0.1), at(0.9)), busy.plus(echoed)))
    })
}

/// `messages` 64-byte messages written one after another and read one by
/// one: both threads' CPU time and switches.
fn small_stream<S: Read + Write + Send>(
    mut a: S,
    mut b: S,
    messages: usize,
    reader_on: Option<usize>,
) -> std::io::Result<Busy> {
    std::thread::scope(|scope| {
        let reader = scope.spawn(move || -> std::io::Result<Busy> {
            pin(reader_on)?;
            let mut message = [0u8; MESSAGE_BYTES];
            let before = Busy::this_thread();
            for _ in 0..messages {
                b.read_exact(&mut message)?;
            }
            Ok(Busy::this_thread().since(before))
        });
        let message = [5u8; MESSAGE_BYTES];
        let before = Busy::this_thread();
        for _ in 0..messages {
            a.write_all(&message)?;
        }
        let busy = Busy::this_thread().since(before);
        Ok(busy.plus(reader.join().expect("the reading thread")?))
    })
}

fn bandwidth<S: Read + Write + Send>(mut a: S, mut b: S, bytes: u64) -> std::io::Result<f64> {
    std::thread::scope(|scope| {
        let reader = scope.spawn(move || -> std::io::Result<u64> {
            let mut buffer = vec![0u8; CHUNK_BYTES];
            let mut read = 0u64;
            while read < bytes {
                let n = b.read(&mut buffer)?;
                if n == 0 {
                    break;
                }
                read += n as u64;
            }
            Ok(read)
        });
        let chunk = vec![3u8; CHUNK_BYTES];
        let began = Instant::now();
        let mut written = 0u64;
        while written < bytes {
            a.write_all(&chunk)?;
            written += CHUNK_BYTES as u64;
        }
        let read = reader.join().expect("the reading thread")?;
        let elapsed = began.elapsed();
        if read != written {
            return Err(std::io::Error::other(format!("{read} bytes arrived of {written} sent")));
        }
        Ok(gib_s(read, elapsed))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_switch_and_a_message_come_back_from_runs_made_of_them() {
        let busy = |switches: u64, us: f64| Busy { cpu: Duration::from_secs_f64(us / 1e6), switches };
        // 1000 round trips, 2 switches each (and 3 more), at 6 us a switch
        // and 1.5 us a message; 1000 messages streamed with 40 switches.
        let ping_pong = busy(2003, 2003.0 * 6.0 + 2000.0 * 1.5);
        let stream = busy(40, 40.0 * 6.0 + 1000.0 * 1.5);
        let h = handoff(ping_pong, 1000, stream, 1000).unwrap();
        assert!((h.switch_us - 6.0).abs() < 1e-6 && (h.message_us - 1.5).abs() < 1e-6, "{h:?}");
        assert!((h.switches_per_round_trip - 2.003).abs() < 1e-9 && (h.switches_per_streamed - 0.04).abs() < 1e-9);
        // A stream that switched as often as the ping-pong tells nothing.
        assert!(handoff(ping_pong, 1000, busy(2000, 14000.0), 2000).is_none());
    }

    #[test]
    fn hand_offs_on_one_core_measure() {
        let h = measure_handoffs(2000, 1).unwrap();
        assert!(h.idle_core.is_none(), "one core has no idle other: {h:?}");
        // A hand-off whose runs could not be told apart is None, not a
        // figure; where there is one, it is positive.
        assert!(h.busy_core.is_none_or(|b| b.switch_us > 0.0 && b.switches_per_round_trip >= 1.0), "{h:?}");
        assert!(h.other_busy_core.is_none(), "one core has no other: {h:?}");
    }

    #[test]
    fn hand_offs_beside_spinners_measure_and_the_spinners_stop() {
        if crate::cpu::cores_online() < 2 {
            eprintln!("skipped: one core");
            return;
        }
        // Returns at all: the spinners stopped once the measurement ended.
        let h = measure_handoffs(2000, 2).unwrap();
        assert!(h.other_busy_core.is_none_or(|b| b.switch_us > 0.0 && b.switches_per_round_trip >= 1.0), "{h:?}");
    }
}
