//! `lanefs lock-script`: drive one OST's lock server with raw lock requests
//! from named clients, and print every decision it takes as one JSON line.
//!
//! Why: how many locks a workload takes and how many callbacks it causes is
//! decided by the server's conflict rules and expansion policy (`ldlm.md`
//! §1, §2 and §4). Those rules are easiest to understand by trying them: a
//! script sets up granted and waiting locks on purpose, and the output is the
//! server's own event stream ([`LockServer::poll_event`]), so what the user
//! sees is exactly what the policy does, not a model of it.
//!
//! What it is not: a client. Scripted clients never cancel on their own,
//! never match cached locks, never do I/O and never answer a callback unless
//! the script says so; the replies the server sends them are dropped.
//!
//! Shape: [`run`] reads one line at a time, parses it into a typed [`Op`]
//! (serde; unknown fields are refused), validates it against what the script
//! has seen so far, applies it to the server with the script's virtual clock,
//! checks the server's invariants (after every line while it holds at most
//! [`INVARIANTS_EVERY_LINE_LOCKS_MAX`] locks, and at the end), and writes the
//! events it produced. The first bad line stops the run with an error naming
//! its line number; the events of the lines before it are already written.

use anyhow::{anyhow, bail, Context, Result};
use lanefs_core::extent::{Extent, EOF};
use lanefs_core::ldlm::server::{LockEvent, LockServer, LockServerConfig, CALLBACK_TIMEOUT_DEFAULT};
use lanefs_core::ldlm::{EnqueueFlags, GroupId, LockMode, LockRequest};
use lanefs_core::units::{ClientId, Duration, Instant, LockHandle, ObjectId, Xid, PAGE_SIZE};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::Path;

/// Run the script at `path` (`-`: standard input), writing events to stdout.
pub fn run_path(path: &Path) -> Result<()> {
    let mut output = BufWriter::new(io::stdout().lock());
    if path == Path::new("-") {
        return run(io::stdin().lock(), &mut output);
    }
    let file = File::open(path).with_context(|| format!("cannot open script {}", path.display()))?;
    run(BufReader::new(file), &mut output)
}

/// Run a script read from `input`, writing one JSON line per server event to
/// `output`. On a bad line, the events of the lines before it are written
/// (and flushed) before the error is returned.
pub fn run(input: impl BufRead, output: &mut impl Write) -> Result<()> {
    let mut script = Script::new();
    let result = run_lines(&mut script, input, output);
    let flushed = output.flush().context("writing the events");
    result.and(flushed)
}

/// Up to this many locks, the server's invariants are checked after every
/// line; beyond it only at the end, because the check compares every pair of
/// granted locks and would make long lockahead scripts quadratic per line.
const INVARIANTS_EVERY_LINE_LOCKS_MAX: usize = 256;

fn run_lines(script: &mut Script, input: impl BufRead, output: &mut impl Write) -> Result<()> {
    for (index, line) in input.lines().enumerate() {
        let number = index + 1;
        let line = line.with_context(|| format!("line {number}: cannot read the script"))?;
        let text = line.trim();
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        // The untrimmed line, so that JSON error columns match the file.
        let op = parse_op(&line).with_context(|| format!("line {number}"))?;
        script.apply(op).with_context(|| format!("line {number}"))?;
        if script.server.lock_count() <= INVARIANTS_EVERY_LINE_LOCKS_MAX {
            script.server.check_invariants();
        }
        script.write_events(output).context("writing the events")?;
    }
    script.server.check_invariants();
    Ok(())
}

// ----- input ------------------------------------------------------------

const OPS_EXPECTED: &str = "expected enqueue, cancel, advance, reconnect or config";
/// How much of a line that is not a JSON object an error message quotes.
const FOUND_SHOWN_CHARS_MAX: usize = 60;
const OP_NAMES: [&str; 5] = ["enqueue", "cancel", "advance", "reconnect", "config"];

/// One script line. Field types are read by the `field` deserializers so that
/// a type error names the field it is about.
#[derive(Debug, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase", deny_unknown_fields)]
enum Op {
    /// Settings of the lock server; only before any other op.
    Config {
        #[serde(deserialize_with = "field::callback_timeout_s")]
        callback_timeout_s: f64,
    },
    Enqueue {
        #[serde(deserialize_with = "field::client")]
        client: String,
        #[serde(deserialize_with = "field::object")]
        object: u64,
        #[serde(deserialize_with = "field::mode")]
        mode: String,
        #[serde(deserialize_with = "field::start")]
        start: u64,
        #[serde(deserialize_with = "field::end")]
        end: u64,
        #[serde(default, deserialize_with = "field::gid")]
        gid: Option<u64>,
        #[serde(default, deserialize_with = "field::no_expand")]
        no_expand: bool,
        #[serde(default, deserialize_with = "field::speculative")]
        speculative: bool,
    },
    Cancel {
        #[serde(deserialize_with = "field::client")]
        client: String,
        #[serde(deserialize_with = "field::lock")]
        lock: u64,
    },
    /// Move virtual time forward; callback deadlines passed on the way evict.
    Advance {
        #[serde(deserialize_with = "field::seconds")]
        seconds: f64,
    },
    /// An evicted client connects again and may enqueue again.
    Reconnect {
        #[serde(deserialize_with = "field::client")]
        client: String,
    },
}

/// Parse one non-blank, non-comment line. The op name is checked by hand
/// first only to give a better message than serde's for a misspelt op.
fn parse_op(text: &str) -> Result<Op> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| anyhow!(json_error(&e)))?;
    let Some(fields) = value.as_object() else {
        let mut found: String = value.to_string().chars().take(FOUND_SHOWN_CHARS_MAX + 1).collect();
        if found.chars().count() > FOUND_SHOWN_CHARS_MAX {
            found = found.chars().take(FOUND_SHOWN_CHARS_MAX).chain("...".chars()).collect();
        }
        bail!("expected a JSON object such as {{\"op\":\"advance\",\"seconds\":1}}, found {found}");
    };
    let name = match fields.get("op") {
        Some(serde_json::Value::String(name)) if OP_NAMES.contains(&name.as_str()) => name.clone(),
        Some(serde_json::Value::String(name)) => bail!("unknown op {name:?}; {OPS_EXPECTED}"),
        Some(other) => bail!("\"op\" is {other}, not a string; {OPS_EXPECTED}"),
        None => bail!("missing \"op\"; {OPS_EXPECTED}"),
    };
    serde_json::from_value(value).map_err(|e| anyhow!("{name}: {e}"))
}

/// serde_json's message without its "at line 1 column N" (the script's line
/// number is added by the caller), with the column kept.
fn json_error(e: &serde_json::Error) -> String {
    let message = e.to_string();
    let position = format!(" at line {} column {}", e.line(), e.column());
    let message = message.strip_suffix(&position).unwrap_or(&message);
    format!("invalid JSON at column {}: {message}", e.column())
}

/// Deserializers that say which field they read, so that a type error reads
/// `expected "start" as a byte offset` rather than `expected u64`.
mod field {
    use serde::de::{self, Deserializer, Unexpected, Visitor};
    use std::fmt;

    pub fn client<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        d.deserialize_any(Text("client", "a client name"))
    }
    pub fn mode<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        d.deserialize_any(Text("mode", "PR, PW or GROUP"))
    }
    pub fn object<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        d.deserialize_any(Integer("object", "an object number"))
    }
    pub fn start<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        d.deserialize_any(Integer("start", "a byte offset"))
    }
    pub fn end<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        d.deserialize_any(End)
    }
    pub fn lock<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        d.deserialize_any(Integer("lock", "a lock number from a granted or waiting event"))
    }
    pub fn gid<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        d.deserialize_any(Integer("gid", "a group id")).map(Some)
    }
    pub fn no_expand<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
        d.deserialize_any(Flag("no_expand"))
    }
    pub fn speculative<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
        d.deserialize_any(Flag("speculative"))
    }
    pub fn seconds<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        d.deserialize_any(Seconds("seconds"))
    }
    pub fn callback_timeout_s<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        d.deserialize_any(Seconds("callback_timeout_s"))
    }

    struct Text(&'static str, &'static str);

    impl Visitor<'_> for Text {
        type Value = String;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            write!(f, "{:?} as a string: {}", self.0, self.1)
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
            Ok(v.to_owned())
        }
    }

    /// An unsigned 64-bit integer (JSON allows larger or fractional numbers).
    struct Integer(&'static str, &'static str);

    impl Visitor<'_> for Integer {
        type Value = u64;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            write!(f, "{:?} as {}: an integer from 0 to {}", self.0, self.1, u64::MAX)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
            Ok(v)
        }
    }

    /// `"end"`: an inclusive byte offset, or `"EOF"` for [`super::EOF`].
    struct End;

    impl Visitor<'_> for End {
        type Value = u64;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            write!(f, "\"end\" as an inclusive byte offset from 0 to {}, or \"EOF\"", u64::MAX)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
            Ok(v)
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<u64, E> {
            if v == "EOF" {
                Ok(super::EOF)
            } else {
                Err(E::invalid_value(Unexpected::Str(v), &self))
            }
        }
    }

    struct Flag(&'static str);

    impl Visitor<'_> for Flag {
        type Value = bool;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            write!(f, "{:?} as true or false", self.0)
        }
        fn visit_bool<E: de::Error>(self, v: bool) -> Result<bool, E> {
            Ok(v)
        }
    }

    /// A non-negative, finite number of seconds, possibly fractional.
    struct Seconds(&'static str);

    impl Visitor<'_> for Seconds {
        type Value = f64;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            write!(f, "{:?} as a number of seconds, 0 or more", self.0)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
            Ok(v as f64)
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
            if v.is_finite() && v >= 0.0 {
                Ok(v)
            } else {
                Err(E::invalid_value(Unexpected::Float(v), &self))
            }
        }
    }
}

/// Seconds from a script as a nanosecond [`Duration`].
fn duration_from_secs(seconds: f64, name: &str) -> Result<Duration> {
    let ns = std::time::Duration::try_from_secs_f64(seconds)
        .ok()
        .and_then(|d| u64::try_from(d.as_nanos()).ok())
        .ok_or_else(|| {
            anyhow!("{name:?} {seconds:e} is too large: virtual time ends after {} s", u64::MAX / 1_000_000_000)
        })?;
    Ok(Duration::from_ns(ns))
}

/// The largest file offset (Linux's `MAX_LFS_FILESIZE`, as `loff_t` is signed).
const OFFSET_MAX: u64 = i64::MAX as u64;

/// The lock request of an enqueue line, or what is wrong with it.
fn lock_request(mode: &str, gid: Option<u64>, start: u64, end: u64, flags: EnqueueFlags) -> Result<LockRequest> {
    let mode = match (mode, gid) {
        ("PR", None) => LockMode::ProtectedRead,
        ("PW", None) => LockMode::ProtectedWrite,
        ("GROUP", Some(gid)) => LockMode::Group(GroupId(gid)),
        ("GROUP", None) => bail!("GROUP mode needs \"gid\", the group id (e.g. \"gid\":7)"),
        ("PR" | "PW", Some(_)) => bail!("\"gid\" is only for GROUP locks: drop it or use \"mode\":\"GROUP\""),
        (other, _) => bail!("mode {other:?}: use PR, PW or GROUP"),
    };
    if start > end {
        bail!("\"start\" {start} is greater than \"end\" {end}");
    }
    // Offsets are checked as Lustre's client makes them: within a file's
    // size limit and rounded out to whole pages (`osc_enqueue_base`). The
    // server's policy relies on both.
    if start > OFFSET_MAX {
        bail!("\"start\" {start} is past the largest file offset {OFFSET_MAX} (2^63 - 1)");
    }
    if end != EOF && end > OFFSET_MAX {
        bail!("\"end\" {end} is past the largest file offset {OFFSET_MAX} (2^63 - 1); use \"EOF\" for the end of the object");
    }
    // Bit masks rather than `is_multiple_of`, which is newer than the
    // workspace's rust-version; PAGE_SIZE is a power of two.
    let page_mask = PAGE_SIZE - 1;
    if start & page_mask != 0 {
        let down = start & !page_mask;
        bail!("\"start\" {start} is not on a {PAGE_SIZE}-byte page boundary: locks cover whole pages; use {down}");
    }
    if end != EOF && (end + 1) & page_mask != 0 {
        let up = end | page_mask;
        bail!("\"end\" {end} is not the last byte of a {PAGE_SIZE}-byte page: locks cover whole pages; use {up}");
    }
    let extent = Extent::new(start, end);
    if mode.is_group() && extent != Extent::WHOLE {
        // Lustre's client always asks for [0, EOF] (ldlm.md §1), and the
        // server and its policy rely on it.
        bail!("a GROUP lock covers the whole object: use \"start\":0,\"end\":\"EOF\"");
    }
    Ok(LockRequest { mode, extent, flags })
}

// ----- the script's state -------------------------------------------------

/// One OST's lock server, its virtual clock, and the names the script uses.
struct Script {
    server: LockServer,
    now: Instant,
    /// Client names by `ClientId`, in order of first appearance.
    client_names: Vec<String>,
    clients: HashMap<String, ClientId>,
    xid_next: u64,
    /// Locks granted or waiting, and their owners, as the events told us:
    /// a cancel must name one of these.
    locks_live: BTreeMap<LockHandle, ClientId>,
    config_seen: bool,
    ops_seen: bool,
}

impl Script {
    fn new() -> Self {
        Script {
            server: Self::server(LockServerConfig {
                callback_timeout: CALLBACK_TIMEOUT_DEFAULT,
                ..LockServerConfig::default()
            }),
            now: Instant::ZERO,
            client_names: Vec::new(),
            clients: HashMap::new(),
            xid_next: 1,
            locks_live: BTreeMap::new(),
            config_seen: false,
            ops_seen: false,
        }
    }

    fn server(config: LockServerConfig) -> LockServer {
        let mut server = LockServer::new(config);
        server.record_events();
        server
    }

    /// Validate `op` against the script so far, then apply it. Nothing
    /// reaches the server unless the whole line is valid.
    fn apply(&mut self, op: Op) -> Result<()> {
        let is_config = matches!(op, Op::Config { .. });
        match op {
            Op::Config { callback_timeout_s } => self.configure(callback_timeout_s)?,
            Op::Enqueue { client, object, mode, start, end, gid, no_expand, speculative } => {
                let request = lock_request(&mode, gid, start, end, EnqueueFlags { no_expand, speculative })?;
                let client = self.client_or_new(client)?;
                let xid = Xid(self.xid_next);
                self.xid_next += 1;
                self.server.handle_enqueue(self.now, client, xid, ObjectId(object), request);
            }
            Op::Cancel { client, lock } => {
                let client = self.client_known(&client, "cancel")?;
                let lock = self.lock_of(client, LockHandle(lock))?;
                self.server.handle_cancel(self.now, client, lock);
            }
            Op::Advance { seconds } => self.advance(duration_from_secs(seconds, "seconds")?)?,
            Op::Reconnect { client } => {
                let client = self.client_known(&client, "reconnect")?;
                self.server.handle_connect(client);
            }
        }
        self.ops_seen |= !is_config;
        Ok(())
    }

    fn configure(&mut self, callback_timeout_s: f64) -> Result<()> {
        if self.ops_seen {
            bail!("config must come before any other op: move this line to the top of the script");
        }
        if self.config_seen {
            bail!("config given twice: merge the two lines");
        }
        let callback_timeout = duration_from_secs(callback_timeout_s, "callback_timeout_s")?;
        if callback_timeout == Duration::ZERO {
            bail!("\"callback_timeout_s\" must be greater than 0 (Lustre's default is 100)");
        }
        self.config_seen = true;
        self.server = Self::server(LockServerConfig { callback_timeout, ..LockServerConfig::default() });
        Ok(())
    }

    /// Move the clock to `now + by`, stopping at every callback deadline on
    /// the way so that each eviction happens at its own deadline (and the
    /// callbacks it causes get theirs from that moment).
    fn advance(&mut self, by: Duration) -> Result<()> {
        let target =
            self.now.as_ns().checked_add(by.as_ns()).map(Instant).ok_or_else(|| {
                anyhow!("\"seconds\": virtual time would pass its end ({} s)", u64::MAX / 1_000_000_000)
            })?;
        // Each pass evicts at least one client (the one whose deadline it
        // stops at), and an evicted client gets no new locks: one pass per
        // client at most.
        for _ in 0..=self.client_names.len() {
            let Some(deadline) = self.server.poll_timeout().filter(|d| *d <= target) else { break };
            self.now = self.now.max(deadline);
            self.server.handle_timeout(self.now);
        }
        assert!(
            !matches!(self.server.poll_timeout(), Some(d) if d <= target),
            "a deadline before {target} was not handled"
        );
        self.now = target;
        Ok(())
    }

    fn client_or_new(&mut self, name: String) -> Result<ClientId> {
        if let Some(id) = self.clients.get(&name) {
            return Ok(*id);
        }
        let id = ClientId(u32::try_from(self.client_names.len()).context("too many clients (the limit is 2^32)")?);
        self.clients.insert(name.clone(), id);
        self.client_names.push(name);
        Ok(id)
    }

    fn client_known(&self, name: &str, op: &str) -> Result<ClientId> {
        if let Some(id) = self.clients.get(name) {
            return Ok(*id);
        }
        let known = if self.client_names.is_empty() {
            "no client has enqueued yet".to_owned()
        } else {
            format!("clients so far: {}", self.client_names.join(", "))
        };
        bail!("{op} by client {name:?}, which has not enqueued anything ({known})")
    }

    /// `lock`, if `client` holds it or waits for it.
    fn lock_of(&self, client: ClientId, lock: LockHandle) -> Result<LockHandle> {
        let name = &self.client_names[client.0 as usize];
        match self.locks_live.get(&lock) {
            Some(owner) if *owner == client => Ok(lock),
            Some(owner) => bail!("lock {} belongs to {:?}, not {name:?}", lock.0, self.client_names[owner.0 as usize]),
            None => {
                let held: Vec<String> =
                    self.locks_live.iter().filter(|(_, c)| **c == client).map(|(h, _)| h.0.to_string()).collect();
                let held = if held.is_empty() { "none".to_owned() } else { held.join(", ") };
                bail!("{name:?} holds no lock {} (granted or waiting locks of {name:?}: {held})", lock.0)
            }
        }
    }

    /// Write the events of the last op, and drop the messages the server
    /// queued for the clients (scripted clients act only when told to).
    fn write_events(&mut self, output: &mut impl Write) -> io::Result<()> {
        while let Some(event) = self.server.poll_event() {
            self.track(&event);
            let line = serde_json::to_string(&self.event_line(&event)).expect("events serialize");
            writeln!(output, "{line}")?;
        }
        while self.server.poll_transmit().is_some() {}
        Ok(())
    }

    fn track(&mut self, event: &LockEvent) {
        match *event {
            LockEvent::Granted { client, lock, .. } | LockEvent::Waiting { client, lock, .. } => {
                self.locks_live.insert(lock, client);
            }
            LockEvent::Cancelled { lock, .. } => {
                self.locks_live.remove(&lock);
            }
            LockEvent::Evicted { client } => self.locks_live.retain(|_, c| *c != client),
            LockEvent::BlockingCallback { .. } | LockEvent::Refused { .. } => {}
        }
    }

    fn event_line(&self, event: &LockEvent) -> EventLine<'_> {
        let name = |client: ClientId| self.client_names[client.0 as usize].as_str();
        match *event {
            LockEvent::Granted { client, lock, object, mode, extent } => {
                EventLine::Granted(LockLine::new(name(client), lock, object, mode, extent))
            }
            LockEvent::Waiting { client, lock, object, mode, extent } => {
                EventLine::Waiting(LockLine::new(name(client), lock, object, mode, extent))
            }
            LockEvent::BlockingCallback { client, lock } => {
                EventLine::BlockingCallback { client: name(client), lock: lock.0 }
            }
            LockEvent::Refused { client, object, extent } => {
                EventLine::Refused { client: name(client), object: object.0, start: extent.start, end: extent.end }
            }
            LockEvent::Cancelled { client, lock } => EventLine::Cancelled { client: name(client), lock: lock.0 },
            LockEvent::Evicted { client } => EventLine::Evicted { client: name(client) },
        }
    }
}

// ----- output -------------------------------------------------------------

/// One output line; serde writes the `event` tag first, then the fields in
/// declaration order.
#[derive(Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
enum EventLine<'a> {
    Granted(LockLine<'a>),
    Waiting(LockLine<'a>),
    BlockingCallback { client: &'a str, lock: u64 },
    Refused { client: &'a str, object: u64, start: u64, end: u64 },
    Cancelled { client: &'a str, lock: u64 },
    Evicted { client: &'a str },
}

#[derive(Serialize)]
struct LockLine<'a> {
    client: &'a str,
    lock: u64,
    object: u64,
    mode: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    gid: Option<u64>,
    start: u64,
    end: u64,
}

impl<'a> LockLine<'a> {
    fn new(client: &'a str, lock: LockHandle, object: ObjectId, mode: LockMode, extent: Extent) -> Self {
        let gid = match mode {
            LockMode::Group(gid) => Some(gid.0),
            LockMode::ProtectedRead | LockMode::ProtectedWrite => None,
        };
        LockLine {
            client,
            lock: lock.0,
            object: object.0,
            mode: mode.name(),
            gid,
            start: extent.start,
            end: extent.end,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run `script` in-process: (stdout, error message with its context).
    fn run_str(script: &str) -> (String, Option<String>) {
        let mut output = Vec::new();
        let result = run(script.as_bytes(), &mut output);
        (String::from_utf8(output).unwrap(), result.err().map(|e| format!("{e:#}")))
    }

    #[test]
    fn events_of_earlier_lines_are_written_before_the_error() {
        let script = "{\"op\":\"enqueue\",\"client\":\"a\",\"object\":0,\"mode\":\"PW\",\"start\":0,\"end\":4095}\n\
                      {\"op\":\"cancel\",\"client\":\"a\",\"lock\":9}\n";
        let (output, error) = run_str(script);
        assert_eq!(
            output,
            "{\"event\":\"granted\",\"client\":\"a\",\"lock\":1,\"object\":0,\"mode\":\"PW\",\"start\":0,\"end\":18446744073709551615}\n"
        );
        assert_eq!(error.unwrap(), "line 2: \"a\" holds no lock 9 (granted or waiting locks of \"a\": 1)");
    }

    #[test]
    fn type_errors_name_their_field() {
        let (_, error) =
            run_str("{\"op\":\"enqueue\",\"client\":\"a\",\"object\":0,\"mode\":\"PW\",\"start\":-1,\"end\":4095}");
        let error = error.unwrap();
        assert!(error.starts_with("line 1: enqueue: invalid type: integer `-1`, expected \"start\" as a byte offset"));
        let (_, error) = run_str("{\"op\":\"advance\",\"seconds\":\"soon\"}");
        assert!(error.unwrap().contains("expected \"seconds\" as a number of seconds"));
        let (_, error) =
            run_str("{\"op\":\"enqueue\",\"client\":\"a\",\"object\":0,\"mode\":\"PW\",\"start\":0,\"end\":\"eof\"}");
        assert!(error.unwrap().contains("invalid value: string \"eof\", expected \"end\" as an inclusive byte offset"));
    }

    #[test]
    fn json_errors_keep_the_column_and_drop_serdes_line() {
        let (_, error) = run_str("\n{\"op\":\"advance\",");
        assert_eq!(error.unwrap(), "line 2: invalid JSON at column 16: EOF while parsing a value");
    }

    #[test]
    fn advance_evicts_at_each_deadline_on_the_way() {
        // a is evicted at 5 s; b, granted then and called back at once, at 10 s.
        let script = r#"{"op":"config","callback_timeout_s":5}
{"op":"enqueue","client":"a","object":0,"mode":"PW","start":0,"end":4095}
{"op":"enqueue","client":"b","object":0,"mode":"PW","start":0,"end":4095}
{"op":"enqueue","client":"c","object":0,"mode":"PW","start":0,"end":4095}
{"op":"advance","seconds":12}
"#;
        let (output, error) = run_str(script);
        assert_eq!(error, None);
        let evictions: Vec<&str> = output.lines().filter(|l| l.contains("evicted")).collect();
        assert_eq!(evictions, ["{\"event\":\"evicted\",\"client\":\"a\"}", "{\"event\":\"evicted\",\"client\":\"b\"}"]);
    }

    /// Random valid scripts (a fixed xorshift sequence, so failures replay):
    /// the server's invariants hold after every line and nothing panics.
    #[test]
    fn random_valid_scripts_keep_the_server_invariants() {
        const SEEDS: u64 = 300;
        const OPS_PER_SCRIPT: usize = 60;
        for seed in 1..=SEEDS {
            let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let mut draw = |n: u64| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state % n
            };
            let mut script = Script::new();
            for _ in 0..OPS_PER_SCRIPT {
                let client = ["a", "b", "c", "d"][draw(4) as usize].to_owned();
                let op = match draw(10) {
                    0..=4 => {
                        let unit = if draw(2) == 0 { 1 << 20 } else { 1 << 16 };
                        let start = draw(16) * unit;
                        let end = if draw(6) == 0 { EOF } else { start + (1 + draw(8)) * unit - 1 };
                        let (mode, gid, start, end) = match draw(8) {
                            0 => ("GROUP", Some(1 + draw(2)), 0, EOF),
                            1..=3 => ("PR", None, start, end),
                            _ => ("PW", None, start, end),
                        };
                        let (no_expand, speculative) = (draw(3) == 0, draw(3) == 0);
                        let object = draw(2);
                        Op::Enqueue { client, object, mode: mode.to_owned(), start, end, gid, no_expand, speculative }
                    }
                    5..=7 => {
                        let live: Vec<(LockHandle, ClientId)> =
                            script.locks_live.iter().map(|(h, c)| (*h, *c)).collect();
                        if live.is_empty() {
                            continue;
                        }
                        let (lock, owner) = live[draw(live.len() as u64) as usize];
                        Op::Cancel { client: script.client_names[owner.0 as usize].clone(), lock: lock.0 }
                    }
                    8 => Op::Advance { seconds: draw(150) as f64 },
                    _ if script.clients.contains_key(&client) => Op::Reconnect { client },
                    _ => continue,
                };
                script.apply(op).unwrap_or_else(|e| panic!("seed {seed}: {e:#}"));
                script.server.check_invariants();
                script.write_events(&mut io::sink()).unwrap();
            }
        }
    }
}
