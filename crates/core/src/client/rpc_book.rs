//! The client's RPC book: every request sent to an OST that still awaits
//! its reply, by xid, and the xids themselves.
//!
//! What it owns: the RPCs in flight ([`Rpc`], by [`Xid`]), the count of
//! write and of read RPCs in flight per OST (what `max_rpcs_in_flight`
//! bounds and `rpc_stats` shows), and the next xid to hand out.
//!
//! Invariants ([`RpcBook::check_invariants`]):
//! * the write (read) RPCs counted in flight to each OST are exactly the
//!   write (read) RPCs the book lists for it: a count changes only with an
//!   entry, in [`RpcBook::insert`], [`RpcBook::take`],
//!   [`RpcBook::remove_orphan`] and [`RpcBook::retain`];
//! * every listed xid is below the next one handed out (an xid is never
//!   reused, so a late reply can never be taken for another request's);
//! * a write RPC that pins frames pins as many bytes as it sent.
//!
//! A reply is matched to its request by OST, xid and kind
//! ([`RpcBook::take`]); a stray reply leaves the book as it is.

use super::op_table::OpId;
use crate::msg::{CacheAdvice, Cut};
use crate::pages::PageSpan;
use crate::units::{ObjectKey, OstIndex, Xid};
use rustc_hash::FxHashMap;

/// An RPC waiting for its reply.
#[derive(Clone, Debug)]
pub(super) enum Rpc {
    /// `pinned` holds the frames the RPC names until its reply: a driver
    /// that lets the server read them in place (shared memory) relies on it.
    Write {
        key: ObjectKey,
        offset: u64,
        len: u64,
        orphaned: bool,
        pinned: Option<PageSpan>,
    },
    Read {
        op: OpId,
        key: ObjectKey,
        offset: u64,
        len: u64,
    },
    /// `dropped`: dirty bytes past a truncate's size it took out of the
    /// cache, lost if the punch fails.
    Punch {
        op: OpId,
        key: ObjectKey,
        cut: Cut,
        dropped: u64,
    },
    Getattr {
        op: OpId,
        stripe: u32,
        ost: OstIndex,
    },
    /// An fsync's `OST_SYNC` of one object.
    Sync {
        op: OpId,
        key: ObjectKey,
    },
    /// A commit asked because uncommitted bytes pile up (soft sync).
    Commit {
        key: ObjectKey,
    },
    /// Cache advice on `[start, end)` of an object, for an operation
    /// waiting on it, or for none (asynchronous advice).
    Advise {
        op: Option<OpId>,
        key: ObjectKey,
        advice: CacheAdvice,
        start: u64,
        end: u64,
    },
}

impl Rpc {
    /// The OST it was sent to.
    pub(super) fn ost(&self) -> OstIndex {
        match self {
            Rpc::Write { key, .. }
            | Rpc::Read { key, .. }
            | Rpc::Sync { key, .. }
            | Rpc::Punch { key, .. }
            | Rpc::Commit { key }
            | Rpc::Advise { key, .. } => key.ost,
            Rpc::Getattr { ost, .. } => *ost,
        }
    }

    /// Which in-flight count it belongs to, if any.
    fn counted(&self) -> Option<Flight> {
        match self {
            Rpc::Write { .. } => Some(Flight::Write),
            Rpc::Read { .. } => Some(Flight::Read),
            Rpc::Punch { .. } | Rpc::Getattr { .. } | Rpc::Sync { .. } | Rpc::Commit { .. } | Rpc::Advise { .. } => {
                None
            }
        }
    }
}

/// The two kinds of RPC counted in flight per OST.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flight {
    Write,
    Read,
}

#[derive(Debug)]
pub(super) struct RpcBook {
    rpcs: FxHashMap<Xid, Rpc>,
    writes_in_flight: FxHashMap<OstIndex, usize>,
    /// Read RPCs in flight per OST (for `rpc_stats`; reads have no limit).
    reads_in_flight: FxHashMap<OstIndex, usize>,
    xid_next: u64,
}

impl Default for RpcBook {
    fn default() -> Self {
        RpcBook {
            rpcs: FxHashMap::default(),
            writes_in_flight: FxHashMap::default(),
            reads_in_flight: FxHashMap::default(),
            xid_next: 1,
        }
    }
}

impl RpcBook {
    /// A fresh xid, never handed out before.
    pub(super) fn xid(&mut self) -> Xid {
        let x = Xid(self.xid_next);
        self.xid_next += 1;
        x
    }

    fn count_mut(&mut self, flight: Flight, ost: OstIndex) -> &mut usize {
        let map = match flight {
            Flight::Write => &mut self.writes_in_flight,
            Flight::Read => &mut self.reads_in_flight,
        };
        map.entry(ost).or_default()
    }

    /// RPC `xid`, just sent: listed, and counted if a write or a read.
    pub(super) fn insert(&mut self, xid: Xid, rpc: Rpc) {
        assert!(xid.0 < self.xid_next, "RPC book: xid {} was never handed out", xid.0);
        if let Some(flight) = rpc.counted() {
            *self.count_mut(flight, rpc.ost()) += 1;
        }
        let old = self.rpcs.insert(xid, rpc);
        assert!(old.is_none(), "RPC book: xid {} sent twice", xid.0);
    }

    /// The RPC `xid`, taken out, if it went to `from` and `answers` says the
    /// reply is of its kind; a stray reply (an unknown or answered xid,
    /// another OST's, another kind of RPC's) leaves the book as it is.
    pub(super) fn take(&mut self, from: OstIndex, xid: Xid, answers: fn(&Rpc) -> bool) -> Option<Rpc> {
        match self.rpcs.get(&xid) {
            Some(rpc) if rpc.ost() == from && answers(rpc) => {
                let flight = rpc.counted();
                let planted = crate::planted::active(crate::planted::Bug::MiscountedRpc);
                if let Some(flight) = flight.filter(|&f| !(planted && f == Flight::Write)) {
                    let count = self.count_mut(flight, from);
                    assert!(*count > 0, "RPC book: a {flight:?} RPC to {from} taken while none is counted");
                    *count -= 1;
                }
                self.rpcs.remove(&xid)
            }
            _ => None,
        }
    }

    /// Gives up write RPC `xid`, orphaned by an eviction: its reply will
    /// never come (the OST forgot it), and its bytes are counted as lost.
    pub(super) fn remove_orphan(&mut self, xid: Xid) {
        let rpc = self.rpcs.remove(&xid).expect("an orphaned write is listed");
        assert!(matches!(rpc, Rpc::Write { orphaned: true, .. }), "RPC book: {rpc:?} given up as an orphan");
        *self.count_mut(Flight::Write, rpc.ost()) -= 1;
    }

    /// Keeps the RPCs `keep` says to, uncounting the others.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(&mut Rpc) -> bool) {
        let mut dropped: Vec<(Flight, OstIndex)> = Vec::new();
        self.rpcs.retain(|_, rpc| {
            let kept = keep(rpc);
            if !kept {
                dropped.extend(rpc.counted().map(|f| (f, rpc.ost())));
            }
            kept
        });
        for (flight, ost) in dropped {
            *self.count_mut(flight, ost) -= 1;
        }
    }

    /// Every RPC in flight, in no particular order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (Xid, &Rpc)> {
        self.rpcs.iter().map(|(&xid, rpc)| (xid, rpc))
    }

    /// Every RPC in flight, to change what it remembers (never its kind or
    /// its OST: [`RpcBook::check_invariants`] would find the counts wrong).
    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut Rpc> {
        self.rpcs.values_mut()
    }

    /// Whether a write RPC of `key` is in flight.
    pub(super) fn writing(&self, key: ObjectKey) -> bool {
        self.rpcs.values().any(|r| matches!(r, Rpc::Write { key: k, .. } if *k == key))
    }

    /// Read and write RPCs in flight to `ost` now.
    pub(super) fn in_flight(&self, ost: OstIndex) -> (usize, usize) {
        let count = |map: &FxHashMap<OstIndex, usize>| map.get(&ost).copied().unwrap_or(0);
        (count(&self.reads_in_flight), count(&self.writes_in_flight))
    }

    /// Panics if a count disagrees with the RPCs listed, or an entry breaks
    /// the rules of the module doc.
    pub fn check_invariants(&self) {
        let mut writes: FxHashMap<OstIndex, usize> = FxHashMap::default();
        let mut reads: FxHashMap<OstIndex, usize> = FxHashMap::default();
        for (xid, rpc) in &self.rpcs {
            assert!(xid.0 < self.xid_next, "RPC book: xid {} listed but never handed out", xid.0);
            match rpc.counted() {
                Some(Flight::Write) => *writes.entry(rpc.ost()).or_default() += 1,
                Some(Flight::Read) => *reads.entry(rpc.ost()).or_default() += 1,
                None => {}
            }
            if let Rpc::Write { len, pinned: Some(span), .. } = rpc {
                assert_eq!(span.len(), *len, "RPC book: a write RPC pins other frames than it sent");
            }
        }
        for (kind, counted, listed) in
            [("write", &self.writes_in_flight, &writes), ("read", &self.reads_in_flight, &reads)]
        {
            for (ost, &n) in counted {
                let l = listed.get(ost).copied().unwrap_or(0);
                assert_eq!(n, l, "RPC book: {kind} RPCs in flight to {ost} counted {n}, listed {l}");
            }
            for (ost, &l) in listed {
                let n = counted.get(ost).copied().unwrap_or(0);
                assert_eq!(n, l, "RPC book: {kind} RPCs in flight to {ost} counted {n}, listed {l}");
            }
        }
    }
}
