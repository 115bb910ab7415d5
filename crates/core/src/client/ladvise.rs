//! Advice on a file's range (`llapi_ladvise`), validated as Lustre's
//! `ll_ladvise_sanity` does: lock advice (lockahead, lock-no-expand), which
//! the client acts on with its locks, and cache advice (willread, dontneed),
//! which it passes to the OSTs holding the range (Lustre's `OST_LADVISE`),
//! whose OSS reads those bytes into its cache or drops them from it.
//!
//! The raw form ([`Advice`]) carries the numeric fields of Lustre's
//! `struct llapi_lu_ladvise` so that tools and scripts can pass what users
//! know; [`Advice::validate`] turns it into a typed [`Validated`] advice or an
//! error that says what is wrong (Lustre answers `-EINVAL` for all of these).

use crate::ldlm::LockMode;
pub use crate::msg::CacheAdvice;
use serde::{Deserialize, Serialize};

/// `LU_LADVISE_WILLREAD`.
pub const LU_LADVISE_WILLREAD: u32 = 1;
/// `LU_LADVISE_DONTNEED`.
pub const LU_LADVISE_DONTNEED: u32 = 2;
/// `LU_LADVISE_LOCKNOEXPAND`.
pub const LU_LADVISE_LOCKNOEXPAND: u32 = 3;
/// `LU_LADVISE_LOCKAHEAD`.
pub const LU_LADVISE_LOCKAHEAD: u32 = 4;
/// `LF_ASYNC`: do not wait for the lock, or for the OSTs' answers to cache
/// advice.
pub const LF_ASYNC: u32 = 0x1;
/// `LF_UNSET`: clear lock-no-expand.
pub const LF_UNSET: u32 = 0x2;
/// `MODE_READ_USER`.
pub const MODE_READ_USER: u32 = 1;
/// `MODE_WRITE_USER`.
pub const MODE_WRITE_USER: u32 = 2;
/// `LAH_COUNT_MAX`: advices per call must be fewer than this.
pub const ADVICES_PER_CALL_MAX: usize = 1024;

/// One advice as `llapi_ladvise` takes it. `end` is inclusive, as the lock
/// extents it becomes (cache advice too, for one rule in every advice:
/// Lustre's `lla_end` is exclusive, and `lfs ladvise -e` takes it so).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Advice {
    pub advice: u32,
    pub flags: u32,
    pub mode: u32,
    pub start: u64,
    pub end: u64,
}

impl Advice {
    pub fn lockahead(mode: AheadMode, start: u64, end: u64, asynchronous: bool) -> Self {
        let mode = match mode {
            AheadMode::Read => MODE_READ_USER,
            AheadMode::Write => MODE_WRITE_USER,
        };
        Advice { advice: LU_LADVISE_LOCKAHEAD, flags: if asynchronous { LF_ASYNC } else { 0 }, mode, start, end }
    }

    /// Willread or dontneed of the file's bytes `[start, end]`.
    pub fn cache(advice: CacheAdvice, start: u64, end: u64, asynchronous: bool) -> Self {
        let code = match advice {
            CacheAdvice::WillRead => LU_LADVISE_WILLREAD,
            CacheAdvice::DontNeed => LU_LADVISE_DONTNEED,
        };
        Advice { advice: code, flags: if asynchronous { LF_ASYNC } else { 0 }, mode: 0, start, end }
    }

    pub fn lock_no_expand(set: bool) -> Self {
        Advice { advice: LU_LADVISE_LOCKNOEXPAND, flags: if set { 0 } else { LF_UNSET }, mode: 0, start: 0, end: 0 }
    }

    pub fn validate(&self) -> Result<Validated, LadviseError> {
        match self.advice {
            LU_LADVISE_LOCKAHEAD => {
                if self.flags & !LF_ASYNC != 0 {
                    return Err(LadviseError::Flags {
                        advice: "lockahead",
                        flags: self.flags,
                        allowed: "LF_ASYNC (0x1)",
                    });
                }
                let mode = match self.mode {
                    MODE_READ_USER => AheadMode::Read,
                    MODE_WRITE_USER => AheadMode::Write,
                    m => return Err(LadviseError::Mode(m)),
                };
                if self.start >= self.end {
                    return Err(LadviseError::Range { start: self.start, end: self.end });
                }
                Ok(Validated::Lockahead {
                    mode,
                    start: self.start,
                    end: self.end,
                    asynchronous: self.flags & LF_ASYNC != 0,
                })
            }
            LU_LADVISE_LOCKNOEXPAND => {
                if self.flags & !LF_UNSET != 0 {
                    return Err(LadviseError::Flags {
                        advice: "locknoexpand",
                        flags: self.flags,
                        allowed: "LF_UNSET (0x2)",
                    });
                }
                Ok(Validated::LockNoExpand { set: self.flags & LF_UNSET == 0 })
            }
            LU_LADVISE_WILLREAD | LU_LADVISE_DONTNEED => {
                let advice =
                    if self.advice == LU_LADVISE_WILLREAD { CacheAdvice::WillRead } else { CacheAdvice::DontNeed };
                // Lustre's LF_DEFAULT_MASK; the mode field is not looked
                // at (`ll_ladvise_sanity` checks it for lockahead only).
                if self.flags & !LF_ASYNC != 0 {
                    return Err(LadviseError::Flags {
                        advice: advice.name(),
                        flags: self.flags,
                        allowed: "LF_ASYNC (0x1)",
                    });
                }
                if self.start > self.end {
                    return Err(LadviseError::CacheRange { advice: advice.name(), start: self.start, end: self.end });
                }
                Ok(Validated::Cache {
                    advice,
                    start: self.start,
                    end: self.end,
                    asynchronous: self.flags & LF_ASYNC != 0,
                })
            }
            other => Err(LadviseError::Advice(other)),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AheadMode {
    Read,
    Write,
}

impl AheadMode {
    pub fn lock_mode(self) -> LockMode {
        match self {
            AheadMode::Read => LockMode::ProtectedRead,
            AheadMode::Write => LockMode::ProtectedWrite,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Validated {
    Lockahead {
        mode: AheadMode,
        start: u64,
        end: u64,
        asynchronous: bool,
    },
    LockNoExpand {
        set: bool,
    },
    /// `[start, end]` of the file, inclusive.
    Cache {
        advice: CacheAdvice,
        start: u64,
        end: u64,
        asynchronous: bool,
    },
}

/// Per-advice result of an asynchronous lockahead (`lla_lockahead_result`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LockaheadResult {
    /// `LLA_RESULT_SENT` (0): an enqueue went to the server.
    Sent,
    /// `LLA_RESULT_DIFFERENT` (1): a cached lock covers it with another extent.
    Different,
    /// `LLA_RESULT_SAME` (2): a cached lock with exactly this extent exists.
    Same,
}

impl LockaheadResult {
    pub fn code(self) -> u32 {
        match self {
            LockaheadResult::Sent => 0,
            LockaheadResult::Different => 1,
            LockaheadResult::Same => 2,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            LockaheadResult::Sent => "SENT",
            LockaheadResult::Different => "DIFFERENT",
            LockaheadResult::Same => "SAME",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LadviseError {
    #[error("ladvise: {0} advices given; between 1 and {max} are allowed per call", max = ADVICES_PER_CALL_MAX - 1)]
    Count(usize),
    #[error(
        "ladvise: unknown advice type {0}; use willread ({LU_LADVISE_WILLREAD}), dontneed ({LU_LADVISE_DONTNEED}), \
         locknoexpand ({LU_LADVISE_LOCKNOEXPAND}) or lockahead ({LU_LADVISE_LOCKAHEAD})"
    )]
    Advice(u32),
    #[error("ladvise {advice}: flags {flags:#x} not allowed; only {allowed} is")]
    Flags { advice: &'static str, flags: u32, allowed: &'static str },
    #[error("ladvise lockahead: mode {0} is invalid; use READ (1) or WRITE (2)")]
    Mode(u32),
    #[error("ladvise lockahead: start {start} must be below end {end}")]
    Range { start: u64, end: u64 },
    #[error("ladvise {advice}: start {start} is past the range's last byte {end}")]
    CacheRange { advice: &'static str, start: u64, end: u64 },
    #[error("ladvise: no such open file")]
    BadFile,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_advice_is_refused_with_a_reason() {
        let mut a = Advice::lockahead(AheadMode::Write, 0, 4095, true);
        assert!(a.validate().is_ok());
        a.flags = LF_ASYNC | LF_UNSET;
        assert!(matches!(a.validate(), Err(LadviseError::Flags { .. })));
        a.flags = 0x3; // ROMIO's LF_NONBLOCK fallback, which Lustre rejects
        assert!(a.validate().is_err());
        let mut a = Advice::lockahead(AheadMode::Write, 4096, 4096, true);
        assert_eq!(a.validate(), Err(LadviseError::Range { start: 4096, end: 4096 }));
        a.start = 0;
        a.mode = 3;
        assert_eq!(a.validate(), Err(LadviseError::Mode(3)));
        let mut n = Advice::lock_no_expand(true);
        assert_eq!(n.validate(), Ok(Validated::LockNoExpand { set: true }));
        n.flags = LF_ASYNC;
        assert!(n.validate().is_err());
        let bogus = Advice { advice: 9, ..n };
        assert_eq!(bogus.validate(), Err(LadviseError::Advice(9)));
    }

    #[test]
    fn cache_advice_takes_one_byte_and_refuses_what_lustre_refuses() {
        let w = Advice::cache(CacheAdvice::WillRead, 4096, 4096, false);
        assert_eq!(
            w.validate(),
            Ok(Validated::Cache { advice: CacheAdvice::WillRead, start: 4096, end: 4096, asynchronous: false })
        );
        let d = Advice::cache(CacheAdvice::DontNeed, 0, 10, true);
        assert!(matches!(d.validate(), Ok(Validated::Cache { advice: CacheAdvice::DontNeed, asynchronous: true, .. })));
        // The mode is lockahead's; Lustre does not look at it here.
        assert!(Advice { mode: 7, ..d }.validate().is_ok());
        assert!(matches!(Advice { flags: LF_UNSET, ..d }.validate(), Err(LadviseError::Flags { .. })));
        assert_eq!(
            Advice { start: 11, ..d }.validate(),
            Err(LadviseError::CacheRange { advice: "dontneed", start: 11, end: 10 })
        );
        assert_eq!(Advice { advice: 0, ..d }.validate(), Err(LadviseError::Advice(0)));
    }
}

// A test names the one message or event it expects; any other fails it.
#[allow(clippy::wildcard_enum_match_arm)]
#[cfg(test)]
mod cache_tests {
    //! Cache advice through a client: which requests go to which OST, and
    //! when the advice is done.

    use super::*;
    use crate::client::{Client, ClientConfig, ClientError, ClientEvent, LadviseOutcome, OpOutput};
    use crate::layout::Layout;
    use crate::msg::{IoError, ToClient, ToOst};
    use crate::units::{ClientId, Instant, ObjectId, ObjectKey, OstIndex};

    const KIB: u64 = 1 << 10;
    const MIB: u64 = 1 << 20;

    /// A client with a file of three 1 MiB stripes on OSTs 0, 1 and 2
    /// (objects 100, 101, 102).
    fn three_stripes() -> (Client, crate::client::FileHandle) {
        let mut client = Client::new(ClientId(1), ClientConfig::default()).unwrap();
        let objects = (0..3).map(|i| ObjectKey { ost: OstIndex(i), object: ObjectId(100 + u64::from(i)) }).collect();
        let fh = client.open(Layout::new(MIB, objects).unwrap());
        (client, fh)
    }

    /// The advice requests sent: `(OST, xid, object, advice, start, end)`.
    fn advices_sent(client: &mut Client) -> Vec<(u32, crate::units::Xid, u64, CacheAdvice, u64, u64)> {
        std::iter::from_fn(|| client.poll_transmit())
            .map(|(ost, m)| match m {
                ToOst::Advise { xid, object, advice, start, end } => (ost.0, xid, object.0, advice, start, end),
                other => panic!("only advice is sent, not {other:?}"),
            })
            .collect()
    }

    fn done(client: &mut Client) -> Vec<(crate::client::OpId, Result<OpOutput, ClientError>)> {
        std::iter::from_fn(|| client.poll_event())
            .filter_map(|e| match e {
                ClientEvent::OpDone { op, result } => Some((op, result)),
                _ => None,
            })
            .collect()
    }

    /// `lfs ladvise -a willread -s 512k -e 2560k` on three 1 MiB stripes:
    /// the second half of object 0's first MiB, all of object 1's, the
    /// first half of object 2's; done when the last OST answers.
    #[test]
    fn willread_over_three_stripes_asks_each_object_for_its_part() {
        let (mut client, fh) = three_stripes();
        let t = Instant::ZERO;
        let advice = Advice::cache(CacheAdvice::WillRead, 512 * KIB, 2560 * KIB - 1, false);
        let LadviseOutcome::Pending { results, op } = client.ladvise(t, fh, &[advice]).unwrap() else {
            panic!("a synchronous advice is an operation")
        };
        assert!(results.is_empty());
        let sent = advices_sent(&mut client);
        let ranges: Vec<_> =
            sent.iter().map(|&(ost, _, object, advice, start, end)| (ost, object, advice, start, end)).collect();
        let w = CacheAdvice::WillRead;
        assert_eq!(ranges, vec![(0, 100, w, 512 * KIB, MIB), (1, 101, w, 0, MIB), (2, 102, w, 0, 512 * KIB)]);
        for &(ost, xid, ..) in &sent[..2] {
            client.handle_message(t, OstIndex(ost), ToClient::AdviseReply { xid, result: Ok(()) });
        }
        assert!(done(&mut client).is_empty(), "done before OST 2 answered");
        // An answer from another OST than the one asked is not taken.
        let last = sent[2].1;
        client.handle_message(t, OstIndex(0), ToClient::AdviseReply { xid: last, result: Ok(()) });
        assert!(done(&mut client).is_empty());
        client.handle_message(t, OstIndex(2), ToClient::AdviseReply { xid: last, result: Ok(()) });
        assert_eq!(done(&mut client), vec![(op, Ok(OpOutput::Advised))]);
        client.check_invariants();
    }

    /// An OST's error fails the advice, naming that OST.
    #[test]
    fn an_error_from_one_ost_fails_the_advice_naming_it() {
        let (mut client, fh) = three_stripes();
        let t = Instant::ZERO;
        let advice = Advice::cache(CacheAdvice::DontNeed, 0, 3 * MIB - 1, false);
        let LadviseOutcome::Pending { op, .. } = client.ladvise(t, fh, &[advice]).unwrap() else { panic!() };
        let sent = advices_sent(&mut client);
        assert_eq!(sent.len(), 3);
        for &(ost, xid, ..) in &sent {
            let result = if ost == 1 { Err(IoError::NoSuchObject) } else { Ok(()) };
            client.handle_message(t, OstIndex(ost), ToClient::AdviseReply { xid, result });
        }
        let error = ClientError::Io { ost: OstIndex(1), error: IoError::NoSuchObject };
        assert_eq!(done(&mut client), vec![(op, Err(error))]);
    }

    /// `-b` (LF_ASYNC): the requests go out and the call is over; nobody
    /// waits for their answers, which change nothing when they come.
    #[test]
    fn background_advice_is_sent_and_done_without_waiting() {
        let (mut client, fh) = three_stripes();
        let t = Instant::ZERO;
        let advice = Advice::cache(CacheAdvice::DontNeed, 0, u64::MAX - 1, true);
        assert_eq!(client.ladvise(t, fh, &[advice]).unwrap(), LadviseOutcome::Results(Vec::new()));
        let sent = advices_sent(&mut client);
        // To the end of the file: each whole object.
        let ranges: Vec<_> = sent.iter().map(|&(ost, _, _, _, start, end)| (ost, start, end)).collect();
        assert_eq!(ranges, vec![(0, 0, u64::MAX), (1, 0, u64::MAX), (2, 0, u64::MAX)]);
        for &(ost, xid, ..) in &sent {
            client.handle_message(t, OstIndex(ost), ToClient::AdviseReply { xid, result: Err(IoError::NoSpace) });
        }
        assert!(done(&mut client).is_empty());
        client.check_invariants();
    }

    /// Synchronous lockahead and willread in one call: the locks first,
    /// then the advice, through real OSTs.
    #[test]
    fn lockahead_then_willread_in_one_call() {
        use crate::harness::{Harness, HarnessConfig};
        let mut h = Harness::new(HarnessConfig { clients: 1, osts: 2, ..Default::default() }).unwrap();
        let c = ClientId(0);
        let layout = h.create_layout(MIB, 2, Some(0)).unwrap();
        let fh = h.open(c, layout);
        let advices = [
            Advice::lockahead(AheadMode::Read, 0, 2 * MIB - 1, false),
            Advice::cache(CacheAdvice::WillRead, 0, 2 * MIB - 1, false),
        ];
        let LadviseOutcome::Pending { op, .. } = h.ladvise(c, fh, &advices).unwrap() else { panic!() };
        assert_eq!(h.wait_ok(c, op), OpOutput::Advised);
        assert_eq!(h.lock_counters().grants, 2, "a read lock on each object");
        h.check_invariants();
    }
}

/// How a writer of a shared file locks, as a benchmark or application picks
/// it: Lustre's default (expanding locks), lock-no-expand advice, lockahead
/// of the extents it will write (with lock-no-expand), or one group lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum IoLockMode {
    Default,
    NoExpand,
    Lockahead,
    Group,
}

impl IoLockMode {
    pub const NAMES: &'static str = "default, noexpand, lockahead or group";

    pub fn parse(s: &str) -> Result<IoLockMode, String> {
        match s {
            "default" => Ok(IoLockMode::Default),
            "noexpand" => Ok(IoLockMode::NoExpand),
            "lockahead" => Ok(IoLockMode::Lockahead),
            "group" => Ok(IoLockMode::Group),
            other => Err(format!("{other:?} is not a lock mode; use {}", IoLockMode::NAMES)),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            IoLockMode::Default => "default",
            IoLockMode::NoExpand => "noexpand",
            IoLockMode::Lockahead => "lockahead",
            IoLockMode::Group => "group",
        }
    }
}

/// When an independent writer in [`IoLockMode::Lockahead`] asks for the
/// locks of its next transfers: a window of at most `window` transfers
/// locked ahead of the one being written, topped up each time half of it
/// has been written, so that its locks are asked for well before their
/// writes and are still cached when those come.
///
/// A granted lockahead lock waits unused in its client's LRU, where it is
/// older than every lock a write has used since; a client that keeps
/// `lru_size` unused locks cancels its oldest first. A writer that asked
/// for all its transfers' locks at once would so lose, past the first
/// `lru_size`, the very ones it needs next, and every write would enqueue a
/// lock of its own after all. [`AheadSchedule::new`] keeps a window to a
/// quarter of the LRU among the writers sharing the client, which leaves
/// room for the locks they used last. (Lustre's clients resize their LRU by
/// default; a writer there may ask further ahead. lanefs's client keeps a
/// fixed `lru_size`.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AheadSchedule {
    /// Transfers the writer makes, numbered from 0.
    total: u64,
    /// Transfers locked ahead at most, at least 1.
    window: u64,
}

impl AheadSchedule {
    /// The schedule of a writer of `total` transfers of `transfer` bytes
    /// each, at offsets that are multiples of `transfer`, on a file of
    /// `stripe_count` stripes of `stripe_size` bytes, one of
    /// `writers_per_client` writers on a client that keeps `lru_size`
    /// unused locks.
    pub fn new(
        total: u64,
        transfer: u64,
        stripe_size: u64,
        stripe_count: u32,
        lru_size: usize,
        writers_per_client: u32,
    ) -> Self {
        let locks = locks_per_transfer(transfer, stripe_size, stripe_count);
        let budget = lru_size as u64 / 4 / u64::from(writers_per_client.max(1));
        let window = (budget / locks).clamp(1, ADVICES_PER_CALL_MAX as u64 - 1);
        AheadSchedule { total, window }
    }

    /// Transfers locked ahead at most.
    pub fn window(&self) -> u64 {
        self.window
    }

    /// Before transfer `k` is written: the transfers whose locks to ask for
    /// now (empty if none). Transfer 0 asks for the first window; every
    /// `window / 2` transfers after it (every transfer for a window of 1)
    /// ask for as many more, up to `k + window`. Pure: the transfers asked
    /// for over `k = 0, 1, ..` are `0..total`, each once, in order.
    pub fn before(&self, k: u64) -> std::ops::Range<u64> {
        let half = (self.window / 2).max(1);
        let end = k.saturating_add(self.window).min(self.total);
        let start = if k == 0 {
            0
        } else if k.is_multiple_of(half) {
            (k - half).saturating_add(self.window)
        } else {
            return 0..0;
        };
        start.min(end)..end
    }
}

/// The most locks one lockahead advice of `transfer` bytes becomes (one per
/// object it touches), at an offset that is a multiple of `transfer`.
pub fn locks_per_transfer(transfer: u64, stripe_size: u64, stripe_count: u32) -> u64 {
    let (t, s) = (transfer.max(1), stripe_size.max(1));
    let pieces = if s.is_multiple_of(t) {
        1
    } else if t.is_multiple_of(s) {
        t / s
    } else {
        t.div_ceil(s) + 1
    };
    pieces.min(u64::from(stripe_count.max(1)))
}

#[cfg(test)]
mod ahead_tests {
    use super::*;

    #[test]
    fn every_transfer_is_asked_for_once_in_order_and_never_more_than_a_window_ahead() {
        for window_locks in [4, 5, 7, 100, 400, 6400, 100_000] {
            for total in [0, 1, 2, 3, 50, 1024, 5000] {
                let s = AheadSchedule::new(total, 65536, 1 << 20, 2, window_locks, 1);
                let mut asked = 0;
                for k in 0..total {
                    let r = s.before(k);
                    if !r.is_empty() {
                        assert_eq!(r.start, asked, "window {} total {total} k {k}", s.window());
                        asked = r.end;
                    }
                    assert!(asked > k, "transfer {k} written before its lock was asked for");
                    assert!(asked - k <= s.window(), "more than a window ahead at {k}");
                }
                assert_eq!(asked, total, "window {} total {total}", s.window());
            }
        }
    }

    #[test]
    fn a_window_is_a_quarter_of_the_lru_among_the_clients_writers() {
        // lanefs's default client: 400 unused locks, one writer.
        assert_eq!(AheadSchedule::new(1024, 65536, 1 << 20, 2, 400, 1).window(), 100);
        // Eight writers on one client share it.
        assert_eq!(AheadSchedule::new(1024, 65536, 1 << 20, 2, 400, 8).window(), 12);
        // A 4 MiB transfer over two 1 MiB stripes is two locks.
        assert_eq!(AheadSchedule::new(1024, 4 << 20, 1 << 20, 2, 400, 1).window(), 50);
        // Never less than one, never more than one call carries.
        assert_eq!(AheadSchedule::new(1024, 65536, 1 << 20, 2, 4, 64).window(), 1);
        assert_eq!(AheadSchedule::new(1 << 20, 65536, 1 << 20, 2, 1 << 20, 1).window(), 1023);
    }

    #[test]
    fn a_transfer_takes_one_lock_per_object_it_touches() {
        assert_eq!(locks_per_transfer(65536, 1 << 20, 4), 1);
        assert_eq!(locks_per_transfer(1 << 20, 1 << 20, 4), 1);
        assert_eq!(locks_per_transfer(4 << 20, 1 << 20, 4), 4);
        assert_eq!(locks_per_transfer(4 << 20, 1 << 20, 2), 2);
        assert_eq!(locks_per_transfer(3 << 19, 1 << 20, 8), 3);
    }
}
