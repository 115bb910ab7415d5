//! Collective MPI-IO: aggregator count and placement, the two-phase plan,
//! the lockahead schedule, and the Cray report formats, each checked against
//! the rules and samples of `mpiio.md` (hints: `mpiio_hints.rs`).

use lanefs_core::client::ladvise::LockaheadResult;
use lanefs_core::client::ladvise::{AheadMode, Validated, ADVICES_PER_CALL_MAX, LF_ASYNC};
use lanefs_core::client::LadviseOutcome;
use lanefs_core::harness::{Harness, HarnessConfig};
use lanefs_core::layout::Layout;
use lanefs_core::ldlm::LockMode;
use lanefs_core::{ClientId, Duration, Extent, ObjectId, ObjectKey, OstIndex};
use lanefs_mpiio::hints::LOCK_AHEAD_NUM_EXTENTS_MAX;
use lanefs_mpiio::plan::lockahead_advices;
use lanefs_mpiio::*;
use proptest::prelude::*;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

fn hints(pairs: &[(&str, &str)]) -> MpiioHints {
    MpiioHints::from_pairs(pairs).unwrap()
}

// ----- aggregator count and placement --------------------------------------

#[test]
fn romio_count_with_cb_nodes_at_least_the_stripe_count() {
    let h = MpiioHints::default();
    assert_eq!(aggregator_rule(&h), AggregatorRule::Romio);
    assert_eq!(aggregator_count(768, 192, 24, &h), 24, "default: one aggregator per OST");
    assert_eq!(aggregator_count(768, 192, 24, &hints(&[("cb_nodes", "48")])), 24, "co_ratio 1");
    let co2 = hints(&[("cb_nodes", "48"), ("romio_lustre_co_ratio", "2")]);
    assert_eq!(aggregator_count(768, 192, 24, &co2), 48);
    let co4 = hints(&[("cb_nodes", "50"), ("romio_lustre_co_ratio", "4")]);
    assert_eq!(aggregator_count(768, 192, 24, &co4), 48, "cb_nodes / stripe count limits");
    let co8 = hints(&[("romio_lustre_co_ratio", "8")]);
    assert_eq!(aggregator_count(768, 192, 24, &co8), 192, "default cb_nodes is one per node");
    assert_eq!(read_aggregator_count(768, 192, 24, &co8), 24, "reads always use co_ratio 1");
    let many = hints(&[("cb_nodes", "1000"), ("romio_lustre_co_ratio", "8")]);
    assert_eq!(aggregator_count(16, 4, 4, &many), 16, "cb_nodes clamped to nprocs");
    assert_eq!(aggregator_count(7, 1, 7, &hints(&[("cb_nodes", "7")])), 7);
}

#[test]
fn romio_count_below_the_stripe_count_is_the_largest_divisor() {
    let cb = |n: &str| hints(&[("cb_nodes", n)]);
    assert_eq!(aggregator_count(768, 192, 24, &cb("10")), 8);
    assert_eq!(aggregator_count(768, 192, 24, &cb("5")), 4);
    assert_eq!(aggregator_count(768, 192, 24, &cb("23")), 12);
    assert_eq!(aggregator_count(64, 16, 7, &cb("6")), 1, "a prime stripe count");
    assert_eq!(aggregator_count(8, 2, 4, &MpiioHints::default()), 2, "two nodes, four stripes");
    assert_eq!(aggregator_count(3, 3, 4, &MpiioHints::default()), 2, "three ranks");
    assert_eq!(aggregator_count(1, 1, 24, &MpiioHints::default()), 1);
}

#[test]
fn cray_count_is_stripe_count_times_multiplier() {
    let mult = |m: &str| hints(&[("cray_cb_nodes_multiplier", m)]);
    assert_eq!(aggregator_rule(&mult("4")), AggregatorRule::Cray);
    assert_eq!(aggregator_count(768, 192, 24, &mult("8")), 192);
    assert_eq!(aggregator_count(768, 192, 24, &mult("4")), 96);
    assert_eq!(aggregator_count(100, 25, 24, &mult("8")), 96, "cut to a multiple of 24 that fits");
    assert_eq!(aggregator_count(10, 10, 24, &mult("8")), 8, "below the stripe count: a divisor");
    let with_cb = hints(&[("cray_cb_nodes_multiplier", "2"), ("cb_nodes", "4")]);
    assert_eq!(aggregator_count(768, 192, 24, &with_cb), 48, "cb_nodes does not apply under Cray's rule");
    // Lock mode alone selects Cray's rule: one aggregator per OST even on two nodes.
    let mode2 = hints(&[("cray_cb_write_lock_mode", "2")]);
    assert_eq!(aggregator_rule(&mode2), AggregatorRule::Cray);
    assert_eq!(aggregator_count(64, 2, 24, &mode2), 24);
    assert_eq!(aggregator_count(64, 2, 24, &MpiioHints::default()), 2);
    assert_eq!(aggregator_rule(&mult("1")), AggregatorRule::Romio);
}

#[test]
fn placement_takes_one_rank_per_node_first() {
    assert_eq!(aggregator_ranks(4, 16, 4), vec![0, 4, 8, 12]);
    assert_eq!(aggregator_ranks(2, 16, 4), vec![0, 8], "spread over the nodes");
    assert_eq!(aggregator_ranks(6, 16, 4), vec![0, 4, 8, 12, 1, 9]);
    assert_eq!(aggregator_ranks(16, 16, 4), vec![0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15]);
    assert_eq!(aggregator_ranks(3, 3, 1), vec![0, 1, 2]);
    // Ten ranks on nodes of 4, 4 and 2: the short node runs out first.
    assert_eq!(aggregator_ranks(10, 10, 4), vec![0, 4, 8, 1, 5, 9, 2, 6, 3, 7]);
    // 192 nodes of 4 ranks, 8 aggregators per OST on 24 OSTs: one per node.
    let ranks = aggregator_ranks(192, 768, 4);
    let mut nodes: Vec<u32> = ranks.iter().map(|r| r / 4).collect();
    nodes.sort_unstable();
    assert_eq!(nodes, (0..192).collect::<Vec<_>>());
    let ranks = aggregator_ranks(24, 768, 4);
    assert_eq!(ranks, (0..24).map(|i| i * 32).collect::<Vec<_>>(), "every 8th node");
}

proptest! {
    #[test]
    fn placement_is_distinct_and_balanced(nprocs in 1u32..300, per_node in 1u32..20, pick in 0.0f64..1.0) {
        let avail = 1 + ((f64::from(nprocs - 1)) * pick) as u32;
        let ranks = aggregator_ranks(avail, nprocs, per_node);
        prop_assert_eq!(ranks.len(), avail as usize);
        let mut sorted = ranks.clone();
        sorted.sort_unstable();
        sorted.dedup();
        prop_assert_eq!(sorted.len(), ranks.len());
        prop_assert!(ranks.iter().all(|&r| r < nprocs));
        let nodes = nprocs.div_ceil(per_node);
        let mut per = vec![0u32; nodes as usize];
        for r in &ranks { per[(r / per_node) as usize] += 1; }
        let capacity = |n: u32| (nprocs - n * per_node).min(per_node);
        // No node gets a second aggregator while another with room has none, and so on.
        for (a, &ca) in per.iter().enumerate() {
            for (b, &cb) in per.iter().enumerate() {
                if cb < capacity(b as u32) {
                    prop_assert!(ca <= cb + 1, "node {} has {} aggregators, node {} {}", a, ca, b, cb);
                }
            }
        }
    }
}

// ----- the two-phase plan --------------------------------------------------

/// `(rank, offset, len)` ranges merged where one rank's ranges touch.
fn merged(mut ranges: Vec<(u32, u64, u64)>) -> Vec<(u32, u64, u64)> {
    ranges.sort_unstable();
    let mut out: Vec<(u32, u64, u64)> = Vec::new();
    for (rank, offset, len) in ranges.into_iter().filter(|r| r.2 > 0) {
        match out.last_mut() {
            Some(last) if last.0 == rank && last.1 + last.2 == offset => last.2 += len,
            _ => out.push((rank, offset, len)),
        }
    }
    out
}

/// Every piece of `plan`, gathered through the aggregators' stripe writes.
fn pieces_by_aggregator(plan: &CollectivePlan) -> Vec<(u32, u64, u64)> {
    (0..plan.aggregators())
        .flat_map(|a| plan.aggregator_writes(a).flat_map(|w| plan.pieces_of(w).to_vec()))
        .map(|p| (p.rank, p.offset, p.len))
        .collect()
}

/// IOR's segmented pattern: `segments` segments of one block per rank.
fn ior_requests(nprocs: u32, segments: u64, block: u64) -> Vec<(u32, u64, u64)> {
    (0..segments)
        .flat_map(|s| (0..nprocs).map(move |r| (r, (s * u64::from(nprocs) + u64::from(r)) * block, block)))
        .collect()
}

#[test]
fn contiguous_blocks_make_one_stripe_per_aggregator_per_round() {
    // 16 ranks each write 4 MiB at rank * 4 MiB; 1 MiB stripes, 4 aggregators.
    let requests: Vec<_> = (0..16).map(|r| (r, u64::from(r) * 4 * MIB, 4 * MIB)).collect();
    let plan = plan_collective(&requests, MIB, 4);
    plan.check_invariants();
    assert_eq!((plan.first_stripe(), plan.round_count(), plan.writes().len()), (0, 16, 64));
    assert_eq!(plan.busy_rounds().collect::<Vec<_>>(), (0..16).collect::<Vec<_>>());
    for round in 0..16 {
        let writes = plan.round_writes(round);
        assert_eq!(writes.iter().map(|w| w.aggregator).collect::<Vec<_>>(), vec![0, 1, 2, 3]);
        assert!(writes.iter().all(|w| w.end - w.start == MIB && w.covered_bytes == MIB && !w.has_holes()));
        assert_eq!(plan.round_range(round), (round * 4 * MIB, (round + 1) * 4 * MIB));
    }
    for a in 0..4 {
        let stripes: Vec<u64> = plan.aggregator_writes(a).map(|w| w.stripe).collect();
        assert_eq!(stripes, (0..16).map(|r| 4 * r + u64::from(a)).collect::<Vec<_>>());
    }
    // Rank r's data is exactly round r: one 1 MiB message to each aggregator.
    for rank in 0..16 {
        let sends = plan.sends_of(rank);
        let expected: Vec<ExchangeMessage> = (0..4)
            .map(|a| ExchangeMessage { rank, round: u64::from(rank), aggregator: a, bytes: MIB, pieces: 1 })
            .collect();
        assert_eq!(sends, expected.as_slice());
    }
    assert_eq!(plan.total_bytes(), 64 * MIB);
    assert_eq!(plan.active_aggregators(), 4);
}

#[test]
fn rounds_start_at_the_lowest_offset_aligned_down() {
    let plan = plan_collective(&[(3, 5 * MIB + 100, 2 * MIB), (1, 13 * MIB, 10)], MIB, 4);
    assert_eq!(plan.first_stripe(), 5);
    assert_eq!(plan.round_range(0), (5 * MIB, 9 * MIB));
    assert_eq!(plan.round_count(), 3, "stripe 13 is in round (13 - 5) / 4 = 2");
    let split: Vec<(u64, u64, u32, u64)> =
        plan.writes().iter().map(|w| (w.stripe, w.start, w.aggregator, w.round)).collect();
    assert_eq!(split, vec![(5, 5 * MIB + 100, 1, 0), (6, 6 * MIB, 2, 0), (7, 7 * MIB, 3, 0), (13, 13 * MIB, 1, 2)]);
    assert_eq!(plan.pieces_of(&plan.writes()[2]), &[Piece { rank: 3, offset: 7 * MIB, len: 100 }]);
    assert_eq!(plan.busy_rounds().collect::<Vec<_>>(), vec![0, 2]);
    assert!(plan.round_writes(1).is_empty(), "a round with no data at all");
    assert_eq!(plan.stripe_of(0, 1), 12, "aggregator 0's (empty) stripe in round 1");
    assert_eq!(plan.active_aggregators(), 3);
    assert_eq!(plan.aggregator_writes(0).count(), 0, "aggregator 0 has only empty rounds");
}

#[test]
fn holes_overlaps_and_shared_stripes() {
    let requests = [(0, 0, 100), (1, 200, 100), (2, 250, 100), (0, 1000, 24), (0, 600, 0)];
    let plan = plan_collective(&requests, 1024, 2);
    let w = plan.writes()[0];
    assert_eq!((w.stripe, w.start, w.end, w.bytes, w.covered_bytes), (0, 0, 1024, 324, 274));
    assert!(w.has_holes());
    let ranks: Vec<u32> = plan.pieces_of(&w).iter().map(|p| p.rank).collect();
    assert_eq!(ranks, vec![0, 1, 2, 0]);
    assert_eq!(plan.sends_of(0), &[ExchangeMessage { rank: 0, round: 0, aggregator: 0, bytes: 124, pieces: 2 }]);
    assert!(plan.sends_of(3).is_empty());
    let empty = plan_collective(&[(0, 4096, 0)], 1024, 2);
    assert_eq!((empty.round_count(), empty.writes().len(), empty.total_bytes()), (0, 0, 0));
    assert_eq!(empty.busy_rounds().count(), 0);
}

#[test]
fn with_several_aggregators_per_ost_each_touches_one_ost() {
    // 4 stripes, multiplier 2: avail = 8, aggregator a on OST a mod 4, every
    // second stripe-sized chunk of that object.
    let layout = Layout::new(
        MIB,
        (0..4).map(|o| ObjectKey { ost: OstIndex(o), object: ObjectId(100 + u64::from(o)) }).collect(),
    )
    .unwrap();
    let avail = aggregator_count(64, 16, 4, &hints(&[("cray_cb_nodes_multiplier", "2")]));
    assert_eq!(avail, 8);
    let requests: Vec<_> = ior_requests(64, 3, 384 * KIB);
    let plan = plan_collective(&requests, MIB, avail);
    plan.check_invariants();
    for a in 0..avail {
        let mut touched = 0;
        for w in plan.aggregator_writes(a) {
            for p in plan.pieces_of(w) {
                let (stripe, object_offset) = layout.file_to_object(p.offset);
                assert_eq!(stripe, a % 4, "aggregator {a} wrote to stripe {stripe}");
                assert_eq!((object_offset / MIB) % 2, u64::from(a / 4), "aggregator {a}'s chunk parity");
                let (last_stripe, _) = layout.file_to_object(p.end() - 1);
                assert_eq!(last_stripe, stripe, "a piece crosses a stripe");
                touched += p.len;
            }
        }
        assert!(touched > 0);
    }
}

#[test]
fn seventy_five_thousand_ranks_plan_in_one_sort() {
    let nprocs = 75_000;
    let requests = ior_requests(nprocs, 4, 256 * KIB);
    let started = std::time::Instant::now();
    let plan = plan_collective(&requests, MIB, 192);
    // A scan per rank would take minutes here; one sort takes well under a second.
    assert!(started.elapsed().as_secs() < 30, "planning took {:?}", started.elapsed());
    plan.check_invariants();
    assert_eq!(plan.pieces().len(), 300_000);
    assert_eq!(plan.writes().len(), 75_000);
    assert_eq!(plan.round_count(), 75_000u64.div_ceil(192));
    assert_eq!(plan.sends().len(), 300_000);
    assert_eq!(plan.total_bytes(), 300_000 * 256 * KIB);
    assert!(plan.writes().iter().all(|w| w.covered_bytes == MIB));
    assert_eq!(plan.sends_of(74_999).len(), 4);
    assert_eq!(pieces_by_aggregator(&plan).len(), 300_000);
}

proptest! {
    /// Every byte of every request lands in exactly one aggregator's pieces,
    /// on a stripe that aggregator owns, in the right round.
    #[test]
    fn every_byte_lands_exactly_once(
        layout in proptest::collection::vec((0u32..40, 0u64..300, 0u64..200), 0..60),
        stripe_size in 1u64..128,
        avail in 1u32..12,
        start in 0u64..10_000,
    ) {
        let mut offset = start;
        let mut requests = Vec::new();
        for (rank, gap, len) in layout {
            offset += gap;
            requests.push((rank, offset, len));
            offset += len;
        }
        let plan = plan_collective(&requests, stripe_size, avail);
        plan.check_invariants();
        prop_assert_eq!(merged(pieces_by_aggregator(&plan)), merged(requests.clone()));
        let requested: u64 = requests.iter().map(|r| r.2).sum();
        prop_assert_eq!(plan.total_bytes(), requested);
        let mut covered = 0;
        for a in 0..avail {
            let mut last_round = None;
            for w in plan.aggregator_writes(a) {
                prop_assert_eq!(w.stripe % u64::from(avail), u64::from(a));
                prop_assert!(last_round < Some(w.round), "two stripes in one round");
                last_round = Some(w.round);
                let (round_start, round_end) = plan.round_range(w.round);
                prop_assert!(round_start <= w.start && w.end <= round_end);
                prop_assert_eq!(round_start % stripe_size, 0);
                covered += w.covered_bytes;
            }
        }
        prop_assert_eq!(covered, requested, "requests do not overlap, so every byte is covered once");
        for rank in 0..40 {
            let sent: u64 = plan.sends_of(rank).iter().map(|s| s.bytes).sum();
            let asked: u64 = requests.iter().filter(|r| r.0 == rank).map(|r| r.2).sum();
            prop_assert_eq!(sent, asked);
        }
    }
}

// ----- lockahead -----------------------------------------------------------

#[test]
fn window_is_the_aggregators_own_stripes_spaced_avail_apart() {
    let mut w = LockaheadWindow::new(1, 4, MIB, 3, RefillPolicy::OnMiss);
    let expected =
        vec![Extent::new(MIB, 2 * MIB - 1), Extent::new(5 * MIB, 6 * MIB - 1), Extent::new(9 * MIB, 10 * MIB - 1)];
    assert_eq!(w.extents_from(0), expected);
    assert_eq!(w.extents_from(MIB + 7), expected);
    assert!(w.needs_refill(MIB));
    assert_eq!(w.refill(0), expected);
    assert_eq!(w.locked(), Some(Extent::new(MIB, 10 * MIB - 1)));
    for offset in [MIB, 5 * MIB + 3, 10 * MIB - 1] {
        assert!(!w.needs_refill(offset), "{offset} is inside the window");
    }
    assert!(w.needs_refill(13 * MIB));
    assert!(w.needs_refill(0), "before the window");
    assert_eq!(w.refill(13 * MIB)[0], Extent::new(13 * MIB, 14 * MIB - 1), "a miss restarts at the write");
    assert_eq!(w.locked(), Some(Extent::new(13 * MIB, 22 * MIB - 1)));
    // A write in a stripe the aggregator does not own: its next own stripe.
    assert_eq!(w.extents_from(30 * MIB)[0], Extent::new(33 * MIB, 34 * MIB - 1));
}

/// Walks `aggregator`'s writes of `plan`, refilling as the window asks;
/// returns the requests made (each a list of stripes).
fn walk(plan: &CollectivePlan, aggregator: u32, num_extents: u32, refill: RefillPolicy) -> Vec<Vec<u64>> {
    let size = plan.stripe_size();
    let mut window = LockaheadWindow::new(aggregator, plan.aggregators(), size, num_extents, refill);
    let mut requests = Vec::new();
    let mut locked = std::collections::BTreeSet::new();
    for write in plan.aggregator_writes(aggregator) {
        if window.needs_refill(write.start) {
            let extents = window.refill(write.start);
            assert!(extents.iter().all(|e| e.len() == size && e.start % size == 0), "one stripe per extent");
            let stripes: Vec<u64> = extents.iter().map(|e| e.start / size).collect();
            locked.extend(stripes.iter().copied());
            requests.push(stripes);
        }
        assert!(locked.contains(&write.stripe), "stripe {} written unlocked", write.stripe);
        let window_extent = window.locked().unwrap();
        assert!(window_extent.contains_offset(write.start) && window_extent.contains_offset(write.end - 1));
    }
    requests
}

#[test]
fn refill_on_miss_locks_exactly_the_stripes_written() {
    let plan = plan_collective(&ior_requests(32, 8, MIB), MIB, 8);
    for a in 0..8 {
        let requests = walk(&plan, a, 10, RefillPolicy::OnMiss);
        assert_eq!(requests.len(), 4, "32 stripes per aggregator, 10 per request");
        let all: Vec<u64> = requests.concat();
        let written: Vec<u64> = plan.aggregator_writes(a).map(|w| w.stripe).collect();
        assert_eq!(&all[..written.len()], written.as_slice(), "locks are the aggregator's stripes in order");
        assert!(all.iter().all(|s| s % 8 == u64::from(a)));
        assert!(requests.iter().all(|r| r.len() == 10));
    }
}

#[test]
fn low_water_refills_early_and_never_twice() {
    let plan = plan_collective(&ior_requests(32, 8, MIB), MIB, 8);
    let mut w = LockaheadWindow::new(1, 8, MIB, 4, RefillPolicy::LowWater { remaining_stripes: 1 });
    assert_eq!(w.refill(MIB).len(), 4); // stripes 1, 9, 17, 25
    assert!(!w.needs_refill(MIB) && !w.needs_refill(9 * MIB));
    assert!(w.needs_refill(17 * MIB), "one locked stripe left ahead");
    let next: Vec<u64> = w.refill(17 * MIB).iter().map(|e| e.start / MIB).collect();
    assert_eq!(next, vec![33, 41, 49, 57], "continues past the window");
    assert_eq!(w.locked(), Some(Extent::new(17 * MIB, 58 * MIB - 1)));
    assert!(!w.needs_refill(25 * MIB));

    for a in 0..8 {
        let requests = walk(&plan, a, 10, RefillPolicy::LowWater { remaining_stripes: 3 });
        let mut all = requests.concat();
        let count = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), count, "aggregator {a} requested a stripe twice");
        assert!(all.iter().all(|s| s % 8 == u64::from(a)));
    }
}

#[test]
fn advices_are_asynchronous_lockahead_on_file_ranges() {
    let mut w = LockaheadWindow::new(2, 4, MIB, LOCK_AHEAD_NUM_EXTENTS_MAX, RefillPolicy::OnMiss);
    let advices = w.refill_advices(0, AheadMode::Write, 0);
    assert_eq!(advices.len(), ADVICES_PER_CALL_MAX - 1, "fits one ladvise call");
    for (i, advice) in (0u64..).zip(&advices) {
        let start = (2 + 4 * i) * MIB;
        let expected = Validated::Lockahead { mode: AheadMode::Write, start, end: start + MIB - 1, asynchronous: true };
        assert_eq!(advice.validate(), Ok(expected));
    }
    let flagged = lockahead_advices(&[Extent::new(0, MIB - 1)], AheadMode::Read, 1);
    assert_eq!(flagged[0].flags, LF_ASYNC);
    let mode =
        hints(&[("cray_cb_write_lock_mode", "2"), ("romio_lustre_cb_lock_ahead_num_extents", "7")]).write_lock_mode();
    let window = LockaheadWindow::for_mode(mode, 0, 4, MIB, RefillPolicy::OnMiss).unwrap();
    assert_eq!(window.extents_from(0).len(), 7);
    assert!(LockaheadWindow::for_mode(CbLockMode::Group, 0, 4, MIB, RefillPolicy::OnMiss).is_none());
}

/// Two aggregators sharing OST 0 (4 stripes, 8 aggregators) lock ahead
/// through real clients: every lock is granted exactly, none conflicts, and
/// their writes need no further lock traffic.
#[test]
fn two_aggregators_share_an_ost_through_the_client() {
    const A: ClientId = ClientId(0);
    const B: ClientId = ClientId(1);
    let mut h = Harness::new(HarnessConfig { clients: 2, osts: 4, ..Default::default() }).unwrap();
    let layout = h.create_layout(MIB, 4, Some(0)).unwrap();
    let (fa, fb) = (h.open(A, layout.clone()), h.open(B, layout));
    let mut window_a = LockaheadWindow::new(0, 8, MIB, 5, RefillPolicy::OnMiss);
    let mut window_b = LockaheadWindow::new(4, 8, MIB, 5, RefillPolicy::OnMiss);
    for (c, fh, advices) in [
        (A, fa, window_a.refill_advices(0, AheadMode::Write, 0)),
        (B, fb, window_b.refill_advices(0, AheadMode::Write, 0)),
    ] {
        match h.ladvise(c, fh, &advices).unwrap() {
            LadviseOutcome::Results(results) => assert_eq!(results, vec![LockaheadResult::Sent; 5]),
            other => panic!("expected asynchronous results, got {other:?}"),
        }
    }
    h.drive().unwrap();
    let lc = h.lock_counters();
    assert_eq!((lc.enqueues, lc.grants, lc.refusals, lc.callbacks), (10, 10, 0, 0));
    let mut granted: Vec<(ClientId, LockMode, Extent)> =
        h.ost(OstIndex(0)).locks().granted_locks().map(|(_, c, _, mode, extent)| (c, mode, extent)).collect();
    granted.sort_by_key(|g| g.2);
    let expected: Vec<_> = (0..10)
        .map(|chunk| {
            (
                if chunk % 2 == 0 { A } else { B },
                LockMode::ProtectedWrite,
                Extent::new(chunk * MIB, (chunk + 1) * MIB - 1),
            )
        })
        .collect();
    assert_eq!(granted, expected, "aggregator 0 locks every even chunk of OST 0's object, aggregator 4 every odd");
    for o in 1..4 {
        assert_eq!(h.ost(OstIndex(o)).locks().granted_locks().count(), 0);
    }
    let wa = h.write(A, fa, 8 * MIB, vec![1; MIB as usize]);
    let wb = h.write(B, fb, 4 * MIB, vec![2; MIB as usize]);
    h.wait_ok(A, wa);
    h.wait_ok(B, wb);
    h.drive().unwrap();
    let lc = h.lock_counters();
    assert_eq!((lc.enqueues, lc.callbacks), (10, 0), "the writes used their lockahead locks");
}

// ----- reports -------------------------------------------------------------

const STATS_SAMPLE: &str = "\
+--------------------------------------------------------+
| MPIIO write access patterns for wrfout_d01
|   independent writes      = 2
|   collective writes       = 638400
|   independent writers     = 1
|   aggregators             = 64
|   stripe count            = 4
|   stripe size             = 1048576
|   system writes           = 82334
|   stripe sized writes     = 82091
|   aggregators active      = 177840,0,0,460560 (1, <= 32, > 32, 64)
|   total bytes for writes  = 86185017344 = 82192 MiB = 80 GiB
|   ave system write size   = 1046770
|   read-modify-write count = 0
|   read-modify-write bytes = 0
|   number of write gaps    = 0
|   ave write gap size      = NA
+--------------------------------------------------------+
";

fn sample_stats() -> MpiioStats {
    MpiioStats {
        independent_ops: 2,
        collective_ops: 638400,
        independent_ranks: 1,
        aggregators: 64,
        stripe_count: 4,
        stripe_size: 1048576,
        system_ops: 82334,
        // Not printed: the sample's average (1046770) says the system writes
        // moved between 82334 * 1046770 and 82334 * 1046771 - 1 bytes, a
        // little less than the total requested.
        system_bytes: 82334 * 1046770,
        stripe_sized_ops: 82091,
        aggregators_active: AggregatorsActive { one: 177840, at_most_half: 0, more_than_half: 0, all: 460560 },
        total_bytes: 86185017344,
        rmw_count: 0,
        rmw_bytes: 0,
        gaps: 0,
        gap_bytes: 0,
    }
}

#[test]
fn write_stats_match_the_sample_line_by_line() {
    let text = format_write_stats("wrfout_d01", &sample_stats());
    for (i, (got, want)) in text.lines().zip(STATS_SAMPLE.lines()).enumerate() {
        assert_eq!(got, want, "line {i}");
    }
    assert_eq!(text, STATS_SAMPLE);
}

#[test]
fn read_stats_have_the_same_shape_without_aggregator_and_rmw_lines() {
    let mut stats = sample_stats();
    stats.gaps = 3;
    stats.gap_bytes = 3001;
    let text = format_read_stats("wrfout_d01", &stats);
    let expected = "\
+--------------------------------------------------------+
| MPIIO read access patterns for wrfout_d01
|   independent reads       = 2
|   collective reads        = 638400
|   independent readers     = 1
|   aggregators             = 64
|   stripe count            = 4
|   stripe size             = 1048576
|   system reads            = 82334
|   stripe sized reads      = 82091
|   total bytes for reads   = 86185017344 = 82192 MiB = 80 GiB
|   ave system read size    = 1046770
|   number of read gaps     = 3
|   ave read gap size       = 1000
+--------------------------------------------------------+
";
    assert_eq!(text, expected);
    let empty = format_read_stats("f", &MpiioStats::new(1, 1, MIB));
    assert!(empty.contains("|   ave system read size    = NA\n"));
}

#[test]
fn aggregators_active_buckets() {
    let mut one = AggregatorsActive::default();
    one.record(1, 1, 192);
    assert_eq!(one, AggregatorsActive { one: 192, ..Default::default() });
    let stats = MpiioStats { aggregators: 1, aggregators_active: one, ..Default::default() };
    assert!(format_write_stats("cube", &stats).contains("|   aggregators active      = 192,0,0,0 (1, <= 1, > 1, 1)\n"));
    let mut b = AggregatorsActive::default();
    for active in [1, 2, 32, 33, 63, 64, 0] {
        b.record(active, 64, 1);
    }
    assert_eq!(b, AggregatorsActive { one: 1, at_most_half: 3, more_than_half: 2, all: 1 });
}

#[test]
fn stats_count_a_planned_collective() {
    // Two full stripes, one partial stripe with a hole, on 4 aggregators.
    let requests = [(0, 0, 2 * MIB), (1, 2 * MIB, 100), (2, 2 * MIB + 200, 100)];
    let plan = plan_collective(&requests, MIB, 4);
    let mut stats = MpiioStats::new(4, 4, MIB);
    stats.record_collective_write(&plan, 3);
    stats.record_independent(8 * MIB, MIB);
    stats.record_independent(9 * MIB + 1, MIB);
    assert_eq!((stats.collective_ops, stats.independent_ops), (3, 2));
    assert_eq!((stats.system_ops, stats.stripe_sized_ops), (5, 3));
    assert_eq!(stats.aggregators_active, AggregatorsActive { more_than_half: 3, ..Default::default() }, "3 of 4");
    assert_eq!((stats.rmw_count, stats.rmw_bytes), (1, 300));
    assert_eq!(stats.total_bytes, 2 * MIB + 200 + 2 * MIB);
    assert_eq!(stats.system_bytes, 2 * MIB + 300 + 2 * MIB, "the hole is written too");
    let mut read = MpiioStats::new(4, 4, MIB);
    read.record_collective_read(&plan, 3);
    assert_eq!((read.system_ops, read.rmw_count, read.aggregators_active), (3, 0, AggregatorsActive::default()));
}

const TIMERS_SAMPLE: &str = "\
| MPIIO write by phases, writers only, for wrfout_d01
|                              min          max          ave
|   file write time   =       50.28        71.02        61.69   (seconds)
|   time scale: 1 = 2**N clock ticks   min          max          ave     High file write percentage
|   wait for coll     =    27883170     38036293     33823494   5%
|   collective        =      216151       311404       265380   0%
|   exchange/write    =      432356       484632       463949   0%
|   data send         =    52859942    101826753     75238921  12%
|   file write        =   265243604    374646356    325433382  52%
|   other             =   154855180    212509150    181886450  29%
|   data send BW (MiB/s)  =       80.916
|   raw write BW (MiB/s)  =     1332.366
|   net write BW (MiB/s)  =      698.137
";

fn secs(centis: u64) -> Duration {
    Duration::from_ms(centis * 10)
}

#[test]
fn timers_header_and_file_write_line_match_the_sample() {
    let writers: Vec<MpiioTimers> =
        [5028, 7102, 6377].iter().map(|&c| MpiioTimers { file_write: secs(c), ..Default::default() }).collect();
    let text = format_write_timers("wrfout_d01", &writers, 0, Duration::ZERO);
    let got: Vec<&str> = text.lines().collect();
    let want: Vec<&str> = TIMERS_SAMPLE.lines().collect();
    assert_eq!(got[..3], want[..3]);
    assert_eq!(
        got[3],
        "|   time scale: seconds                min          max          ave     High file write percentage"
    );
    assert_eq!(got[3].find("min"), want[3].find("min"), "columns stay where the sample has them");
}

/// The sample's tick counts, read as microseconds, give its percentages and
/// column layout (each number printed in seconds, in the same 12 columns).
#[test]
fn timers_phase_lines_match_the_sample_in_seconds() {
    let want: Vec<&str> = TIMERS_SAMPLE.lines().skip(4).take(6).collect();
    let columns: Vec<Vec<u64>> = want
        .iter()
        .map(|line| {
            let numbers = line.split('=').nth(1).unwrap();
            numbers.split_whitespace().take(3).map(|n| n.parse().unwrap()).collect()
        })
        .collect();
    // Three writers: all minima, all maxima, and the one that makes the sample's average.
    let writer = |pick: &dyn Fn(&[u64]) -> u64| {
        let d = |phase: usize| Duration::from_us(pick(&columns[phase]));
        MpiioTimers {
            wait_for_coll: d(0),
            collective: d(1),
            exchange_write: d(2),
            data_send: d(3),
            lock_mode: None,
            file_write: d(4),
            other: d(5),
            bytes: 0,
        }
    };
    let writers = [writer(&|c| c[0]), writer(&|c| c[1]), writer(&|c| 3 * c[2] - c[0] - c[1])];
    let text = format_write_timers("wrfout_d01", &writers, 0, Duration::ZERO);
    let got: Vec<&str> = text.lines().skip(4).take(6).collect();
    for (got, want) in got.iter().zip(&want) {
        let (label, numbers) = want.split_at(want.find('=').unwrap() + 1);
        let mut expected = label.to_string();
        let tokens: Vec<&str> = numbers.split_whitespace().collect();
        for (i, token) in tokens[..3].iter().enumerate() {
            let seconds = format!("{:.6}", token.parse::<f64>().unwrap() / 1e6);
            expected.push_str(&format!("{}{seconds:>12}", if i == 0 { "" } else { " " }));
        }
        expected.push_str(&format!(" {:>4}", tokens[3]));
        assert_eq!(*got, expected);
    }
    assert!(!text.contains("lock mode"), "no lockahead, no lock mode line");
}

#[test]
fn timers_bandwidths_and_lock_mode_line() {
    let writer = |file_write_s: u64, lock_ms: u64| MpiioTimers {
        data_send: Duration::from_secs(4),
        lock_mode: Some(Duration::from_ms(lock_ms)),
        file_write: Duration::from_secs(file_write_s),
        other: Duration::from_secs(1),
        bytes: 500 * MIB,
        ..Default::default()
    };
    let writers = [writer(2, 250), writer(8, 750)];
    assert_eq!(MpiioTimers::total_bytes(&writers), 1000 * MIB);
    let text = format_write_timers("shared.dat", &writers, 1000 * MIB, Duration::from_secs(10));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 14);
    assert_eq!(lines[0], "| MPIIO write by phases, writers only, for shared.dat");
    assert_eq!(lines[2], "|   file write time   =        2.00         8.00         5.00   (seconds)");
    assert_eq!(lines[7], "|   data send         =    4.000000     4.000000     4.000000  38%");
    assert_eq!(lines[8], "|   lock mode         =    0.250000     0.750000     0.500000   4%");
    assert_eq!(lines[9], "|   file write        =    2.000000     8.000000     5.000000  47%");
    assert_eq!(lines[11], "|   data send BW (MiB/s)  =      250.000", "bytes / average data send time");
    assert_eq!(lines[12], "|   raw write BW (MiB/s)  =      200.000", "bytes / average file write");
    assert_eq!(lines[13], "|   net write BW (MiB/s)  =      100.000", "bytes / elapsed");
    let none = format_write_timers("f", &[], 0, Duration::ZERO);
    assert!(none.contains("|   net write BW (MiB/s)  =           NA\n"), "{none}");
}

#[test]
fn a_limited_window_locks_only_the_announced_data() {
    use lanefs_mpiio::plan::{LockaheadWindow, RefillPolicy};
    let mib = 1u64 << 20;
    // Aggregator 1 of 4, 500 extents, but the collective announces 10 stripes.
    let mut w = LockaheadWindow::new(1, 4, mib, 500, RefillPolicy::LowWater { remaining_stripes: 1 });
    w.limit_to(10 * mib);
    let got: Vec<u64> = w.refill(mib).iter().map(|e| e.start / mib).collect();
    assert_eq!(got, vec![1, 5, 9], "only this aggregator's stripes below stripe 10");
    assert!(!w.needs_refill(mib));
    // The next call announces more: a write past the window refills from there.
    w.limit_to(20 * mib);
    assert!(w.needs_refill(13 * mib));
    let got: Vec<u64> = w.refill(13 * mib).iter().map(|e| e.start / mib).collect();
    assert_eq!(got, vec![13, 17]);
}

/// The lock schedule both worlds ask: the whole-file group lock once, before
/// the first lockahead write call (never for reads); each aggregator's
/// window covers its own stripes, no further than the call's last byte.
#[test]
fn collective_locks_clear_once_and_lock_only_the_aggregators_stripes_of_the_call() {
    let mib = 1u64 << 20;
    let h = hints(&[("cray_cb_write_lock_mode", "2"), ("romio_lustre_cb_lock_ahead_num_extents", "8")]);
    let mut locks = CollectiveLocks::new(h.write_lock_mode(), AheadMode::Write, 4, mib);
    // 8 ranks write 1 MiB each, one after the other: stripes 0..8.
    let requests: Vec<(u32, u64, u64)> = (0..8).map(|r| (r, u64::from(r) * mib, mib)).collect();
    let plan = plan_collective(&requests, mib, 4);
    assert!(locks.begin_call(&plan), "the first call clears the file");
    let advices = locks.before_io(1, mib);
    let stripes: Vec<u64> = advices.iter().map(|a| a.start / mib).collect();
    assert_eq!(stripes, vec![1, 5], "aggregator 1's stripes of this call, not 8 of them");
    assert!(locks.before_io(1, 5 * mib).is_empty(), "its window already holds stripe 5");
    let next: Vec<(u32, u64, u64)> = (0..8).map(|r| (r, (8 + u64::from(r)) * mib, mib)).collect();
    assert!(!locks.begin_call(&plan_collective(&next, mib, 4)), "cleared once");
    assert_eq!(locks.before_io(1, 9 * mib).iter().map(|a| a.start / mib).collect::<Vec<_>>(), vec![9, 13]);

    let mut reads = CollectiveLocks::new(h.write_lock_mode(), AheadMode::Read, 4, mib);
    assert!(!reads.begin_call(&plan), "reads never take the clearing group lock");
    let none = CollectiveLocks::new(hints(&[]).write_lock_mode(), AheadMode::Write, 4, mib);
    assert!(!none.uses_lockahead());
}

/// The call schedule both worlds execute: the rounds with data, each
/// aggregator's stripe once per round in aggregator order, read first only
/// when a write has holes, and the lock requests of the lock schedule.
#[test]
fn a_call_schedule_lists_each_rounds_aggregator_steps() {
    let mib = 1u64 << 20;
    // Stripes 0..6 over 2 aggregators; rank 5 leaves a hole in stripe 5.
    let mut requests: Vec<(u32, u64, u64)> = (0..5).map(|r| (r, u64::from(r) * mib, mib)).collect();
    requests.push((5, 5 * mib, mib / 2));
    requests.push((6, 5 * mib + mib * 3 / 4, mib / 4));
    let plan = plan_collective(&requests, mib, 2);
    let h = hints(&[("cray_cb_write_lock_mode", "2"), ("romio_lustre_cb_lock_ahead_num_extents", "2")]);
    let mut locks = CollectiveLocks::new(h.write_lock_mode(), AheadMode::Write, 2, mib);
    locks.begin_call(&plan);
    let schedule = schedule_call(&plan, &mut locks, true);
    assert_eq!(schedule.iter().map(|r| r.round).collect::<Vec<_>>(), vec![0, 1, 2]);
    for round in &schedule {
        let aggregators: Vec<u32> = round.steps.iter().map(|s| s.stripe.aggregator).collect();
        assert_eq!(aggregators, vec![0, 1], "round {}", round.round);
    }
    let holes: Vec<u64> =
        schedule.iter().flat_map(|r| &r.steps).filter(|s| s.read_first).map(|s| s.stripe.stripe).collect();
    assert_eq!(holes, vec![5], "only stripe 5 has a hole");
    let first_locks: Vec<u64> = schedule[0].step_of(1).unwrap().lock_ahead.iter().map(|a| a.start / mib).collect();
    assert_eq!(first_locks, vec![1, 3], "aggregator 1 locks its next two stripes");
    let mut reads = CollectiveLocks::new(hints(&[]).read_lock_mode(), AheadMode::Read, 2, mib);
    let reading = schedule_call(&plan, &mut reads, false);
    assert!(reading.iter().flat_map(|r| &r.steps).all(|s| !s.read_first && s.lock_ahead.is_empty()));
}
