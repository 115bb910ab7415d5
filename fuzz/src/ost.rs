//! The `ost` target: an `Ost<MemStore>` fed any sequence of `ToOst`
//! messages from [`CLIENTS`] clients, time passing, syncs answered (or
//! failed, as a failed `fdatasync`), and restarts from its last record.
//!
//! Input: a flags byte (bit 7: recovery on; the rest modulo 3: the
//! sync-on-cancel policy), then [`OstAction`]s. After every action the
//! OST's invariants hold; at the end, once every sync is done and every
//! deadline passed (recovery's included), every request that expects an
//! answer has had exactly one. A restart loses what the OST had not
//! answered, so the requests awaited are forgotten with it.
//!
//! [`OstDriver`] is the driver around the OST, shared with the client
//! target's real OSTs and with the `seeds` program, so that a recorded
//! exchange replays in the target exactly as it ran.

use crate::{decode_all, ACTIONS_MAX};
use lanefs_core::errno::Errno;
use lanefs_core::ldlm::server::LockServerConfig;
use lanefs_core::msg::{IoError, ToOst};
use lanefs_core::ost::{Ost, OstConfig, OstRecord, RecoveryConfig, SyncLockCancel};
use lanefs_core::store::MemStore;
use lanefs_core::{ClientId, Duration, Instant, ObjectId, OstIndex, Xid};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Clients of the OST target (`client % CLIENTS`).
pub const CLIENTS: u8 = 4;

/// The flags byte's bit that turns recovery on.
pub const RECOVERY_FLAG: u8 = 0x80;

/// One step of the OST target.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum OstAction {
    Message {
        client: u8,
        message: ToOst,
    },
    /// Time passes (callback, glimpse, commit and recovery deadlines).
    Advance {
        ms: u32,
    },
    /// The driver answers the oldest sync the OST asked for.
    Synced,
    /// The driver answers the oldest sync: every object of it failed to
    /// become durable (`fdatasync` said `EIO`).
    SyncFailed,
    /// The OST stops and starts again over its store and its last record.
    Restart,
}

/// The configuration of the targets' OSTs: short deadlines, so that a
/// few `Advance`s pass them.
pub fn ost_config(sync_lock_cancel: SyncLockCancel, recovery: bool) -> OstConfig {
    let config = OstConfig {
        locks: LockServerConfig { callback_timeout: Duration::from_ms(50), resend: false },
        glimpse_timeout: Duration::from_ms(20),
        sync_lock_cancel,
        recovery: None,
    };
    match recovery {
        true => config.with_recovery(RecoveryConfig {
            window: Duration::from_secs(2),
            commit_interval: Duration::from_ms(100),
            ..RecoveryConfig::default()
        }),
        false => config,
    }
}

/// The OST target's configuration from its flags byte.
pub fn config_from_flags(flags: u8) -> OstConfig {
    let policy = [SyncLockCancel::Never, SyncLockCancel::Blocking, SyncLockCancel::Always];
    ost_config(policy[usize::from(flags & !RECOVERY_FLAG) % 3], flags & RECOVERY_FLAG != 0)
}

/// An OST and what its driver keeps: the time, and the record it would
/// have on disk (the last [`Ost::poll_record`], with the commit point of
/// every sync since, as the OSS and the harness keep it).
pub struct OstDriver {
    pub ost: Ost<MemStore>,
    config: OstConfig,
    record: OstRecord,
    now: Instant,
}

impl OstDriver {
    pub fn new(index: OstIndex, config: OstConfig) -> OstDriver {
        let ost = Ost::new(index, config.clone(), MemStore::new());
        let mut driver = OstDriver { ost, config, record: OstRecord::default(), now: Instant::ZERO };
        driver.keep_record();
        driver
    }

    pub fn now(&self) -> Instant {
        self.now
    }

    /// Do `action`; what the OST sends waits in it (`ost.poll_transmit`).
    pub fn apply(&mut self, action: OstAction) {
        match action {
            OstAction::Message { client, message } => {
                self.handle_message(ClientId(u32::from(client % CLIENTS)), message);
            }
            OstAction::Advance { ms } => self.advance(Duration::from_ms(u64::from(ms))),
            OstAction::Synced => {
                self.answer_sync(None);
            }
            OstAction::SyncFailed => {
                self.answer_sync(Some(IoError::Disk(Errno::EIO)));
            }
            OstAction::Restart => self.restart(),
        }
        self.keep_record();
    }

    pub fn handle_message(&mut self, from: ClientId, message: ToOst) {
        self.ost.handle_message(self.now, from, message);
        self.keep_record();
    }

    pub fn advance(&mut self, by: Duration) {
        self.now = self.now + by;
        self.ost.handle_timeout(self.now);
        self.keep_record();
    }

    /// Answer the OST's oldest sync, failing every object of it with
    /// `failure`; false if it asked for none.
    pub fn answer_sync(&mut self, failure: Option<IoError>) -> bool {
        let Some(request) = self.ost.poll_sync() else { return false };
        let failures: Vec<(ObjectId, IoError)> = match failure {
            Some(error) => {
                request.object.into_iter().chain(request.commit.iter().copied()).map(|o| (o, error)).collect()
            }
            None => Vec::new(),
        };
        // The commit point is on disk before anyone is told.
        self.record.last_committed = self.record.last_committed.max(request.commit_to);
        self.ost.handle_synced(self.now, request.token, &failures);
        self.keep_record();
        true
    }

    /// The OST stops (losing what it had not sent) and starts again over
    /// its store and its record.
    pub fn restart(&mut self) {
        let store = std::mem::take(self.ost.store_mut());
        let index = self.ost.index();
        self.ost = Ost::restart(index, self.config.clone(), store, self.record.clone(), self.now);
        self.keep_record();
    }

    fn keep_record(&mut self) {
        if let Some(record) = self.ost.poll_record() {
            let last_committed = self.record.last_committed.max(record.last_committed);
            self.record = OstRecord { last_committed, ..record };
        }
    }
}

/// Requests awaiting an answer: `(client, xid)` -> how many.
type Awaited = BTreeMap<(ClientId, Xid), usize>;

fn collect_replies(ost: &mut Ost<MemStore>, awaited: &mut Awaited) {
    while let Some((client, message)) = ost.poll_transmit() {
        let Some(xid) = message.reply_xid() else { continue };
        let waiting = awaited.get_mut(&(client, xid));
        let waiting =
            waiting.unwrap_or_else(|| panic!("{client} answered for xid {} it did not ask: {message:?}", xid.0));
        *waiting -= 1;
        if *waiting == 0 {
            awaited.remove(&(client, xid));
        }
    }
}

/// An OST fed the actions of `data` (after its flags byte).
pub fn run(data: &[u8]) {
    let Some((&flags, data)) = data.split_first() else { return };
    let mut driver = OstDriver::new(OstIndex(0), config_from_flags(flags));
    let mut awaited = Awaited::new();
    for action in decode_all::<OstAction>(data) {
        match &action {
            OstAction::Message { client, message } => {
                if let Some(xid) = message.reply_xid() {
                    *awaited.entry((ClientId(u32::from(client % CLIENTS)), xid)).or_default() += 1;
                }
            }
            // What it had not answered is lost with it.
            OstAction::Restart => awaited.clear(),
            _ => {}
        }
        driver.apply(action);
        driver.ost.check_invariants();
        collect_replies(&mut driver.ost, &mut awaited);
    }
    // Every sync done, every deadline passed: everything is answered.
    for _ in 0..ACTIONS_MAX {
        while driver.answer_sync(None) {}
        driver.advance(Duration::from_secs(1));
        driver.ost.check_invariants();
        collect_replies(&mut driver.ost, &mut awaited);
        if driver.ost.syncs_pending() == 0 && driver.ost.poll_timeout().is_none() {
            break;
        }
    }
    assert!(awaited.is_empty(), "requests never answered: {awaited:?}");
}
