//! The `client` target: a client with a write, a read, a stat and an fsync
//! in flight on a file striped over OSTs 0 and 1, fed any `ToClient`
//! messages (from any OST, served or not), new operations, time passing,
//! connections lost and made again, OSTs given up on, and exchanges with
//! two real OSTs.
//!
//! Input: a flags byte (bit 0: recovery on, in the client and in its real
//! OSTs), then [`ClientAction`]s. After every action the client's
//! invariants hold, and the real OSTs' too.

use crate::decode_all;
use crate::ost::{ost_config, OstDriver};
use lanefs_core::client::ladvise::{Advice, AheadMode};
use lanefs_core::client::{Client, ClientConfig, FileHandle};
use lanefs_core::layout::Layout;
use lanefs_core::ldlm::GroupId;
use lanefs_core::msg::ToClient;
use lanefs_core::ost::SyncLockCancel;
use lanefs_core::{ClientId, Duration, Instant, ObjectId, ObjectKey, OstIndex};
use serde::{Deserialize, Serialize};

/// The flags byte's bit that turns recovery on.
pub const RECOVERY_FLAG: u8 = 0x01;

/// The client's id, at its real OSTs too.
pub const CLIENT: ClientId = ClientId(1);

/// Rounds of one [`ClientAction::Exchange`], at most.
pub const EXCHANGE_ROUNDS_MAX: usize = 64;

/// One step of the client target.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum ClientAction {
    /// A message from OST `ost` (any index, served or not).
    Message { ost: u8, message: ToClient },
    /// Time passes, for the client and its real OSTs.
    Advance { ms: u32 },
    /// The application starts another operation.
    Start(Start),
    /// The driver gave up on its connection to an OST.
    Unreachable { ost: u8 },
    /// The driver lost its connection to an OST, and made a new one.
    Reconnect { ost: u8 },
    /// The real OSTs (0 and 1) take what the client sent since the last
    /// exchange and answer it, until nothing moves (what it sent to other
    /// OSTs is lost).
    Exchange,
}

/// Operations the client target starts, on its one open file.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Start {
    Write { offset: u32, len: u16 },
    Read { offset: u32, len: u16 },
    Fsync,
    Stat,
    Truncate { size: u32 },
    GroupLock { gid: u8 },
    GroupUnlock { gid: u8 },
    Lockahead { offset: u32, len: u16, asynchronous: bool },
}

/// The configuration of the target's client: small limits, so that a few
/// operations reach them.
pub fn client_config(recovery: bool) -> ClientConfig {
    ClientConfig {
        recovery,
        rpc_bytes_max: 16 << 10,
        rpcs_in_flight_max: 2,
        dirty_bytes_max: 64 << 10,
        cached_bytes_max: 128 << 10,
        lru_locks_max: 8,
        ..ClientConfig::default()
    }
}

/// The client target's client, its open file (striped over OSTs 0 and 1,
/// 64 KiB stripes) and the operations in flight before any input.
pub fn client_setup(recovery: bool) -> (Client, FileHandle) {
    let mut client = Client::new(CLIENT, client_config(recovery)).expect("a valid configuration");
    let objects =
        vec![ObjectKey { ost: OstIndex(0), object: ObjectId(1) }, ObjectKey { ost: OstIndex(1), object: ObjectId(2) }];
    let fh = client.open(Layout::new(64 << 10, objects).expect("a valid layout"));
    let now = Instant::ZERO;
    let _ = client.write(now, fh, 10_000, vec![7; 150_000]);
    let _ = client.read(now, fh, 60_000, 80_000);
    let _ = client.stat(now, fh);
    let _ = client.fsync(now, fh);
    (client, fh)
}

/// The client target's real OSTs: OST 0 syncs on every cancel, OST 1 never.
pub fn real_osts(recovery: bool) -> Vec<OstDriver> {
    vec![
        OstDriver::new(OstIndex(0), ost_config(SyncLockCancel::Always, recovery)),
        OstDriver::new(OstIndex(1), ost_config(SyncLockCancel::Never, recovery)),
    ]
}

/// Start `start` on `client`'s file `fh`.
pub fn start(client: &mut Client, now: Instant, fh: FileHandle, start: Start) {
    let _ = match start {
        Start::Write { offset, len } => client.write(now, fh, u64::from(offset), vec![3; usize::from(len)]),
        Start::Read { offset, len } => client.read(now, fh, u64::from(offset), u64::from(len)),
        Start::Fsync => client.fsync(now, fh),
        Start::Stat => client.stat(now, fh),
        Start::Truncate { size } => client.truncate(now, fh, u64::from(size)),
        Start::GroupLock { gid } => client.group_lock(now, fh, GroupId(u64::from(gid))),
        Start::GroupUnlock { gid } => client.group_unlock(now, fh, GroupId(u64::from(gid))),
        Start::Lockahead { offset, len, asynchronous } => {
            let (start, end) = (u64::from(offset), u64::from(offset) + u64::from(len));
            let advice = Advice::lockahead(AheadMode::Write, start, end, asynchronous);
            let _ = client.ladvise(now, fh, &[advice]);
            return;
        }
    };
}

/// The client's messages to the real OSTs, and their answers back (syncs
/// done at once), until nothing moves.
fn exchange(client: &mut Client, osts: &mut [OstDriver], now: Instant) {
    debug_assert!(osts.iter().all(|o| o.now() == now), "the OSTs keep the client's time");
    for _ in 0..EXCHANGE_ROUNDS_MAX {
        let mut moved = false;
        while let Some((ost, message)) = client.poll_transmit() {
            moved = true;
            if let Some(driver) = osts.get_mut(ost.0 as usize) {
                driver.handle_message(CLIENT, message);
            }
        }
        while client.poll_event().is_some() {}
        for (index, driver) in osts.iter_mut().enumerate() {
            while driver.answer_sync(None) {}
            while let Some((_, message)) = driver.ost.poll_transmit() {
                moved = true;
                client.handle_message(now, OstIndex(index as u32), message);
                client.check_invariants();
            }
        }
        if !moved {
            return;
        }
    }
}

/// A client with operations in flight fed the actions of `data` (after
/// its flags byte).
pub fn run(data: &[u8]) {
    let Some((&flags, data)) = data.split_first() else { return };
    let recovery = flags & RECOVERY_FLAG != 0;
    let (mut client, fh) = client_setup(recovery);
    let mut osts = real_osts(recovery);
    let mut now = Instant::ZERO;
    for action in decode_all::<ClientAction>(data) {
        match action {
            ClientAction::Message { ost, message } => client.handle_message(now, OstIndex(u32::from(ost)), message),
            ClientAction::Advance { ms } => {
                let by = Duration::from_ms(u64::from(ms));
                now = now + by;
                client.handle_timeout(now);
                for driver in &mut osts {
                    driver.advance(by);
                }
            }
            ClientAction::Start(op) => start(&mut client, now, fh, op),
            ClientAction::Unreachable { ost } => client.handle_unreachable(now, OstIndex(u32::from(ost)), "fuzzed"),
            ClientAction::Reconnect { ost } => {
                client.handle_disconnected(now, OstIndex(u32::from(ost)));
                client.handle_reconnected(now, OstIndex(u32::from(ost)));
            }
            ClientAction::Exchange => exchange(&mut client, &mut osts, now),
        }
        client.check_invariants();
        while client.poll_event().is_some() {}
        for driver in &osts {
            driver.ost.check_invariants();
        }
    }
}
