//! The bounds of a server: connections, descriptors, queues, requests in
//! flight and timeouts, with their values, why, and where each is enforced.
//!
//! A server must stay up whatever its peers do: connect by the thousand,
//! send nothing, send half a handshake, ask for large reads and never read
//! the replies. Every resource a peer can make a server spend has a bound
//! here, and going past it costs that peer its connection, never the
//! server its memory, its descriptors or its CPU.
//!
//! | limit | value | why | enforced in |
//! | --- | --- | --- | --- |
//! | descriptors | the hard `RLIMIT_NOFILE` | servers raise their soft limit to the hard one at start ([`raise_descriptor_limit`]); `LocalCluster` gives its OSS three quarters, its MDS the rest | `oss::start`, `mds_server::start_with`, `LocalCluster::start` |
//! | connections per server | from the descriptors ([`DescriptorBudget`]: 1 per TCP connection, 3 per Unix one, after [`DESCRIPTORS_RESERVED`] = 32, one per OST and the object files), at most [`CONNECTIONS_MAX_CEILING`] = 65,536, or `--connections-max` | past it a connection is told `Refused` with the cap and how to raise it, never left to hit `EMFILE` | `transport::spawn_accept` |
//! | object files open per OST | a quarter of the descriptors left, between [`OPEN_FILES_MIN`] = 4 and [`OPEN_FILES_MAX`] = 256 | connections and object files leave room for each other | `FileStore` (an `EMFILE` closes the cache and retries once) |
//! | connections waiting to be accepted | [`LISTEN_BACKLOG`] = 1,024 | a crowd connecting at once is queued by the kernel, not dropped | `transport::Listener::bind` |
//! | refusals in progress | [`REFUSALS_MAX`] = 32, each at most [`REFUSAL_LINGER`] = 200 ms | a refused connection holds a descriptor while it is told why; past them one is closed without a word | `transport::spawn_accept` |
//! | accept back-off | [`ACCEPT_BACKOFF_MIN`] = 10 ms doubling to [`ACCEPT_BACKOFF_MAX`] = 1 s | `accept` failing with `EMFILE` would fail again at once: retrying at once spins a core | `transport::spawn_accept` |
//! | connections of one local user | [`LOCAL_USER_CONNECTIONS_MAX`] = 64 per uid, on each server | any local user may connect to a Unix socket (as itself, see [`crate::auth`]): one must not take every connection from the others and the mounts; a command needs 1 to the MDS and 1 per OSS | `oss`, `mds_server` ([`UserConnections`]) |
//! | handshake | [`HANDSHAKE_TIMEOUT_DEFAULT`] = 3 s, TLS and `Hello` together | a peer that sends nothing, or half a `Hello`, holds a descriptor for nothing; a lanefs peer is through in milliseconds | `transport::spawn_accept` ([`crate::hello`]) |
//! | handshakes in flight | [`HANDSHAKES_MAX`] = 256, at most a quarter of the descriptors left after the reserve ([`DescriptorBudget`]); when full, new connections wait in the backlog until a handshake ends or one has run [`HANDSHAKE_DISPLACE_AGE`] = 100 ms, which a newcomer then displaces (the busiest source's oldest, peers that sent nothing first; a node that spoke is never displaced, only timed out) | connections that have proved no key never take the places of those that have: they count against the connection cap only once through; a burst of real peers (through in milliseconds) waits its turn instead of being closed | `transport::spawn_accept` ([`crate::hello`]) |
//! | handshakes from one IP address, or one local user | [`HANDSHAKES_PER_SOURCE_MAX`] = 64; past it a new connection from that source is closed at once | one host, or one user on a Unix socket (any may connect, as itself), cannot fill the pool for all; 64 is a large node's ranks connecting at once; nodes on a Unix socket (root, the servers' user) are not bounded per source | `transport::spawn_accept` ([`crate::hello`]) |
//! | OST registrations at the MDS | one per OST index of the file system; decided one at a time, a live holder probed with a `Ping` answered within `mds_server::REGISTRATION_PROBE_TIMEOUT` = 2 s | a second OSS (or a registration naming a dead address) never takes over a live OSS's index, and a dead holder never keeps one: the registry is bounded by the OST count, and a probe holds a registration up at most 2 s per holder | `mds_server::register` |
//! | idle | [`IDLE_TIMEOUT_DEFAULT`] = 150 s (`--idle-timeout`) | a connection silent that long has a dead or stuck peer (Lustre's ping evictor: 1.5 x `obd_timeout`); clients ping every [`PING_INTERVAL_DEFAULT`] = 25 s | `oss`, `mds_server` (each frame must arrive within it) |
//! | bytes queued to one peer | soft [`QUEUE_BYTES_SOFT`] = 8 MiB, hard [`QUEUE_BYTES_MAX`] = 96 MiB | replies a peer does not read: over the soft limit the server stops reading that peer's requests; over the hard one it closes the connection | [`crate::outbox::Outbox`] |
//! | messages queued to one peer | soft [`QUEUE_MESSAGES_SOFT`] = 1,024, hard [`QUEUE_MESSAGES_MAX`] = 16,384 | as bytes, for floods of small replies | [`crate::outbox::Outbox`] |
//! | a stuck writer | [`WRITE_STALL_TIMEOUT_DEFAULT`] = 100 s | a peer that reads nothing for that long is disconnected and its queue freed | `writer` |
//! | requests in flight per connection | [`REQUESTS_IN_FLIGHT_MAX`] = 64 messages, [`REQUEST_BYTES_IN_FLIGHT_MAX`] = 16 MiB | the reader waits before handing an OST thread more; a read counts the bytes of its reply | `oss` (`RequestBudget`) |
//! | one read | `codec::BULK_BYTES_MAX` = 64 MiB | its reply could never be sent; the OST would allocate it | `oss` (answered `IoError::Invalid` at once) |
//! | file locks at the MDS | `flock::LOCKS_MAX` = 65,536 granted, `WAITERS_MAX` = 4,096 waiting; per uid `LOCKS_PER_UID_MAX` = 4,096 and `WAITERS_PER_UID_MAX` = 256; per client `LOCKS_PER_CLIENT_MAX` = 16,384 and `WAITERS_PER_CLIENT_MAX` = 1,024 | one user, or one client node, fills only its own share; past one a request is answered `ENOLCK` naming it | `lanefs_proto::flock::FlockTable::set` |
//! | extent locks of one client on one OST | `lanefs_core::ldlm::server::LOCKS_PER_CLIENT_MAX` = 65,536, granted and waiting | past it a request is answered `TooMany` (the program sees `ENOLCK`; a lockahead request is refused as on a conflict): one node fills only its own share of an OST's lock table (Lustre bounds its lock memory with pools that ask every client to shrink its LRU instead) | `lanefs_core::ldlm::server::LockServer::handle_enqueue` |
//! | requests kept during an OST's recovery | `lanefs_core::ost::recovery::DEFERRED_PER_CLIENT_MAX` = 4,096 per client, `DEFERRED_MAX` = 65,536 in all | a client past its share is evicted; with the whole queue full, the client holding most of it is: one client's flood never evicts another | `lanefs_core::ost::recovery::Recovery::hog` |
//! | lock requests deferred to the end of the MDS's recovery grace | `flock::WAITERS_MAX` = 4,096, and the waiters' shares per client and per uid | a client cannot fill the queue during a grace for everyone | `mds_server::flock` |
//!
//! Together: one connection costs an OSS at most about
//! `QUEUE_BYTES_SOFT + REQUEST_BYTES_IN_FLIGHT_MAX` plus one maximal frame
//! (`codec::BULK_BYTES_MAX`) whatever its peer does (a reader that stops in
//! time never reaches the hard limit; only messages the peer did not ask
//! for, such as lock callbacks, can), and the descriptors give the number
//! of connections. The OST threads never wait for a peer: they queue and
//! go on.
//!
//! Where lanefs departs from Lustre: Lustre's ping evictor evicts a client
//! (its locks and its export) after `1.5 x obd_timeout` without a ping; a
//! lanefs server closes the connection, and the OST's locks of that client
//! go when its callback timeout evicts it. Lustre bounds requests through
//! the client (`max_rpcs_in_flight`) and its service threads; lanefs also
//! bounds them per connection at the server, since it trusts no client.
//! Lustre has no cap on a server's connections (LNet bounds its peers'
//! messages with credits); lanefs refuses connections past a cap sized from
//! its descriptors, so that running out of them is a refusal with a
//! reason rather than a failure somewhere else. LNet takes any connection
//! from its networks and authenticates nothing by default; lanefs
//! authenticates every connection, so it bounds the connections doing so
//! (the handshake pool, see [`crate::hello`]) apart from those it serves.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Connections one local user (not root, not the servers' own user) may
/// hold to one server at once.
pub const LOCAL_USER_CONNECTIONS_MAX: usize = 64;

/// The connections each local user holds to one server, bounded by
/// [`LOCAL_USER_CONNECTIONS_MAX`] per uid. Nodes are not counted here (the
/// server's connection cap bounds them). The table holds one entry per uid
/// with a connection open, so it is bounded by the connections.
#[derive(Debug, Default)]
pub struct UserConnections {
    open: Mutex<HashMap<u32, usize>>,
}

/// One local user's connection, counted until dropped.
#[derive(Debug)]
pub struct UserConnection {
    table: Arc<UserConnections>,
    uid: u32,
}

impl UserConnections {
    /// Count a connection of `peer`: `None` for a node, a slot for a local
    /// user below its bound, else the refusal to tell it.
    pub fn admit(self: &Arc<Self>, peer: &crate::auth::Peer) -> Result<Option<UserConnection>, String> {
        let crate::auth::Peer::LocalUser(user) = peer else { return Ok(None) };
        let mut open = self.open.lock().expect("user connections lock");
        let count = open.entry(user.uid).or_insert(0);
        if *count >= LOCAL_USER_CONNECTIONS_MAX {
            return Err(format!(
                "uid {} has {LOCAL_USER_CONNECTIONS_MAX} connections to this server already, the most one local \
                 user may hold: close some (other lanefs commands of this user) and try again",
                user.uid
            ));
        }
        *count += 1;
        Ok(Some(UserConnection { table: self.clone(), uid: user.uid }))
    }

    /// Connections `uid` holds now.
    pub fn of(&self, uid: u32) -> usize {
        self.open.lock().expect("user connections lock").get(&uid).copied().unwrap_or(0)
    }
}

impl Drop for UserConnection {
    fn drop(&mut self) {
        let mut open = self.table.open.lock().expect("user connections lock");
        if let Some(count) = open.get_mut(&self.uid) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.uid);
            }
        }
    }
}

/// A connection must finish its handshake (TLS, then `Hello`) within
/// this. A lanefs peer is through in a few round trips; a peer that holds
/// a handshake open this long is not a client doing its job, and the
/// shorter it is, the fewer such peers a handshake pool must hold.
pub const HANDSHAKE_TIMEOUT_DEFAULT: Duration = Duration::from_secs(3);
/// Connections in their handshake at once (see [`crate::hello`]): each
/// holds a descriptor and a TLS state (tens of KiB) until it is through.
pub const HANDSHAKES_MAX: usize = 256;
/// Connections from one IP address (or one local user on a Unix socket)
/// in their handshake at once: the ranks of a large node connecting
/// together fit.
pub const HANDSHAKES_PER_SOURCE_MAX: usize = 64;
/// A handshake may be displaced from a full pool once it has run this
/// long: a lanefs peer sends its first bytes as soon as it is connected
/// and is through in a few round trips (a few milliseconds, tens on a
/// loaded server), so one silent this long
/// is likely a peer sending nothing; a younger one is left to finish.
/// Short, because while the pool is full of younger ones no connection is
/// accepted: a pool of N takes N new connections per this much time from
/// a flood. Peers that sent something are displaced only after those that
/// did not, and a node that spoke never is (see [`crate::hello`]).
pub const HANDSHAKE_DISPLACE_AGE: Duration = Duration::from_millis(100);
/// A connection that sends nothing for longer is closed: Lustre's ping
/// evictor allows `1.5 x obd_timeout` (`PING_EVICT_TIMEOUT`, 150 s with the
/// default `obd_timeout` of 100 s).
pub const IDLE_TIMEOUT_DEFAULT: Duration = Duration::from_secs(150);
/// A client pings every connection it has sent nothing on for this long:
/// Lustre pings every `obd_timeout / 4` (25 s), six times per idle timeout.
pub const PING_INTERVAL_DEFAULT: Duration = Duration::from_secs(25);
/// A connection whose peer reads nothing for longer is closed and its
/// queue freed (Lustre's `obd_timeout`, the time a server waits on a
/// client).
pub const WRITE_STALL_TIMEOUT_DEFAULT: Duration = Duration::from_secs(100);

/// Bytes queued to one peer above which its connection's reader stops
/// taking requests until the writer has sent enough.
pub const QUEUE_BYTES_SOFT: usize = 8 << 20;
/// Bytes queued to one peer above which its connection is closed: the soft
/// limit, the requests that may be in flight when the reader stops, and one
/// maximal reply, with room to spare. A peer that asked for what it gets
/// never reaches it.
pub const QUEUE_BYTES_MAX: usize = 96 << 20;
/// Messages queued to one peer above which its reader stops.
pub const QUEUE_MESSAGES_SOFT: usize = 1024;
/// Messages queued to one peer above which its connection is closed.
pub const QUEUE_MESSAGES_MAX: usize = 16 * 1024;

/// Requests of one connection handed to the OST threads and not yet
/// handled: 8 OSTs with Lustre's 8 RPCs in flight each, and lock traffic.
pub const REQUESTS_IN_FLIGHT_MAX: usize = 64;
/// Bytes of those requests: a write's data, or the reply a read asks for.
/// A single larger request (up to `codec::BULK_BYTES_MAX`) takes all of it.
pub const REQUEST_BYTES_IN_FLIGHT_MAX: u64 = 16 << 20;

/// Descriptors a server keeps for itself, beyond its connections and
/// object files: standard streams, the runtime's epoll and wake-ups, the
/// listener, the MDS database and its journal, lock files (plus one per
/// OST, counted apart).
pub const DESCRIPTORS_RESERVED: u64 = 32;
/// Connections refused at once, each holding its descriptor while it is
/// told why; past it an extra connection is closed without a word.
pub const REFUSALS_MAX: usize = 32;
/// A server never serves more connections than this, however many
/// descriptors it has: each costs memory (buffers, a task, its queue).
pub const CONNECTIONS_MAX_CEILING: usize = 1 << 16;
/// Connections the kernel completes and queues for a TCP listener before
/// the server accepts them (the kernel caps it at `net.core.somaxconn`;
/// Unix listeners get that maximum already, TCP ones 128 by default).
pub const LISTEN_BACKLOG: u32 = 1024;
/// First pause after `accept` fails for want of descriptors (or memory).
pub const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(10);
/// Longest pause between two `accept`s while they keep failing.
pub const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);
/// How long a refused connection is kept open at most for its peer to
/// read why (a lanefs client has sent its `Hello` by then, and the
/// refusal ends as soon as it is read).
pub const REFUSAL_LINGER: Duration = Duration::from_millis(200);

/// The bounds of one connection's outgoing queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueLimits {
    pub bytes_soft: usize,
    pub bytes_max: usize,
    pub messages_soft: usize,
    pub messages_max: usize,
    /// How long the writer may make no progress before the connection closes.
    pub stall_timeout: Duration,
}

impl Default for QueueLimits {
    fn default() -> Self {
        QueueLimits {
            bytes_soft: QUEUE_BYTES_SOFT,
            bytes_max: QUEUE_BYTES_MAX,
            messages_soft: QUEUE_MESSAGES_SOFT,
            messages_max: QUEUE_MESSAGES_MAX,
            stall_timeout: WRITE_STALL_TIMEOUT_DEFAULT,
        }
    }
}

/// The bounds of a server's connections: `OssConfig::limits`, the MDS's
/// `MdsOptions::limits`, `LocalClusterConfig::limits` (both servers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerLimits {
    pub handshake_timeout: Duration,
    pub idle_timeout: Duration,
    /// Connections served at once; `None`: sized from the descriptors.
    pub connections_max: Option<usize>,
    /// Descriptors this server sizes its connections and object files
    /// from; `None`: the process's limit, raised to the hard limit.
    pub descriptors: Option<u64>,
    pub queue: QueueLimits,
    pub requests_in_flight_max: usize,
    pub request_bytes_in_flight_max: u64,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            handshake_timeout: HANDSHAKE_TIMEOUT_DEFAULT,
            idle_timeout: IDLE_TIMEOUT_DEFAULT,
            connections_max: None,
            descriptors: None,
            queue: QueueLimits::default(),
            requests_in_flight_max: REQUESTS_IN_FLIGHT_MAX,
            request_bytes_in_flight_max: REQUEST_BYTES_IN_FLIGHT_MAX,
        }
    }
}

impl ServerLimits {
    /// Check what a user may set; the error says which value is wrong.
    pub fn validate(&self) -> Result<(), String> {
        let positive = [
            ("handshake timeout", self.handshake_timeout),
            ("idle timeout", self.idle_timeout),
            ("write stall timeout", self.queue.stall_timeout),
        ];
        for (name, value) in positive {
            if value.is_zero() {
                return Err(format!("the {name} must be positive"));
            }
        }
        if self.connections_max == Some(0) {
            return Err("a server needs room for at least one connection (--connections-max 1 or more)".into());
        }
        let q = &self.queue;
        if q.bytes_soft == 0 || q.bytes_soft > q.bytes_max || q.messages_soft == 0 || q.messages_soft > q.messages_max {
            return Err(format!("queue limits {q:?}: soft limits must be positive and at most the hard ones"));
        }
        if self.requests_in_flight_max == 0 || self.request_bytes_in_flight_max == 0 {
            return Err("requests in flight per connection must be bounded by positive numbers".into());
        }
        Ok(())
    }

    /// The descriptors to size from: the given number, or the process's
    /// limit after raising it.
    pub fn descriptors_or_raise(&self) -> u64 {
        self.descriptors.unwrap_or_else(raise_descriptor_limit)
    }
}

/// Raise the soft `RLIMIT_NOFILE` to the hard limit (a server needs one
/// descriptor per connection and per open object file, and the usual soft
/// limit of 1,024 is a shell default, not a server's); returns the soft
/// limit now in force. Safe to call any number of times.
pub fn raise_descriptor_limit() -> u64 {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes only into `limit`.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return 1024;
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
        // SAFETY: setrlimit reads only `raised`; raising the soft limit up
        // to the hard one needs no privilege.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            limit.rlim_cur = limit.rlim_max;
        } else {
            tracing::warn!(
                "could not raise the descriptor limit from {} to {}: {}",
                limit.rlim_cur,
                limit.rlim_max,
                std::io::Error::last_os_error()
            );
        }
    }
    limit.rlim_cur
}

/// How a server spends its descriptors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DescriptorBudget {
    /// The descriptors it was sized from.
    pub descriptors: u64,
    /// Connections served at once (refusals in progress and handshakes
    /// come on top).
    pub connections_max: usize,
    /// Connections in their handshake at once.
    pub handshakes_max: usize,
    /// Object files each OST keeps open (0 for an MDS).
    pub open_files_per_ost: usize,
}

impl DescriptorBudget {
    /// An OSS's budget: `descriptors` for `osts` OSTs whose connections
    /// hold `per_connection` descriptors each (a Unix socket can carry
    /// descriptors that wait there, see `shm`). Object files take at most a
    /// quarter of what is left after the reserve, connections the rest.
    pub fn oss(descriptors: u64, osts: usize, per_connection: usize) -> DescriptorBudget {
        let osts = osts.max(1);
        let usable = descriptors.saturating_sub(DESCRIPTORS_RESERVED + osts as u64) as usize;
        let open_files_per_ost = (usable / 4 / osts).clamp(OPEN_FILES_MIN, OPEN_FILES_MAX);
        let left = usable.saturating_sub(open_files_per_ost * osts);
        let (handshakes_max, connections_max) = connections(left, per_connection);
        DescriptorBudget { descriptors, connections_max, handshakes_max, open_files_per_ost }
    }

    /// An MDS's budget: all but the reserve go to connections.
    pub fn mds(descriptors: u64, per_connection: usize) -> DescriptorBudget {
        let usable = descriptors.saturating_sub(DESCRIPTORS_RESERVED) as usize;
        let (handshakes_max, connections_max) = connections(usable, per_connection);
        DescriptorBudget { descriptors, connections_max, handshakes_max, open_files_per_ost: 0 }
    }

    /// The cap actually used: `explicit` if given (with a warning if the
    /// descriptors cannot hold it), else the budget's.
    pub fn connections_cap(&self, explicit: Option<usize>, server: &str) -> usize {
        match explicit {
            Some(cap) => {
                if cap > self.connections_max {
                    tracing::warn!(
                        "{server}: --connections-max {cap} exceeds the {} connections {} descriptors hold; \
                         past them accepting fails (EMFILE) and backs off",
                        self.connections_max,
                        self.descriptors
                    );
                }
                cap
            }
            None => self.connections_max,
        }
    }
}

/// Object files an OST keeps open however few descriptors there are.
pub const OPEN_FILES_MIN: usize = 4;

/// Open object files an OSS keeps per OST at most, however many
/// descriptors it has (`lanefs_server::filestore`).
pub const OPEN_FILES_MAX: usize = 256;

/// Handshakes in flight and connections served that `descriptors` hold:
/// handshakes take at most a quarter of them, connections the rest.
fn connections(descriptors: usize, per_connection: usize) -> (usize, usize) {
    let per_connection = per_connection.max(1);
    let left = descriptors.saturating_sub(REFUSALS_MAX);
    let handshakes = (left / 4 / per_connection).clamp(1, HANDSHAKES_MAX);
    let cap = left.saturating_sub(handshakes * per_connection) / per_connection;
    (handshakes, cap.clamp(1, CONNECTIONS_MAX_CEILING))
}

/// What a server says to a connection past its cap (`explicit`: the cap
/// was given, not sized from the descriptors).
pub fn refusal_reason(server: &str, cap: usize, explicit: bool, descriptors: u64) -> String {
    let (why, raise) = match explicit {
        true => ("set by --connections-max".to_string(), "raise its --connections-max"),
        false => (
            format!("sized from its limit of {descriptors} file descriptors"),
            "raise the server's descriptor limit (ulimit -Hn, systemd LimitNOFILE=) or give it --connections-max",
        ),
    };
    format!(
        "the {server} is serving its maximum of {cap} connections ({why}): {raise} and restart it; or connect later"
    )
}

/// Connection counts of a server, for monitoring and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Connections being served (through their handshake).
    pub connections: usize,
    /// Connections in their handshake.
    pub handshakes: usize,
    /// Connections refused for the cap since the server started.
    pub refused: u64,
    /// Bytes queued to peers, over all connections.
    pub queued_bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_leave_room_for_each_other() {
        // The usual 1,024: four OSTs keep a quarter of what is left open,
        // connections take the rest, and both fit.
        let b = DescriptorBudget::oss(1024, 4, 1);
        assert_eq!(b.open_files_per_ost, (1024 - 36) / 4 / 4);
        let used = b.open_files_per_ost * 4
            + b.connections_max
            + b.handshakes_max
            + REFUSALS_MAX
            + DESCRIPTORS_RESERVED as usize
            + 4;
        assert!(used <= 1024, "{b:?} uses {used}");
        // Unix sockets may hold descriptors in passing: fewer connections.
        assert!(DescriptorBudget::oss(1024, 4, 3).connections_max < b.connections_max / 2);
        // Plenty of descriptors: the file cache stops at its maximum, the
        // cap at its ceiling.
        let big = DescriptorBudget::oss(1 << 22, 4, 1);
        assert_eq!(big.open_files_per_ost, OPEN_FILES_MAX);
        assert_eq!(big.connections_max, CONNECTIONS_MAX_CEILING);
        // Too few: still room for one connection and a few files.
        let tiny = DescriptorBudget::oss(16, 2, 3);
        assert_eq!((tiny.connections_max, tiny.open_files_per_ost), (1, OPEN_FILES_MIN));
        let mds = DescriptorBudget::mds(1024, 1);
        assert_eq!(mds.handshakes_max, (1024 - 32 - REFUSALS_MAX) / 4);
        assert_eq!(mds.connections_max + mds.handshakes_max, 1024 - 32 - REFUSALS_MAX);
        assert_eq!(big.handshakes_max, HANDSHAKES_MAX);
    }

    #[test]
    fn the_refusal_names_the_cap_and_how_to_raise_it() {
        let reason = refusal_reason("OSS", 500, false, 1024);
        for part in ["500 connections", "1024 file descriptors", "ulimit", "--connections-max"] {
            assert!(reason.contains(part), "{reason:?} lacks {part:?}");
        }
        let reason = refusal_reason("MDS", 3, true, 1024);
        assert!(reason.contains("3 connections (set by --connections-max)"), "{reason}");
    }

    #[test]
    fn limits_are_checked() {
        assert_eq!(ServerLimits::default().validate(), Ok(()));
        let zero = ServerLimits { idle_timeout: Duration::ZERO, ..Default::default() };
        assert!(zero.validate().unwrap_err().contains("idle timeout"));
        let none = ServerLimits { connections_max: Some(0), ..Default::default() };
        assert!(none.validate().unwrap_err().contains("--connections-max"));
        let mut inverted = ServerLimits::default();
        inverted.queue.bytes_soft = inverted.queue.bytes_max + 1;
        assert!(inverted.validate().is_err());
    }

    #[test]
    fn raising_the_limit_reaches_the_hard_limit() {
        let soft = raise_descriptor_limit();
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: getrlimit writes only into `limit`.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) }, 0);
        assert_eq!((soft, limit.rlim_cur), (limit.rlim_max, limit.rlim_max));
    }
}
