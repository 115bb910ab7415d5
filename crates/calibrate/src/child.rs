//! A process calibration starts (the servers, a mount, `mpirun`), owned by
//! a guard: whichever way calibration ends (its result, an error, a
//! panic), dropping the guard stops the process and reaps it. It is asked
//! first ([`STOP_SIGNAL`], which each of them handles by shutting down in
//! order), then killed if it is still there after [`STOP_WAIT`]. And if
//! calibration itself is killed, the kernel kills the child
//! (`PR_SET_PDEATHSIG`), so that no server outlives it.
//!
//! What the child prints on standard output is read on a thread of its
//! own and handed over line by line ([`Child::line_starting`]), so that
//! waiting for a line has a deadline; standard error goes to a file the
//! caller names, shown when the child fails. While it runs, it is listed
//! for [`crate::cleanup`] to stop on an interrupt.

use std::io::BufRead;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// What a child is asked to stop with: each of lanefs's daemons stops in
/// order on it (as on ^C), and `mpirun` passes it to its ranks.
pub const STOP_SIGNAL: libc::c_int = libc::SIGINT;
/// How long a child asked to stop has before it is killed.
pub const STOP_WAIT: Duration = Duration::from_secs(3);
/// The last lines of standard error shown when a child fails.
const STDERR_LINES_SHOWN: usize = 20;

pub struct Child {
    child: std::process::Child,
    /// What it is, for messages: "the servers (lanefs up)".
    what: String,
    lines: Receiver<String>,
    stderr: PathBuf,
    exited: Option<ExitStatus>,
    /// Listed until it is stopped, for an interrupt to stop.
    _listed: crate::cleanup::Listed,
}

impl Child {
    /// Starts `command` with standard input closed, standard output read
    /// line by line and standard error written to `stderr` (a new file,
    /// owner-only, in a private directory).
    pub fn spawn(mut command: Command, what: &str, stderr: PathBuf) -> Result<Child, String> {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&stderr)
            .map_err(|e| format!("{}: cannot create {what}'s log: {e}", stderr.display()))?;
        command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(file);
        // SAFETY: between fork and exec the closure only calls prctl,
        // which is async-signal-safe, and allocates nothing.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = command.spawn().map_err(|e| format!("starting {what}: {e}"))?;
        let stdout = child.stdout.take().expect("standard output is piped");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("calibrate-child-out".into())
            .spawn(move || {
                for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            })
            .map_err(|e| format!("reading {what}'s output: {e}"))?;
        let _listed = crate::cleanup::list(crate::cleanup::Undo::Stop(child.id()));
        Ok(Child { child, what: what.to_string(), lines, stderr, exited: None, _listed })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The rest of the first line of standard output that starts with
    /// `prefix`, waiting until `deadline`; an error, with the child's
    /// standard error, if it exits or says nothing of the kind in time.
    pub fn line_starting(&mut self, prefix: &str, deadline: Instant) -> Result<String, String> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => match line.strip_prefix(prefix) {
                    Some(rest) => return Ok(rest.to_string()),
                    None => continue,
                },
                Err(RecvTimeoutError::Timeout) => {
                    return Err(format!("{} said no `{prefix}...` in time{}", self.what, self.said()))
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let status = self.child.wait().map_err(|e| format!("waiting for {}: {e}", self.what))?;
                    self.exited = Some(status);
                    return Err(format!("{} exited ({status}){}", self.what, self.said()));
                }
            }
        }
    }

    /// Waits for the child to exit on its own, until `deadline`; past it
    /// the child is stopped and that is the error.
    pub fn wait_until(&mut self, deadline: Instant) -> Result<ExitStatus, String> {
        loop {
            if let Some(status) = self.child.try_wait().map_err(|e| format!("waiting for {}: {e}", self.what))? {
                self.exited = Some(status);
                return Ok(status);
            }
            if Instant::now() >= deadline {
                self.stop();
                return Err(format!("{} did not finish in time, and was stopped{}", self.what, self.said()));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Whether the child has exited (and how), without waiting.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        if self.exited.is_none() {
            self.exited = self.child.try_wait().ok().flatten();
        }
        self.exited
    }

    /// Every line of standard output not read yet.
    pub fn rest_of_output(&mut self) -> Vec<String> {
        self.lines.try_iter().collect()
    }

    /// The end of the child's standard error, as a suffix for a message.
    pub fn said(&self) -> String {
        let text = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(STDERR_LINES_SHOWN)..].join("\n  ");
        match tail.is_empty() {
            true => String::new(),
            false => format!("; it said:\n  {tail}"),
        }
    }

    /// Asks the child to stop, kills it if it is still there after
    /// [`STOP_WAIT`], and reaps it.
    fn stop(&mut self) {
        if self.exited.is_some() {
            return;
        }
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: `pid` is our child, not reaped yet, so the id is still its.
        unsafe { libc::kill(pid, STOP_SIGNAL) };
        let asked = Instant::now();
        while asked.elapsed() < STOP_WAIT {
            if let Ok(Some(status)) = self.child.try_wait() {
                self.exited = Some(status);
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        tracing::warn!("{} did not stop within {STOP_WAIT:?} of being asked: killing it", self.what);
        let _ = self.child.kill();
        self.exited = self.child.wait().ok();
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_is_stopped_and_reaped_when_its_guard_goes() {
        let dir = tempfile::tempdir().unwrap();
        let mut command = Command::new("sh");
        command.args(["-c", "echo oops >&2; echo ready; exec sleep 60"]);
        let mut child = Child::spawn(command, "a shell", dir.path().join("err")).unwrap();
        let pid = child.pid();
        assert_eq!(child.line_starting("rea", Instant::now() + Duration::from_secs(10)).unwrap(), "dy");
        assert!(child.said().contains("oops"), "{}", child.said());
        let began = Instant::now();
        drop(child);
        assert!(began.elapsed() < STOP_WAIT, "sleep stops on SIGINT");
        // Reaped: the pid is no child of ours any more.
        // SAFETY: waitpid on a pid with WNOHANG only reads.
        let r = unsafe { libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), libc::WNOHANG) };
        assert_eq!(r, -1);
    }

    #[test]
    fn a_child_that_exits_without_the_line_is_an_error_with_what_it_said() {
        let dir = tempfile::tempdir().unwrap();
        let mut command = Command::new("sh");
        command.args(["-c", "echo something else; echo broken >&2; exit 3"]);
        let mut child = Child::spawn(command, "a shell", dir.path().join("err")).unwrap();
        let e = child.line_starting("ready", Instant::now() + Duration::from_secs(10)).unwrap_err();
        assert!(e.contains("a shell exited") && e.contains("broken"), "{e}");
    }

    #[test]
    fn a_child_past_its_deadline_is_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let mut command = Command::new("sleep");
        command.arg("60");
        let mut child = Child::spawn(command, "a sleep", dir.path().join("err")).unwrap();
        let e = child.wait_until(Instant::now() + Duration::from_millis(50)).unwrap_err();
        assert!(e.contains("did not finish in time"), "{e}");
    }
}
