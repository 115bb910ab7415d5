//! Two-phase collective buffering on a striped file, as ROMIO's Lustre
//! driver does it (`ad_lustre_aggregate.c`, `ad_lustre_wrcoll.c`): how many
//! aggregators, on which ranks, which stripes each one writes in which
//! round, what every rank sends them, and which stripes each aggregator
//! locks ahead.
//!
//! The rules (from `mpiio.md`):
//! - Stripe `k` (file offset / stripe size) belongs to aggregator
//!   `k mod avail`. Requests are split at stripe boundaries, so each
//!   aggregator owns whole stripes; with `avail = C * m` (C the stripe count)
//!   aggregator `a` only touches OST `a mod C`.
//! - Round `r` covers `avail * stripe_size` bytes starting at the lowest
//!   requested offset aligned down to a stripe, so it holds exactly one stripe
//!   of every aggregator: each aggregator buffers and writes one stripe per
//!   round, and an aggregator with no data in that stripe has an empty round.
//!
//! Everything here is a pure function of its inputs: no I/O, no clock. A plan
//! is built once per collective call by sorting its pieces once, so 75,000
//! ranks with a few pieces each cost O(n log n), never a scan per rank.

use super::hints::{CbLockMode, CrayLockMode, MpiioHints, LOCK_AHEAD_NUM_EXTENTS_MAX};
use lanefs_core::client::ladvise::{Advice, AheadMode, LF_ASYNC};
use lanefs_core::extent::Extent;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Which rule sets the aggregator count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AggregatorRule {
    /// ROMIO's Lustre rule: `cb_nodes` (default one per node) and
    /// `romio_lustre_co_ratio`.
    Romio,
    /// Cray MPT's rule: `stripe count * cray_cb_nodes_multiplier`.
    Cray,
}

/// The rule that applies: Cray's when a Cray collective-buffering hint is
/// not at its default (`cray_cb_nodes_multiplier > 1`, or
/// `cray_cb_write_lock_mode` 1 or 2), ROMIO's otherwise. A multiplier of 1
/// with lock mode 0 cannot be told from "no Cray hints"; ROMIO's rule then
/// gives the same count (one aggregator per OST) whenever `cb_nodes` is at
/// least the stripe count.
pub fn aggregator_rule(hints: &MpiioHints) -> AggregatorRule {
    if hints.cray_cb_nodes_multiplier > 1 || hints.cray_cb_write_lock_mode != CrayLockMode::Default {
        AggregatorRule::Cray
    } else {
        AggregatorRule::Romio
    }
}

/// The number of aggregators (`avail`) of collective writes by `nprocs`
/// ranks on `nodes` nodes to a file with `stripe_count` stripes (the file's
/// actual stripe count, which `striping_factor` set if the file was created).
///
/// ROMIO's rule: `cb_nodes` (default `nodes`) clamped to `1..=nprocs`; then
/// if `cb_nodes >= stripe_count`, `stripe_count * min(cb_nodes / stripe_count,
/// co_ratio)`, else the largest divisor of `stripe_count` not above `cb_nodes`.
///
/// Cray's rule: `stripe_count * cray_cb_nodes_multiplier` (`cb_nodes` is
/// not consulted). When that exceeds `nprocs` it is cut down the way ROMIO's
/// rule cuts (the largest multiple, or divisor, of the stripe count that
/// fits), so every aggregator still maps to one OST. Never more than
/// `nprocs`, never 0.
pub fn aggregator_count(nprocs: u32, nodes: u32, stripe_count: u32, hints: &MpiioHints) -> u32 {
    count_with_ratio(nprocs, nodes, stripe_count, hints, hints.romio_lustre_co_ratio)
}

/// As [`aggregator_count`] for collective reads: ROMIO always uses a
/// `co_ratio` of 1 for reads; Cray's rule is the same for both directions.
pub fn read_aggregator_count(nprocs: u32, nodes: u32, stripe_count: u32, hints: &MpiioHints) -> u32 {
    count_with_ratio(nprocs, nodes, stripe_count, hints, 1)
}

fn count_with_ratio(nprocs: u32, nodes: u32, stripe_count: u32, hints: &MpiioHints, co_ratio: u32) -> u32 {
    assert!(nprocs >= 1, "a collective needs at least one rank");
    assert!(stripe_count >= 1, "a file has at least one stripe");
    let avail = match aggregator_rule(hints) {
        AggregatorRule::Romio => {
            let cb_nodes = hints.cb_nodes.unwrap_or(nodes).clamp(1, nprocs);
            lustre_avail(cb_nodes, stripe_count, co_ratio)
        }
        AggregatorRule::Cray => {
            let multiplier = hints.cray_cb_nodes_multiplier;
            let wanted = u64::from(stripe_count) * u64::from(multiplier);
            lustre_avail(wanted.min(u64::from(nprocs)) as u32, stripe_count, multiplier)
        }
    };
    assert!((1..=nprocs).contains(&avail), "aggregator count {avail} outside 1..={nprocs}");
    avail
}

/// `ADIOI_LUSTRE_Get_striping_info`'s count for `cb_nodes >= 1`.
fn lustre_avail(cb_nodes: u32, stripe_count: u32, co_ratio: u32) -> u32 {
    if cb_nodes >= stripe_count {
        stripe_count * (cb_nodes / stripe_count).min(co_ratio.max(1))
    } else {
        (1..=cb_nodes).rev().find(|&d| stripe_count.is_multiple_of(d)).expect("1 divides every stripe count")
    }
}

/// The rank of each aggregator, by aggregator index, for `nprocs` ranks
/// placed on nodes in blocks (`node = rank / ranks_per_node`, the last node
/// possibly short). Aggregators are spread over nodes, one per node first:
/// the first `nodes` aggregators take the first rank of distinct nodes
/// (evenly spaced when there are fewer aggregators than nodes), the next
/// ones the second rank of a node, and so on.
pub fn aggregator_ranks(avail: u32, nprocs: u32, ranks_per_node: u32) -> Vec<u32> {
    assert!(ranks_per_node >= 1, "a node holds at least one rank");
    assert!((1..=nprocs).contains(&avail), "{avail} aggregators for {nprocs} ranks");
    let (nprocs, per_node) = (u64::from(nprocs), u64::from(ranks_per_node));
    let nodes = nprocs.div_ceil(per_node);
    let last_node_ranks = nprocs - (nodes - 1) * per_node;
    let mut ranks = Vec::with_capacity(avail as usize);
    let mut slot = 0u64;
    while ranks.len() < avail as usize {
        // The nodes with a rank in this slot: all of them, or all but the short last one.
        let eligible = if slot < last_node_ranks { nodes } else { nodes - 1 };
        assert!(eligible > 0 && slot < per_node, "ran out of ranks placing {avail} aggregators");
        let want = (avail as usize - ranks.len()).min(eligible as usize) as u64;
        ranks.extend((0..want).map(|j| ((j * eligible / want) * per_node + slot) as u32));
        slot += 1;
    }
    debug_assert!(ranks.iter().all(|&r| u64::from(r) < nprocs));
    ranks
}

/// The bytes one rank contributes to one stripe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Piece {
    pub rank: u32,
    pub offset: u64,
    pub len: u64,
}

impl Piece {
    pub fn end(&self) -> u64 {
        self.offset + self.len
    }
}

/// What one aggregator writes in one round: one stripe's pieces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StripeWrite {
    /// Stripe index in the file (`offset / stripe_size`).
    pub stripe: u64,
    pub aggregator: u32,
    pub round: u64,
    /// The lowest offset written and the end (exclusive) of the highest:
    /// the aggregator's one system write for this stripe.
    pub start: u64,
    pub end: u64,
    /// Bytes received (overlapping pieces counted each time).
    pub bytes: u64,
    /// Distinct bytes covered; below `end - start` when the range has holes
    /// (the aggregator must then read-modify-write it).
    pub covered_bytes: u64,
    first_piece: usize,
    piece_count: usize,
}

impl StripeWrite {
    /// Whether `[start, end)` has bytes no piece covers.
    pub fn has_holes(&self) -> bool {
        self.covered_bytes < self.end - self.start
    }
}

/// One message of the exchange phase: everything `rank` sends `aggregator`
/// in `round` (ROMIO sends one message per target per round).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExchangeMessage {
    pub rank: u32,
    pub round: u64,
    pub aggregator: u32,
    pub bytes: u64,
    pub pieces: u32,
}

/// A collective call's two-phase schedule; see the module docs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CollectivePlan {
    stripe_size: u64,
    avail: u32,
    first_stripe: u64,
    round_count: u64,
    /// Sorted by `(offset, rank, len)`, so grouped by stripe.
    pieces: Vec<Piece>,
    /// Sorted by stripe, hence by round.
    writes: Vec<StripeWrite>,
    /// Indices into `writes`, grouped by aggregator, each group in offset order.
    writes_by_aggregator: Vec<usize>,
    /// Where each aggregator's group starts in `writes_by_aggregator` (`avail + 1` entries).
    aggregator_starts: Vec<usize>,
    /// Sorted by `(rank, round, aggregator)`.
    sends: Vec<ExchangeMessage>,
}

/// Plans one collective write (or read) of `requests`, each
/// `(rank, file offset, len)`, over `avail` aggregators. Empty requests are
/// dropped; overlapping requests are all kept, in `(offset, rank)` order (MPI
/// leaves the result of overlapping collective writes undefined). Panics if
/// `stripe_size` or `avail` is 0 or a request ends past `u64::MAX`.
pub fn plan_collective(requests: &[(u32, u64, u64)], stripe_size: u64, avail: u32) -> CollectivePlan {
    assert!(stripe_size > 0 && avail > 0, "stripe size {stripe_size} and aggregator count {avail} must be positive");
    let mut pieces = split_at_stripes(requests, stripe_size);
    pieces.sort_unstable_by_key(|p| (p.offset, p.rank, p.len));
    let first_stripe = pieces.first().map_or(0, |p| p.offset / stripe_size);
    let writes = group_stripes(&pieces, stripe_size, avail, first_stripe);
    let round_count = writes.last().map_or(0, |w| w.round + 1);
    let (writes_by_aggregator, aggregator_starts) = index_by_aggregator(&writes, avail);
    let sends = merge_sends(&pieces, stripe_size, avail, first_stripe);
    let plan = CollectivePlan {
        stripe_size,
        avail,
        first_stripe,
        round_count,
        pieces,
        writes,
        writes_by_aggregator,
        aggregator_starts,
        sends,
    };
    if cfg!(debug_assertions) {
        plan.check_invariants();
    }
    plan
}

fn split_at_stripes(requests: &[(u32, u64, u64)], stripe_size: u64) -> Vec<Piece> {
    let mut pieces = Vec::with_capacity(requests.len());
    for &(rank, offset, len) in requests.iter().filter(|&&(_, _, len)| len > 0) {
        let Some(end) = offset.checked_add(len) else {
            panic!("rank {rank}'s request at {offset} of {len} bytes ends past u64::MAX");
        };
        let mut pos = offset;
        while pos < end {
            let stripe_end = (pos / stripe_size + 1).saturating_mul(stripe_size);
            let piece_end = stripe_end.min(end);
            pieces.push(Piece { rank, offset: pos, len: piece_end - pos });
            pos = piece_end;
        }
    }
    pieces
}

fn group_stripes(pieces: &[Piece], stripe_size: u64, avail: u32, first_stripe: u64) -> Vec<StripeWrite> {
    let mut writes = Vec::new();
    let mut i = 0;
    while i < pieces.len() {
        let stripe = pieces[i].offset / stripe_size;
        let count = pieces[i..].partition_point(|p| p.offset / stripe_size == stripe);
        let group = &pieces[i..i + count];
        let (mut end, mut bytes, mut covered_bytes) = (group[0].offset, 0, 0);
        for piece in group {
            // Pieces are in offset order, so the new bytes start at `max(offset, end)`.
            covered_bytes += piece.end().saturating_sub(piece.offset.max(end));
            end = end.max(piece.end());
            bytes += piece.len;
        }
        writes.push(StripeWrite {
            stripe,
            aggregator: (stripe % u64::from(avail)) as u32,
            round: (stripe - first_stripe) / u64::from(avail),
            start: group[0].offset,
            end,
            bytes,
            covered_bytes,
            first_piece: i,
            piece_count: count,
        });
        i += count;
    }
    writes
}

/// A stable counting sort of write indices by aggregator.
fn index_by_aggregator(writes: &[StripeWrite], avail: u32) -> (Vec<usize>, Vec<usize>) {
    let mut starts = vec![0usize; avail as usize + 1];
    for write in writes {
        starts[write.aggregator as usize + 1] += 1;
    }
    for a in 0..avail as usize {
        starts[a + 1] += starts[a];
    }
    let mut next = starts.clone();
    let mut by_aggregator = vec![0usize; writes.len()];
    for (index, write) in writes.iter().enumerate() {
        let slot = &mut next[write.aggregator as usize];
        by_aggregator[*slot] = index;
        *slot += 1;
    }
    (by_aggregator, starts)
}

fn merge_sends(pieces: &[Piece], stripe_size: u64, avail: u32, first_stripe: u64) -> Vec<ExchangeMessage> {
    let avail = u64::from(avail);
    let mut parts: Vec<ExchangeMessage> = pieces
        .iter()
        .map(|p| {
            let stripe = p.offset / stripe_size;
            let (round, aggregator) = ((stripe - first_stripe) / avail, (stripe % avail) as u32);
            ExchangeMessage { rank: p.rank, round, aggregator, bytes: p.len, pieces: 1 }
        })
        .collect();
    parts.sort_unstable_by_key(|s| (s.rank, s.round, s.aggregator));
    let mut sends: Vec<ExchangeMessage> = Vec::with_capacity(parts.len());
    for part in parts {
        match sends.last_mut() {
            Some(last) if (last.rank, last.round, last.aggregator) == (part.rank, part.round, part.aggregator) => {
                last.bytes += part.bytes;
                last.pieces += 1;
            }
            _ => sends.push(part),
        }
    }
    sends
}

impl CollectivePlan {
    pub fn stripe_size(&self) -> u64 {
        self.stripe_size
    }

    /// The number of aggregators (`avail`).
    pub fn aggregators(&self) -> u32 {
        self.avail
    }

    /// The stripe holding the lowest requested byte; round 0 starts there.
    pub fn first_stripe(&self) -> u64 {
        self.first_stripe
    }

    /// Rounds of the two-phase loop, empty ones in the middle included.
    pub fn round_count(&self) -> u64 {
        self.round_count
    }

    /// The file range `[start, end)` round `round` covers (`end` saturates at `u64::MAX`).
    pub fn round_range(&self, round: u64) -> (u64, u64) {
        let width = u64::from(self.avail) * self.stripe_size;
        let start = round
            .checked_mul(u64::from(self.avail))
            .and_then(|s| s.checked_add(self.first_stripe))
            .and_then(|s| s.checked_mul(self.stripe_size))
            .unwrap_or(u64::MAX);
        (start, start.saturating_add(width))
    }

    /// The stripe aggregator `aggregator` handles in round `round` (it may
    /// have no data there: an empty round).
    pub fn stripe_of(&self, aggregator: u32, round: u64) -> u64 {
        assert!(aggregator < self.avail, "aggregator {aggregator} of {}", self.avail);
        let avail = u64::from(self.avail);
        let round_start = self.first_stripe + round * avail;
        round_start + (u64::from(aggregator) + avail - round_start % avail) % avail
    }

    /// Every piece, in `(offset, rank)` order.
    pub fn pieces(&self) -> &[Piece] {
        &self.pieces
    }

    /// Every non-empty stripe write, in stripe (hence round) order.
    pub fn writes(&self) -> &[StripeWrite] {
        &self.writes
    }

    /// The pieces one aggregator receives for `write`, in offset order.
    pub fn pieces_of(&self, write: &StripeWrite) -> &[Piece] {
        &self.pieces[write.first_piece..write.first_piece + write.piece_count]
    }

    /// `aggregator`'s non-empty stripe writes, in offset order.
    pub fn aggregator_writes(&self, aggregator: u32) -> impl Iterator<Item = &StripeWrite> + '_ {
        let a = aggregator as usize;
        assert!(a < self.avail as usize, "aggregator {aggregator} of {}", self.avail);
        let indices = &self.writes_by_aggregator[self.aggregator_starts[a]..self.aggregator_starts[a + 1]];
        indices.iter().map(|&i| &self.writes[i])
    }

    /// The non-empty stripe writes of round `round`, in aggregator-stripe order.
    pub fn round_writes(&self, round: u64) -> &[StripeWrite] {
        let from = self.writes.partition_point(|w| w.round < round);
        let to = self.writes.partition_point(|w| w.round <= round);
        &self.writes[from..to]
    }

    /// Rounds in which at least one aggregator has data, ascending.
    pub fn busy_rounds(&self) -> impl Iterator<Item = u64> + '_ {
        let writes = &self.writes;
        (0..writes.len()).filter(|&i| i == 0 || writes[i - 1].round != writes[i].round).map(|i| writes[i].round)
    }

    /// Every exchange message, by `(rank, round, aggregator)`.
    pub fn sends(&self) -> &[ExchangeMessage] {
        &self.sends
    }

    /// What `rank` sends, by `(round, aggregator)`.
    pub fn sends_of(&self, rank: u32) -> &[ExchangeMessage] {
        let from = self.sends.partition_point(|s| s.rank < rank);
        let to = self.sends.partition_point(|s| s.rank <= rank);
        &self.sends[from..to]
    }

    /// Bytes requested (overlaps counted each time).
    pub fn total_bytes(&self) -> u64 {
        self.writes.iter().map(|w| w.bytes).sum()
    }

    /// How many aggregators have any data in this call.
    pub fn active_aggregators(&self) -> u32 {
        (0..self.avail as usize).filter(|&a| self.aggregator_starts[a + 1] > self.aggregator_starts[a]).count() as u32
    }

    /// Panics if the plan breaks its own rules (each piece inside one stripe
    /// and its stripe write, stripes owned round-robin, one stripe per
    /// aggregator per round, sends adding up to the pieces).
    pub fn check_invariants(&self) {
        let (size, avail) = (self.stripe_size, u64::from(self.avail));
        assert!(self.pieces.windows(2).all(|p| (p[0].offset, p[0].rank) <= (p[1].offset, p[1].rank)));
        assert!(self.writes.windows(2).all(|w| w[0].stripe < w[1].stripe), "stripe writes out of order");
        let mut covered = 0;
        for write in &self.writes {
            let pieces = self.pieces_of(write);
            assert!(!pieces.is_empty(), "stripe {} written with no data", write.stripe);
            assert_eq!(write.first_piece, covered, "pieces of stripe {} not contiguous", write.stripe);
            covered += write.piece_count;
            assert!(pieces
                .iter()
                .all(|p| p.len > 0 && p.offset / size == write.stripe && (p.end() - 1) / size == write.stripe));
            assert_eq!(u64::from(write.aggregator), write.stripe % avail, "stripe {} misowned", write.stripe);
            assert_eq!(write.round, (write.stripe - self.first_stripe) / avail);
            assert_eq!(self.stripe_of(write.aggregator, write.round), write.stripe);
            assert!(write.start < write.end && write.covered_bytes <= write.end - write.start);
        }
        assert_eq!(covered, self.pieces.len(), "pieces outside every stripe write");
        let sent: u64 = self.sends.iter().map(|s| s.bytes).sum();
        assert_eq!(sent, self.total_bytes(), "exchange messages do not add up to the pieces");
        assert_eq!(self.aggregator_starts.last(), Some(&self.writes.len()));
    }
}

/// When an aggregator asks for its next lockahead window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RefillPolicy {
    /// ROMIO: only when a write falls outside the locked window, so that
    /// write waits for (or races) its own lock request.
    OnMiss,
    /// Also as soon as at most `remaining_stripes` locked stripes lie ahead
    /// of the one being written; the next window is then requested from
    /// just past the current one, while the current one is still in use, so
    /// writes never reach an unlocked stripe when the locks come back in time.
    LowWater { remaining_stripes: u32 },
}

/// One aggregator's lockahead schedule (ROMIO's
/// `ADIOI_LUSTRE_lock_ahead_ioctl`): requests of `num_extents` one-stripe
/// extents spaced `avail * stripe_size` apart, exactly the stripes the
/// aggregator writes.
///
/// Extents are FILE ranges, inclusive, as [`Advice`] takes them: the
/// client's `ladvise` maps each one through the file's layout, and a
/// one-stripe extent becomes one lock on one object (stripe `k mod C`).
///
/// Unlike ROMIO, whose first request always starts at stripe `aggregator`,
/// the first window starts at the aggregator's first stripe at or after the
/// offset it is about to write, so a collective that starts deep in the file
/// does not lock stripes it will never touch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockaheadWindow {
    aggregator: u32,
    avail: u32,
    stripe_size: u64,
    num_extents: u32,
    refill: RefillPolicy,
    /// The first and last locked stripe, both owned by `aggregator`.
    locked: Option<(u64, u64)>,
    /// Requests stop before this stripe (see [`LockaheadWindow::limit_to`]).
    end_stripe: Option<u64>,
}

impl LockaheadWindow {
    /// Panics unless `aggregator < avail`, `stripe_size > 0`,
    /// `1 <= num_extents <= LOCK_AHEAD_NUM_EXTENTS_MAX`, and a low-water mark
    /// is below `num_extents`.
    pub fn new(aggregator: u32, avail: u32, stripe_size: u64, num_extents: u32, refill: RefillPolicy) -> Self {
        assert!(aggregator < avail, "aggregator {aggregator} of {avail}");
        assert!(stripe_size > 0, "stripe size must be positive");
        assert!((1..=LOCK_AHEAD_NUM_EXTENTS_MAX).contains(&num_extents), "{num_extents} lockahead extents per request");
        if let RefillPolicy::LowWater { remaining_stripes } = refill {
            assert!(remaining_stripes < num_extents, "low-water mark {remaining_stripes} >= {num_extents} extents");
        }
        LockaheadWindow { aggregator, avail, stripe_size, num_extents, refill, locked: None, end_stripe: None }
    }

    /// Request no stripe at or past `end_offset`: the end of the data the
    /// collective's exchanged offsets announce. ROMIO always asks for
    /// `num_extents` stripes, past the end of the file if need be; lanefs
    /// locks only what is known to be written (call again as calls reach
    /// further).
    pub fn limit_to(&mut self, end_offset: u64) {
        self.end_stripe = Some(end_offset.div_ceil(self.stripe_size));
    }

    /// The window of `aggregator` for a lock mode, or `None` unless it is lockahead.
    pub fn for_mode(
        mode: CbLockMode,
        aggregator: u32,
        avail: u32,
        stripe_size: u64,
        refill: RefillPolicy,
    ) -> Option<Self> {
        match mode {
            CbLockMode::Lockahead { num_extents, .. } => {
                Some(LockaheadWindow::new(aggregator, avail, stripe_size, num_extents, refill))
            }
            CbLockMode::Default | CbLockMode::Group => None,
        }
    }

    /// The aggregator's first stripe at or after `offset`'s stripe.
    fn own_stripe_from(&self, offset: u64) -> u64 {
        let (stripe, avail) = (offset / self.stripe_size, u64::from(self.avail));
        stripe.saturating_add((u64::from(self.aggregator) + avail - stripe % avail) % avail)
    }

    /// `count` one-stripe extents from stripe `first`, `avail` stripes apart,
    /// stopping early where a stripe would end past `u64::MAX`.
    fn extents(&self, first: u64, count: u32) -> Vec<Extent> {
        let step = u64::from(self.avail);
        let end_stripe = self.end_stripe.unwrap_or(u64::MAX);
        (0..u64::from(count))
            .map_while(|i| {
                let stripe = i.checked_mul(step)?.checked_add(first)?;
                if stripe >= end_stripe {
                    return None;
                }
                let start = stripe.checked_mul(self.stripe_size)?;
                Some(Extent::new(start, start.checked_add(self.stripe_size - 1)?))
            })
            .collect()
    }

    /// The `num_extents` extents a fresh request would cover for a write at
    /// `offset`, starting at the aggregator's own next stripe. Pure.
    pub fn extents_from(&self, offset: u64) -> Vec<Extent> {
        self.extents(self.own_stripe_from(offset), self.num_extents)
    }

    /// `[first start, last end]` of the locked window, if any.
    pub fn locked(&self) -> Option<Extent> {
        self.locked.map(|(first, last)| {
            Extent::new(first * self.stripe_size, last * self.stripe_size + (self.stripe_size - 1))
        })
    }

    /// Whether to request locks before writing at `offset`: no window yet,
    /// `offset` outside it, or (low-water policy) few locked stripes left
    /// ahead of `offset`'s.
    pub fn needs_refill(&self, offset: u64) -> bool {
        let Some((first, last)) = self.locked else { return true };
        let stripe = offset / self.stripe_size;
        if stripe < first || stripe > last {
            return true;
        }
        match self.refill {
            RefillPolicy::OnMiss => false,
            RefillPolicy::LowWater { remaining_stripes } => {
                (last - stripe).div_ceil(u64::from(self.avail)) <= u64::from(remaining_stripes)
            }
        }
    }

    /// The extents to request before writing at `offset`, and records the
    /// new window. On a miss the request starts at the aggregator's own next
    /// stripe (ROMIO's refill); an early (low-water) refill continues just
    /// past the current window and the window keeps the stripes still
    /// ahead. Empty when no stripe fits below `u64::MAX`.
    pub fn refill(&mut self, offset: u64) -> Vec<Extent> {
        let own = self.own_stripe_from(offset);
        let step = u64::from(self.avail);
        let (window_first, request_first) = match self.locked {
            Some((first, last)) if (first..=last).contains(&(offset / self.stripe_size)) => {
                (own, last.checked_add(step))
            }
            _ => (own, Some(own)),
        };
        let Some(request_first) = request_first else { return Vec::new() };
        let extents = self.extents(request_first, self.num_extents);
        if let Some(last_extent) = extents.last() {
            self.locked = Some((window_first, last_extent.start / self.stripe_size));
        }
        extents
    }

    /// [`Self::refill`] as one `llapi_ladvise` call's advices: asynchronous
    /// lockahead in `mode`, with `flags` (the `..._lock_ahead_flags` hint)
    /// added to `LF_ASYNC`.
    pub fn refill_advices(&mut self, offset: u64, mode: AheadMode, flags: u32) -> Vec<Advice> {
        lockahead_advices(&self.refill(offset), mode, flags)
    }
}

/// How many locked stripes an aggregator keeps ahead before it asks for
/// its next window.
pub const REFILL_LOW_WATER_STRIPES: u32 = 1;

/// The lock requests of one file's collective writes (or reads), as Cray's
/// lock modes make them, for every aggregator: whether the whole-file group
/// lock must clear the way before the first lockahead, and which stripes
/// each aggregator asks for before it writes. One schedule for both worlds:
/// the real run's `CollectiveFile` and the simulator's event loop ask it the
/// same questions in the same order, so they send the same lock requests.
#[derive(Clone, Debug)]
pub struct CollectiveLocks {
    mode: CbLockMode,
    ahead: AheadMode,
    avail: u32,
    stripe_size: u64,
    /// The windows of the aggregators asked about so far (a rank asks only
    /// about its own), made at the first question; none unless the mode is
    /// lockahead.
    windows: BTreeMap<u32, LockaheadWindow>,
    /// The current call's end ([`LockaheadWindow::limit_to`]).
    limit: Option<u64>,
    /// The whole-file group lock before lockahead was taken and dropped.
    cleared: bool,
}

impl CollectiveLocks {
    /// The schedule of `avail` aggregators in lock mode `mode`, for writes
    /// (`AheadMode::Write`) or reads (`AheadMode::Read`). A window is
    /// refilled while [`REFILL_LOW_WATER_STRIPES`] locked stripes are still
    /// ahead (ROMIO refills only on a miss, which a window of one extent
    /// still does).
    pub fn new(mode: CbLockMode, ahead: AheadMode, avail: u32, stripe_size: u64) -> Self {
        if let CbLockMode::Lockahead { num_extents, .. } = mode {
            // The checks of a window, made now rather than at the first write.
            let _checked =
                LockaheadWindow::new(0, avail.max(1), stripe_size, num_extents, Self::refill_policy(num_extents));
        }
        CollectiveLocks { mode, ahead, avail, stripe_size, windows: BTreeMap::new(), limit: None, cleared: false }
    }

    fn refill_policy(num_extents: u32) -> RefillPolicy {
        if num_extents > 1 {
            RefillPolicy::LowWater { remaining_stripes: REFILL_LOW_WATER_STRIPES.min(num_extents - 1) }
        } else {
            RefillPolicy::OnMiss
        }
    }

    pub fn mode(&self) -> CbLockMode {
        self.mode
    }

    pub fn uses_lockahead(&self) -> bool {
        matches!(self.mode, CbLockMode::Lockahead { .. })
    }

    /// A call with `plan` begins: windows reach no further than its last
    /// byte (ROMIO asks for `num_extents` stripes whatever the file's size).
    /// True when aggregator 0 must first take and drop a whole-file group
    /// lock, which calls back every lock cached on the file: before the
    /// first lockahead write (ROMIO does it at open).
    pub fn begin_call(&mut self, plan: &CollectivePlan) -> bool {
        // Writes are in stripe order: the last ends furthest.
        let end = plan.writes().last().map_or(0, |w| w.end);
        self.limit = Some(end);
        for window in self.windows.values_mut() {
            window.limit_to(end);
        }
        let clear = self.uses_lockahead() && self.ahead == AheadMode::Write && !self.cleared;
        self.cleared |= clear;
        clear
    }

    /// Before aggregator `aggregator` writes (or reads) its stripe at
    /// `offset`: the lockahead advices to send first (none in other modes,
    /// or while its window holds enough stripes ahead).
    pub fn before_io(&mut self, aggregator: u32, offset: u64) -> Vec<Advice> {
        let CbLockMode::Lockahead { flags, num_extents } = self.mode else { return Vec::new() };
        if aggregator >= self.avail {
            return Vec::new();
        }
        let (ahead, avail, stripe_size, limit) = (self.ahead, self.avail, self.stripe_size, self.limit);
        let window = self.windows.entry(aggregator).or_insert_with(|| {
            let mut window =
                LockaheadWindow::new(aggregator, avail, stripe_size, num_extents, Self::refill_policy(num_extents));
            if let Some(end) = limit {
                window.limit_to(end);
            }
            window
        });
        if window.needs_refill(offset) {
            window.refill_advices(offset, ahead, flags)
        } else {
            Vec::new()
        }
    }
}

/// What one aggregator does in one round of a collective call.
#[derive(Clone, Debug, PartialEq)]
pub struct AggregatorStep {
    /// Its stripe write (or read) this round, with its pieces
    /// ([`CollectivePlan::pieces_of`]).
    pub stripe: StripeWrite,
    /// A write that must read the stripe first: no piece covers some of its
    /// bytes (read-modify-write).
    pub read_first: bool,
    /// Lock requests to send before the stripe's I/O (empty: none).
    pub lock_ahead: Vec<Advice>,
}

/// One round with data of a collective call: its aggregators' steps, by
/// aggregator index.
#[derive(Clone, Debug, PartialEq)]
pub struct RoundSchedule {
    pub round: u64,
    pub steps: Vec<AggregatorStep>,
}

impl RoundSchedule {
    /// The step of aggregator `aggregator`, if it has data this round.
    pub fn step_of(&self, aggregator: u32) -> Option<&AggregatorStep> {
        self.steps.binary_search_by_key(&aggregator, |s| s.stripe.aggregator).ok().map(|i| &self.steps[i])
    }
}

/// A collective call of `plan` as both worlds carry it out: the rounds with
/// data in order, each aggregator's stripe in each, whether it is read
/// first, and the lock requests it sends before it, which `locks` decides
/// (and which this advances, as the call's I/O would). The real run
/// (`CollectiveFile`) and the simulator execute this same schedule, one
/// with MPI and the file system, the other in virtual time. Call
/// [`CollectiveLocks::begin_call`] first.
pub fn schedule_call(plan: &CollectivePlan, locks: &mut CollectiveLocks, writing: bool) -> Vec<RoundSchedule> {
    let mut rounds: Vec<RoundSchedule> = Vec::new();
    for stripe in plan.writes() {
        if rounds.last().is_none_or(|r| r.round != stripe.round) {
            rounds.push(RoundSchedule { round: stripe.round, steps: Vec::new() });
        }
        let step = AggregatorStep {
            stripe: *stripe,
            read_first: writing && stripe.has_holes(),
            lock_ahead: locks.before_io(stripe.aggregator, stripe.start),
        };
        rounds.last_mut().expect("just pushed").steps.push(step);
    }
    for round in &mut rounds {
        round.steps.sort_by_key(|s| s.stripe.aggregator);
    }
    rounds
}

/// Aggregator `aggregator`'s part of [`schedule_call`]: its stripes in round
/// order, each with whether it is read first and the lock requests it sends
/// before it, made without the other aggregators' steps. Each aggregator
/// asks only for its own stripes (its own window of `locks`), so a rank
/// makes its own part alone, in time proportional to it.
pub fn schedule_aggregator(
    plan: &CollectivePlan,
    locks: &mut CollectiveLocks,
    writing: bool,
    aggregator: u32,
) -> Vec<AggregatorStep> {
    plan.aggregator_writes(aggregator)
        .map(|stripe| AggregatorStep {
            stripe: *stripe,
            read_first: writing && stripe.has_holes(),
            lock_ahead: locks.before_io(aggregator, stripe.start),
        })
        .collect()
}

/// Asynchronous lockahead advices for file extents, flags `flags | LF_ASYNC`.
pub fn lockahead_advices(extents: &[Extent], mode: AheadMode, flags: u32) -> Vec<Advice> {
    extents
        .iter()
        .map(|e| Advice { flags: flags | LF_ASYNC, ..Advice::lockahead(mode, e.start, e.end, true) })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lustre_avail_follows_romio() {
        assert_eq!(lustre_avail(16, 4, 1), 4);
        assert_eq!(lustre_avail(16, 4, 3), 12);
        assert_eq!(lustre_avail(6, 4, 3), 4);
        assert_eq!(lustre_avail(3, 4, 1), 2);
        assert_eq!(lustre_avail(5, 12, 1), 4);
        assert_eq!(lustre_avail(1, 7, 1), 1);
    }

    #[test]
    fn stripe_of_finds_each_aggregators_stripe_in_a_round() {
        let plan = plan_collective(&[(0, 5 << 20, 1)], 1 << 20, 4);
        assert_eq!(plan.first_stripe(), 5);
        let round0: Vec<u64> = (0..4).map(|a| plan.stripe_of(a, 0)).collect();
        assert_eq!(round0, vec![8, 5, 6, 7]);
        assert_eq!(plan.stripe_of(0, 1), 12);
        assert_eq!(plan.round_range(1), (9 << 20, 13 << 20));
    }

    #[test]
    fn own_stripe_rounds_up_to_the_aggregators_stripes() {
        let w = LockaheadWindow::new(2, 4, 100, 3, RefillPolicy::OnMiss);
        assert_eq!(w.own_stripe_from(0), 2);
        assert_eq!(w.own_stripe_from(250), 2);
        assert_eq!(w.own_stripe_from(300), 6);
        assert_eq!(w.extents(u64::MAX / 100, 3), vec![]);
    }

    #[test]
    fn each_aggregators_own_schedule_is_its_part_of_the_calls() {
        // Calls of several shapes (interleaved, gappy, starting mid-stripe
        // so that rounds wrap around the aggregators) one after the other:
        // an aggregator scheduling itself alone sends the same lock
        // requests at the same stripes as the whole call's schedule.
        let mib = 1u64 << 20;
        let calls: Vec<Vec<(u32, u64, u64)>> = vec![
            (0..8).map(|r| (r, u64::from(r) * mib, mib)).collect(),
            (0..8).map(|r| (r, 8 * mib + u64::from(r) * 3 * mib / 2, mib)).collect(),
            (0..8).map(|r| (r, 30 * mib + mib / 2 + u64::from(r) * mib, if r == 3 { 0 } else { mib })).collect(),
            (0..8).map(|r| (r, 40 * mib + u64::from(r) * mib / 4, mib / 4)).collect(),
        ];
        for mode in [CbLockMode::Default, CbLockMode::Lockahead { num_extents: 3, flags: 0 }] {
            for avail in [1, 3, 4, 8] {
                let mut whole = CollectiveLocks::new(mode, AheadMode::Write, avail, mib);
                let mut own: Vec<CollectiveLocks> =
                    (0..avail).map(|_| CollectiveLocks::new(mode, AheadMode::Write, avail, mib)).collect();
                for requests in &calls {
                    let plan = plan_collective(requests, mib, avail);
                    whole.begin_call(&plan);
                    let rounds = schedule_call(&plan, &mut whole, true);
                    for (a, locks) in own.iter_mut().enumerate() {
                        locks.begin_call(&plan);
                        let mine = schedule_aggregator(&plan, locks, true, a as u32);
                        let expected: Vec<AggregatorStep> =
                            rounds.iter().filter_map(|r| r.step_of(a as u32).cloned()).collect();
                        assert_eq!(mine, expected, "{mode:?}, aggregator {a} of {avail}");
                    }
                }
            }
        }
    }
}
