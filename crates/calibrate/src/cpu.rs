//! CPU time, not wall time: what a process spent on a core, in the kernel
//! and in user space, summed over all its threads, those that ended
//! included.
//!
//! The servers' costs are CPU time because the simulator charges them on
//! service threads and cores: wall time would count the disk's waits and
//! the scheduler's, which the model has elsewhere. A process's CPU clock
//! (`clock_getcpuclockid`) counts every thread that ever ran in it, at
//! nanosecond resolution; the sum of its live threads'
//! `/proc/PID/task/TID/schedstat` would lose a thread that ends between two
//! readings (the OSS's blocking-I/O threads come and go), and
//! `/proc/PID/stat` counts in 10 ms ticks.

use std::time::Duration;

/// The CPU time of this whole process so far.
pub fn own() -> Duration {
    read_clock(libc::CLOCK_PROCESS_CPUTIME_ID).expect("this process's CPU clock is always there")
}

/// The CPU time of the calling thread so far.
pub fn this_thread() -> Duration {
    read_clock(libc::CLOCK_THREAD_CPUTIME_ID).expect("a thread's CPU clock is always there")
}

/// The CPU time so far of process `pid` (a child of this one), or why it
/// cannot be read.
pub fn of_process(pid: u32) -> Result<Duration, String> {
    let mut clock: libc::clockid_t = 0;
    // SAFETY: `clock` is a valid place for the id; the call only reads `pid`.
    let failed = unsafe { libc::clock_getcpuclockid(pid as libc::pid_t, &mut clock) };
    if failed != 0 {
        let e = std::io::Error::from_raw_os_error(failed);
        return Err(format!("the CPU clock of process {pid}: {e} (has it exited?)"));
    }
    read_clock(clock).map_err(|e| format!("reading the CPU clock of process {pid}: {e} (has it exited?)"))
}

fn read_clock(clock: libc::clockid_t) -> std::io::Result<Duration> {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid timespec to write.
    if unsafe { libc::clock_gettime(clock, &mut now) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(Duration::new(now.tv_sec as u64, now.tv_nsec as u32))
}

/// The cores online now (`sysconf(_SC_NPROCESSORS_ONLN)`), at least one.
pub fn cores_online() -> u32 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    u32::try_from(n).unwrap_or(1).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_thread_adds_cpu_time() {
        let before = own();
        let began = std::time::Instant::now();
        let mut x = 1u64;
        while own() - before < Duration::from_millis(20) && began.elapsed() < Duration::from_secs(10) {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        assert!(own() - before >= Duration::from_millis(20), "the CPU clock did not move in 10 s of spinning");
    }

    #[test]
    fn a_sleeping_child_takes_next_to_no_cpu_time() {
        let mut child = std::process::Command::new("sleep").arg("0.3").spawn().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let before = of_process(child.id()).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let slept = of_process(child.id()).unwrap() - before;
        child.wait().unwrap();
        assert!(slept < Duration::from_millis(5), "{slept:?}");
    }

    #[test]
    fn a_process_that_is_not_there_is_named() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        child.wait().unwrap();
        let e = of_process(child.id()).unwrap_err();
        assert!(e.contains(&format!("process {}", child.id())) && e.contains("exited"), "{e}");
    }
}
