//! Stripe settings: validating them, inheriting them, and allocating objects.
//!
//! A new file's striping is resolved field by field: each of count, size
//! and starting OST comes from the `Create` request if it sets it, else from
//! the nearest directory above the file that sets it (its parent first, the
//! root last), else from [`MdsConfig`]. Directory defaults are read when the
//! file is created, not copied at `mkdir`, so a `SetStripe` on `/a` applies
//! to files created later anywhere below `/a` that no nearer directory
//! overrides. The OST pool (see [`crate::pools`]) is a field like the
//! others.
//!
//! Allocation (Lustre's round robin without QoS): a file with stripe count
//! `C` and starting OST `s` gets objects on OSTs `s, s+1, ... s+C-1` (mod
//! the OST count), so on `C` distinct OSTs. When the starting OST is not
//! given (-1), `s` is a persisted round-robin counter modulo the OST count;
//! the counter advances by one per file that uses it (files with an explicit
//! start do not disturb the rotation). Each OST has a persisted next-object
//! counter starting at 1, so object ids are unique per OST forever.
//!
//! A file in an OST pool is allocated the same way among the pool's
//! members alone, in index order (`s` and the following members, with
//! wrap-around), from the pool's own round-robin counter; its starting
//! OST, if given, must be a member. Count -1 means all the pool's OSTs.
//!
//! Objects come only from each OST's pool of objects it has created in
//! advance (Lustre's precreation, see [`crate::objects`]): ids from the
//! next-object counter up to the OST's last reported `LAST_ID`. When an
//! OST's pool is empty (its OSS is down, or has not kept up), a file whose
//! starting OST the MDS chooses skips it, as Lustre's round-robin allocator
//! skips OSTs it cannot reserve an object on: the file takes the next OSTs
//! in order that have objects. A file with an explicit starting OST, or one
//! that needs every OST, gets no substitute: the create fails with
//! [`MdsError::NoObjects`] naming the OST.
//!
//! Overstriping (`lfs setstripe -C`) lets the count exceed the OSTs: the
//! same rotation goes round them as often as the count needs (an OST whose
//! pool of objects is empty drops out of the rotation when the start was
//! the MDS's choice), and a count of -N gives N stripes on each OST. An
//! OST list (`-o`) names each stripe's OST, in order; nothing is skipped.
//!
//! Decisions that differ from Lustre, on purpose:
//! - An OST list is a file's alone: a directory default with one is
//!   refused (a pool of those OSTs does the same for files below it).
//! - A stripe count above the OST count is refused with a message naming
//!   both, where Lustre silently caps: someone asking for 8 stripes on 4 OSTs
//!   expects 8 OSTs' bandwidth and should learn they will not get it. Count
//!   -1 ("all") is the way to ask for as many as exist. Because OSTs can only
//!   be added, a stored directory default that was valid stays valid.
//! - Stripe sizes must be below 4 GiB (Lustre's limit too), which keeps
//!   every stored value inside SQLite's 64-bit signed integers.
//! - The same holds in a pool: a count above the pool's size is refused,
//!   naming both, and so is a starting OST outside the pool (Lustre
//!   ignores it) and a file in an empty or undefined pool (Lustre then
//!   uses all OSTs).

use crate::pools;
use crate::schema::{self, Counter};
use crate::{ComponentSpec, MdsConfig, MdsError, PoolName, StripeDefault, StripeOrigin, StripeSpec};
use lanefs_core::layout::{Layout, LayoutError, COMPONENT_COUNT_MAX, STRIPE_COUNT_MAX, STRIPE_SIZE_UNIT};
use lanefs_core::units::{ObjectId, ObjectKey, OstIndex};
use rusqlite::Connection;

/// Stripe sizes must be at most this: the largest multiple of 64 KiB below 4 GiB.
pub const STRIPE_SIZE_MAX: u64 = (1 << 32) - STRIPE_SIZE_UNIT;

/// A new file's striping, every field resolved and checked against the
/// OSTs it may use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LayoutPlan {
    pub stripe_count: u32,
    pub stripe_size: u64,
    /// `None`: take the next round-robin OST.
    pub start_ost: Option<OstIndex>,
    /// The pool the file is created in, whose members `osts` are.
    pub pool: Option<PoolName>,
    /// The OSTs the file may use, in index order: all, or its pool's;
    /// with `listed`, its stripes' OSTs, in stripe order.
    pub osts: Vec<OstIndex>,
    /// Stripes may share an OST: allocation goes round `osts` as often as
    /// the count needs (not read for a `listed` plan, whose list says
    /// where each stripe goes, repeats and all).
    pub overstripe: bool,
    /// `osts` is the file's own OST list (`-o`): stripe `i` on `osts[i]`,
    /// none skipped.
    pub listed: bool,
}

/// A pool a file is created in: its name and members (in index order, at
/// least one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PoolMembers {
    pub name: PoolName,
    pub osts: Vec<OstIndex>,
}

/// `spec` with Lustre's zero spellings of "inherit" turned into `None`, each
/// set field checked on its own against `ost_count`.
pub(crate) fn normalize(spec: &StripeSpec, ost_count: u32) -> Result<StripeSpec, MdsError> {
    if let Some(parts) = &spec.components {
        return normalize_components(spec, parts, ost_count);
    }
    let spec = StripeSpec {
        count: spec.count.filter(|&count| count != 0),
        size: spec.size.filter(|&size| size != 0),
        start_ost: spec.start_ost,
        pool: spec.pool,
        overstripe: spec.overstripe,
        osts: spec.osts.clone(),
        components: None,
    };
    if spec.overstripe && spec.count.is_none() && spec.osts.is_none() {
        return Err(MdsError::invalid_stripe(
            "overstriping needs a stripe count: -C 1 to -C 2000, or -C -1 to -C -32 for that many stripes on each OST",
        ));
    }
    // With an OST list the count must agree with the list (checked with
    // it): an OST listed twice may make it exceed the OSTs without -C.
    if let Some(count) = spec.count.filter(|_| spec.osts.is_none()) {
        stripe_count_of(count, ost_count, spec.overstripe)?;
    }
    if let Some(osts) = &spec.osts {
        check_ost_list(osts, ost_count)?;
    }
    if let Some(size) = spec.size {
        check_stripe_size(size)?;
    }
    if let Some(start_ost) = spec.start_ost {
        start_ost_of(start_ost, ost_count)?;
    }
    Ok(spec)
}

/// Composite layouts may not end a component past this (SQLite's signed
/// integers; Lustre's largest file is far smaller).
pub const COMPONENT_END_MAX: u64 = i64::MAX as u64;

/// A composite spec: components alone (no plain field beside them), each
/// normalized, ends rising in 64 KiB units to the last at EOF.
fn normalize_components(spec: &StripeSpec, parts: &[ComponentSpec], ost_count: u32) -> Result<StripeSpec, MdsError> {
    let plain = StripeSpec { components: None, ..spec.clone() };
    if plain != StripeSpec::default() {
        return Err(MdsError::invalid_stripe(
            "a composite layout's striping is given per component: put -c, -C, -S, -i, -o and -p after each -E",
        ));
    }
    if parts.is_empty() || parts.len() > COMPONENT_COUNT_MAX {
        return Err(MdsError::invalid_stripe(format!(
            "a composite layout has 1 to {COMPONENT_COUNT_MAX} components (-E), not {}",
            parts.len()
        )));
    }
    let mut start = 0u64;
    let mut normalized = Vec::with_capacity(parts.len());
    for (index, part) in parts.iter().enumerate() {
        if part.stripe.components.is_some() {
            return Err(MdsError::invalid_stripe("a component cannot have components of its own"));
        }
        let last = index == parts.len() - 1;
        let end = part.end;
        let reason = if last && end != u64::MAX {
            Some("the last component must reach the end of the file: end it with -E -1 (or -E eof)".to_string())
        } else if !last && end == u64::MAX {
            Some(format!("component {} reaches the end of the file, but more follow: give it an end", index + 1))
        } else if !last && (end <= start || end % STRIPE_SIZE_UNIT != 0 || end > COMPONENT_END_MAX) {
            Some(format!(
                "component {} ends at {end}: each -E must be past the one before ({start}), a multiple of 64 KiB, \
                 and below 2^63",
                index + 1
            ))
        } else {
            None
        };
        if let Some(reason) = reason {
            return Err(MdsError::invalid_stripe(reason));
        }
        let stripe = normalize(&part.stripe, ost_count).map_err(|error| in_component(index, error))?;
        normalized.push(ComponentSpec { end, stripe });
        start = end;
    }
    Ok(StripeSpec { components: Some(normalized), ..StripeSpec::default() })
}

/// Each component's plan, in file order, with its end: a component's
/// unset stripe size and pool are the previous one's, the rest inherited
/// as a plain file's; `members` gives a named pool's OSTs.
pub(crate) fn plan_components(
    parts: &[ComponentSpec],
    inherited: &StripeDefault,
    ost_count: u32,
    mut members: impl FnMut(&PoolName) -> Result<Vec<OstIndex>, MdsError>,
) -> Result<Vec<(u64, LayoutPlan)>, MdsError> {
    let mut plans: Vec<(u64, LayoutPlan)> = Vec::with_capacity(parts.len());
    for (index, part) in parts.iter().enumerate() {
        let mut spec = part.stripe.clone();
        if let Some((_, previous)) = plans.last() {
            spec.size = spec.size.or(Some(previous.stripe_size));
            spec.pool = spec.pool.or(previous.pool);
        }
        let pool = match pool_of(&spec, inherited) {
            Some(name) => Some(PoolMembers { name, osts: members(&name)? }),
            None => None,
        };
        let plan = plan(&spec, inherited, ost_count, pool.as_ref()).map_err(|error| in_component(index, error))?;
        if part.end != u64::MAX && part.end % plan.stripe_size != 0 {
            return Err(MdsError::invalid_stripe(format!(
                "component {} ends at {}, not a multiple of its stripe size {}: end it at a multiple (Lustre's rule \
                 too), or give it a smaller -S",
                index + 1,
                part.end,
                plan.stripe_size
            )));
        }
        plans.push((part.end, plan));
    }
    Ok(plans)
}

/// A striping error of component `index` (from 0), named so.
fn in_component(index: usize, error: MdsError) -> MdsError {
    match error {
        MdsError::InvalidStripe { reason } => {
            MdsError::InvalidStripe { reason: format!("component {}: {reason}", index + 1) }
        }
        other => other,
    }
}

/// Allocates each component's objects (see [`allocate`]) and returns the
/// composite layout, with each component's pool.
pub(crate) fn allocate_components(
    conn: &Connection,
    plans: &[(u64, LayoutPlan)],
) -> Result<(Layout, Vec<Option<PoolName>>), MdsError> {
    let mut parts = Vec::with_capacity(plans.len());
    for (end, plan) in plans {
        let layout = allocate(conn, plan)?;
        parts.push((*end, plan.stripe_size, layout.objects().to_vec()));
    }
    let layout = Layout::composite(parts).map_err(MdsError::invalid_stripe)?;
    Ok((layout, plans.iter().map(|(_, plan)| plan.pool).collect()))
}

/// Checks a configuration before it touches the database.
pub(crate) fn check_config(config: &MdsConfig) -> Result<(), MdsError> {
    let invalid = |reason: String| MdsError::InvalidConfig { reason };
    if config.ost_count == 0 || config.ost_count > crate::OST_COUNT_MAX {
        let max = crate::OST_COUNT_MAX;
        return Err(invalid(format!("OST count {} is out of range: use 1 to {max}", config.ost_count)));
    }
    let default = StripeDefault {
        count: i64::from(config.default_stripe_count),
        overstripe: false,
        size: config.default_stripe_size,
        start_ost: -1,
        pool: None,
    };
    plan(&StripeSpec::default(), &default, config.ost_count, None)
        .map(|_| ())
        .map_err(|error| invalid(format!("default striping: {error}")))
}

/// The pool a file created with `spec` under `inherited` is in, if any.
pub(crate) fn pool_of(spec: &StripeSpec, inherited: &StripeDefault) -> Option<PoolName> {
    spec.pool.or(inherited.pool)
}

/// Merges `spec` (normalised) over `inherited` and checks the result,
/// within `pool` (the members of [`pool_of`]'s pool) if the file is in one.
pub(crate) fn plan(
    spec: &StripeSpec,
    inherited: &StripeDefault,
    ost_count: u32,
    pool: Option<&PoolMembers>,
) -> Result<LayoutPlan, MdsError> {
    let (count, overstripe) = match spec.count {
        Some(count) => (count, spec.overstripe),
        None => (inherited.count, inherited.overstripe),
    };
    let stripe_size = spec.size.unwrap_or(inherited.size);
    check_stripe_size(stripe_size)?;
    if let Some(list) = &spec.osts {
        return plan_listed(list, spec, stripe_size, ost_count, pool);
    }
    let start_ost = spec.start_ost.unwrap_or(inherited.start_ost);
    let mut stripe_count = stripe_count_of(count, ost_count, overstripe)?;
    let start_ost = start_ost_of(start_ost, ost_count)?;
    // Whatever else the core's layout rules refuse, with its own message.
    let probe_start = start_ost.unwrap_or(OstIndex(0));
    let probe_count = if overstripe { stripe_count.min(ost_count) } else { stripe_count };
    Layout::round_robin(stripe_size, probe_count, probe_start, ost_count, |_| ObjectId(1))
        .map_err(MdsError::invalid_stripe)?;
    let Some(pool) = pool else {
        let osts = (0..ost_count).map(OstIndex).collect();
        return Ok(LayoutPlan { stripe_count, stripe_size, start_ost, pool: None, osts, overstripe, listed: false });
    };
    assert!(!pool.osts.is_empty() && pool.osts.iter().all(|ost| ost.0 < ost_count), "unchecked pool {pool:?}");
    let (full, size) = (pool.name.full(), pool.osts.len() as u32);
    if count < 0 {
        // All the pool's OSTs, or -count stripes on each when overstriping.
        stripe_count = (size * count.unsigned_abs() as u32).min(STRIPE_COUNT_MAX);
    } else if stripe_count > size && !overstripe {
        return Err(MdsError::invalid_stripe(format!(
            "stripe count {stripe_count} exceeds the {size} OSTs of pool {full} ({}): use -c {size} or fewer, \
             or add OSTs to the pool (lanefs pool_add {full} OST...)",
            pools::list_osts(&pool.osts)
        )));
    }
    if let Some(start) = start_ost.filter(|start| !pool.osts.contains(start)) {
        return Err(MdsError::invalid_stripe(format!(
            "starting OST index {} is not in pool {full} ({}): use -i -1, or the index of one of its OSTs",
            start.0,
            pools::list_osts(&pool.osts)
        )));
    }
    let osts = pool.osts.clone();
    Ok(LayoutPlan { stripe_count, stripe_size, start_ost, pool: Some(pool.name), osts, overstripe, listed: false })
}

/// The plan of a file given its OSTs (`-o`): the list's order, from the
/// starting OST if one is given; every OST in the pool if there is one.
fn plan_listed(
    list: &[u32],
    spec: &StripeSpec,
    stripe_size: u64,
    ost_count: u32,
    pool: Option<&PoolMembers>,
) -> Result<LayoutPlan, MdsError> {
    check_ost_list(list, ost_count)?;
    let mut osts: Vec<OstIndex> = list.iter().copied().map(OstIndex).collect();
    let listed = list.iter().map(|ost| ost.to_string()).collect::<Vec<_>>().join(",");
    if let Some(count) = spec.count.filter(|&count| count != osts.len() as i64) {
        return Err(MdsError::invalid_stripe(format!(
            "stripe count {count} does not agree with the {} OSTs listed ({listed}): leave out -c, or list {count} OSTs",
            osts.len()
        )));
    }
    if let Some(start) = start_ost_of(spec.start_ost.unwrap_or(-1), ost_count)? {
        let Some(at) = osts.iter().position(|&ost| ost == start) else {
            return Err(MdsError::invalid_stripe(format!(
                "starting OST index {} is not in the OST list ({listed}): use -i with one of them, or leave it out",
                start.0
            )));
        };
        osts.rotate_left(at);
    }
    if let Some(pool) = pool {
        if let Some(outside) = osts.iter().find(|ost| !pool.osts.contains(ost)) {
            return Err(MdsError::invalid_stripe(format!(
                "OST index {} is not in pool {} ({}): list only its OSTs, or leave out -p",
                outside.0,
                pool.name.full(),
                pools::list_osts(&pool.osts)
            )));
        }
    }
    Ok(LayoutPlan {
        stripe_count: osts.len() as u32,
        stripe_size,
        start_ost: Some(osts[0]),
        pool: pool.map(|pool| pool.name),
        osts,
        overstripe: false,
        listed: true,
    })
}

/// An OST list's length and indices.
fn check_ost_list(list: &[u32], ost_count: u32) -> Result<(), MdsError> {
    if list.is_empty() {
        return Err(MdsError::invalid_stripe("the OST list is empty: give OST indices, e.g. -o 0,2-3"));
    }
    if list.len() > STRIPE_COUNT_MAX as usize {
        return Err(MdsError::invalid_stripe(LayoutError::TooManyStripes { stripe_count: list.len() as u64 }));
    }
    if let Some(&ost) = list.iter().find(|&&ost| ost >= ost_count) {
        return Err(MdsError::invalid_stripe(format!(
            "OST index {ost} in the OST list is out of range for {ost_count} OSTs: use 0 to {}",
            ost_count - 1
        )));
    }
    Ok(())
}

/// Overstriping puts at most this many stripes on each OST with a count
/// of -N (Lustre's `LLAPI_OVERSTRIPE_COUNT_MAX`).
pub const OVERSTRIPE_PER_OST_MAX: i64 = 32;

fn stripe_count_of(count: i64, ost_count: u32, overstripe: bool) -> Result<u32, MdsError> {
    if overstripe {
        return match count {
            _ if (1..=i64::from(STRIPE_COUNT_MAX)).contains(&count) => Ok(count as u32),
            _ if (-OVERSTRIPE_PER_OST_MAX..=-1).contains(&count) => {
                Ok((u64::from(ost_count) * count.unsigned_abs()).min(u64::from(STRIPE_COUNT_MAX)) as u32)
            }
            _ => Err(MdsError::invalid_stripe(format!(
                "overstripe count {count} is not valid: use -C 1 to -C {STRIPE_COUNT_MAX}, or -C -1 to -C \
                 -{OVERSTRIPE_PER_OST_MAX} for that many stripes on each OST"
            ))),
        };
    }
    match count {
        -1 => Ok(ost_count.min(STRIPE_COUNT_MAX)),
        0 => Err(MdsError::invalid_stripe(LayoutError::ZeroStripeCount)),
        ..=-2 => Err(MdsError::invalid_stripe(format!(
            "stripe count {count} is not valid: use -1 for all OSTs, 0 to inherit, or 1 to {}",
            ost_count.min(STRIPE_COUNT_MAX)
        ))),
        _ if count > i64::from(STRIPE_COUNT_MAX) => {
            Err(MdsError::invalid_stripe(LayoutError::TooManyStripes { stripe_count: count as u64 }))
        }
        _ if count > i64::from(ost_count) => {
            Err(MdsError::invalid_stripe(LayoutError::StripeCountExceedsOsts { stripe_count: count as u32, ost_count }))
        }
        _ => Ok(count as u32),
    }
}

fn check_stripe_size(stripe_size: u64) -> Result<(), MdsError> {
    if stripe_size > STRIPE_SIZE_MAX {
        return Err(MdsError::invalid_stripe(format!(
            "stripe size {stripe_size} is 4 GiB or more: the largest is {STRIPE_SIZE_MAX} (4 GiB - 64 KiB); use e.g. -S 4M"
        )));
    }
    let probe = vec![ObjectKey { ost: OstIndex(0), object: ObjectId(1) }];
    Layout::new(stripe_size, probe).map(|_| ()).map_err(MdsError::invalid_stripe)
}

fn start_ost_of(start_ost: i64, ost_count: u32) -> Result<Option<OstIndex>, MdsError> {
    match start_ost {
        -1 => Ok(None),
        _ if start_ost < -1 => Err(MdsError::invalid_stripe(format!(
            "starting OST index {start_ost} is not valid: use -1 to let the MDS choose, or -i 0 to -i {}",
            ost_count - 1
        ))),
        _ if start_ost >= i64::from(ost_count) => {
            let start_ost = OstIndex(u32::try_from(start_ost).unwrap_or(u32::MAX));
            Err(MdsError::invalid_stripe(LayoutError::StartOstOutOfRange { start_ost, ost_count }))
        }
        _ => Ok(Some(OstIndex(start_ost as u32))),
    }
}

/// The composite default a file created below `dirs` (as for
/// [`inherit`]) gets, if the nearest directory with a default of its own
/// has a composite one; its components' unset fields come from
/// [`inherit`]'s plain default.
pub(crate) fn inherited_components(dirs: &[(String, StripeSpec)]) -> Option<Vec<ComponentSpec>> {
    let nearest = dirs.iter().rev().find(|(_, spec)| *spec != StripeSpec::default())?;
    nearest.1.components.clone()
}

/// The default a file created below `dirs` gets: `dirs` are `(path, own
/// default)` from the root down; the deepest one that sets a field wins.
pub(crate) fn inherit(dirs: &[(String, StripeSpec)], config: &MdsConfig) -> (StripeDefault, StripeOrigin) {
    let nearest = |field: fn(&StripeSpec) -> Option<i64>| {
        dirs.iter().rev().find_map(|(path, spec)| field(spec).map(|value| (value, path.clone())))
    };
    let count =
        dirs.iter().rev().find_map(|(path, spec)| spec.count.map(|count| (count, spec.overstripe, path.clone())));
    let size = nearest(|spec| spec.size.map(|size| size as i64));
    let start_ost = nearest(|spec| spec.start_ost);
    let pool = dirs.iter().rev().find_map(|(path, spec)| spec.pool.map(|pool| (pool, path.clone())));
    let default = StripeDefault {
        count: count.as_ref().map_or(i64::from(config.default_stripe_count), |(count, _, _)| *count),
        overstripe: count.as_ref().is_some_and(|(_, overstripe, _)| *overstripe),
        size: size.as_ref().map_or(config.default_stripe_size, |(size, _)| *size as u64),
        start_ost: start_ost.as_ref().map_or(-1, |(start, _)| *start),
        pool: pool.as_ref().map(|(pool, _)| *pool),
    };
    let origin = StripeOrigin {
        count: count.map(|(_, _, path)| path),
        size: size.map(|(_, path)| path),
        start_ost: start_ost.map(|(_, path)| path),
        pool: pool.map(|(_, path)| path),
    };
    (default, origin)
}

/// Allocates a new file's objects from the OSTs' pools of precreated
/// objects, among the plan's OSTs (advancing the persisted counters inside
/// the caller's transaction) and returns its layout, or
/// [`MdsError::NoObjects`] naming an OST whose empty pool the file cannot
/// do without.
pub(crate) fn allocate(conn: &Connection, plan: &LayoutPlan) -> Result<Layout, MdsError> {
    let osts = &plan.osts;
    assert!(plan.stripe_count >= 1, "unchecked plan {plan:?}");
    if plan.listed {
        return allocate_listed(conn, plan);
    }
    assert!(plan.overstripe || plan.stripe_count as usize <= osts.len(), "unchecked plan {plan:?}");
    let candidates = osts.len() as u64;
    let (start_position, may_skip) = match plan.start_ost {
        Some(start_ost) => {
            let position = osts.iter().position(|&ost| ost == start_ost).expect("a checked start is a candidate");
            (position as u64, false)
        }
        None => {
            let turn = match &plan.pool {
                Some(pool) => pools::take_round_robin(conn, pool)?,
                None => schema::take_counter(conn, Counter::RoundRobin)?,
            };
            (turn % candidates, true)
        }
    };
    let start_ost = osts[start_position as usize];
    let stripe_count = plan.stripe_count as usize;
    let mut objects = Vec::with_capacity(stripe_count);
    let mut first_empty = None;
    // OSTs found without objects: skipped on later rounds (overstriping).
    let mut empty = std::collections::BTreeSet::new();
    let mut step = 0;
    while objects.len() < stripe_count && empty.len() < osts.len() {
        if !plan.overstripe && step == candidates {
            break;
        }
        let ost = osts[((start_position + step) % candidates) as usize];
        step += 1;
        if empty.contains(&ost) {
            continue;
        }
        match schema::take_object_id(conn, ost)? {
            Some(object) => objects.push(ObjectKey { ost, object }),
            None => {
                first_empty.get_or_insert(ost);
                empty.insert(ost);
                if !may_skip {
                    break;
                }
            }
        }
    }
    if objects.len() < stripe_count {
        let ost = first_empty.expect("an allocation falls short only at an empty pool");
        let reason = "its pool of precreated objects is empty (the MDS refills it from the OST's OSS)".to_string();
        return Err(MdsError::NoObjects { ost: ost.0, reason });
    }
    let layout = Layout::new(plan.stripe_size, objects).expect("a checked plan gives a valid layout");
    assert!(may_skip || layout.stripe_offset() == start_ost);
    Ok(layout)
}

/// A file's objects on the OSTs of its list, in order; an OST without
/// objects fails the create (the list names it, so no other will do).
fn allocate_listed(conn: &Connection, plan: &LayoutPlan) -> Result<Layout, MdsError> {
    let mut objects = Vec::with_capacity(plan.osts.len());
    for &ost in &plan.osts {
        let Some(object) = schema::take_object_id(conn, ost)? else {
            let reason = "its pool of precreated objects is empty (the MDS refills it from the OST's OSS)".to_string();
            return Err(MdsError::NoObjects { ost: ost.0, reason });
        };
        objects.push(ObjectKey { ost, object });
    }
    Ok(Layout::new(plan.stripe_size, objects).expect("a checked plan gives a valid layout"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn spec(count: Option<i64>, size: Option<u64>, start_ost: Option<i64>) -> StripeSpec {
        StripeSpec { count, size, start_ost, ..StripeSpec::default() }
    }

    fn all(ost_count: u32) -> Vec<OstIndex> {
        (0..ost_count).map(OstIndex).collect()
    }

    fn reason(result: Result<impl std::fmt::Debug, MdsError>) -> String {
        match result.unwrap_err() {
            MdsError::InvalidStripe { reason } => reason,
            other => panic!("expected InvalidStripe, got {other:?}"),
        }
    }

    #[test]
    fn zeros_mean_inherit_and_minus_one_is_kept() {
        let zeros = normalize(&spec(Some(0), Some(0), Some(-1)), 4).unwrap();
        assert_eq!(zeros, spec(None, None, Some(-1)));
        let all = normalize(&spec(Some(-1), Some(4 * MIB), Some(3)), 4).unwrap();
        assert_eq!(all, spec(Some(-1), Some(4 * MIB), Some(3)));
    }

    #[test]
    fn each_field_is_checked_with_an_actionable_reason() {
        let check = |s: StripeSpec| reason(normalize(&s, 4));
        assert_eq!(
            check(spec(Some(5), None, None)),
            "stripe count 5 exceeds the 4 OSTs available: use -c 4 or fewer, or add OSTs"
        );
        assert_eq!(
            check(spec(Some(-2), None, None)),
            "stripe count -2 is not valid: use -1 for all OSTs, 0 to inherit, or 1 to 4"
        );
        assert_eq!(
            check(spec(Some(2001), None, None)),
            "stripe count 2001 exceeds the maximum of 2000: use -c 2000 or fewer"
        );
        assert_eq!(
            check(spec(None, Some(100_000), None)),
            "stripe size 100000 is not a multiple of 65536 (64 KiB): use -S 64k, 1M, 4M, ..."
        );
        assert!(check(spec(None, Some(1 << 32), None)).starts_with("stripe size 4294967296 is 4 GiB or more"));
        assert_eq!(
            check(spec(None, None, Some(4))),
            "starting OST index 4 is out of range for 4 OSTs: use -i 0 to -i 3"
        );
        assert!(check(spec(None, None, Some(-7))).starts_with("starting OST index -7 is not valid"));
        assert!(check(spec(None, None, Some(i64::MAX))).contains("out of range for 4 OSTs"));
        assert!(normalize(&spec(None, Some(STRIPE_SIZE_MAX), None), 4).is_ok());
    }

    #[test]
    fn plan_merges_request_over_inherited() {
        let inherited = StripeDefault { count: 2, overstripe: false, size: 4 * MIB, start_ost: 1, pool: None };
        let own = plan(&spec(None, None, None), &inherited, 4, None).unwrap();
        let expected = LayoutPlan {
            stripe_count: 2,
            stripe_size: 4 * MIB,
            start_ost: Some(OstIndex(1)),
            pool: None,
            osts: all(4),
            overstripe: false,
            listed: false,
        };
        assert_eq!(own, expected);
        let mixed = plan(&spec(Some(-1), None, Some(-1)), &inherited, 4, None).unwrap();
        assert_eq!(mixed, LayoutPlan { stripe_count: 4, start_ost: None, ..expected });
        let wide = StripeDefault { count: -1, overstripe: false, size: MIB, start_ost: -1, pool: None };
        assert_eq!(plan(&StripeSpec::default(), &wide, 3000, None).unwrap().stripe_count, STRIPE_COUNT_MAX);
    }

    #[test]
    fn a_pool_bounds_count_and_start() {
        let name = PoolName::parse("fast").unwrap();
        let pool = PoolMembers { name, osts: vec![OstIndex(1), OstIndex(3)] };
        let inherited = StripeDefault { count: 1, overstripe: false, size: MIB, start_ost: -1, pool: Some(name) };
        let all_of_it = plan(&spec(Some(-1), None, None), &inherited, 4, Some(&pool)).unwrap();
        assert_eq!((all_of_it.stripe_count, all_of_it.pool, all_of_it.osts), (2, Some(name), pool.osts.clone()));
        let started = plan(&spec(None, None, Some(3)), &inherited, 4, Some(&pool)).unwrap();
        assert_eq!(started.start_ost, Some(OstIndex(3)));
        assert_eq!(
            reason(plan(&spec(Some(3), None, None), &inherited, 4, Some(&pool))),
            "stripe count 3 exceeds the 2 OSTs of pool lanefs.fast (lanefs-OST0001_UUID, lanefs-OST0003_UUID): \
             use -c 2 or fewer, or add OSTs to the pool (lanefs pool_add lanefs.fast OST...)"
        );
        assert_eq!(
            reason(plan(&spec(None, None, Some(0)), &inherited, 4, Some(&pool))),
            "starting OST index 0 is not in pool lanefs.fast (lanefs-OST0001_UUID, lanefs-OST0003_UUID): \
             use -i -1, or the index of one of its OSTs"
        );
        // The file system's bound comes first, with its own message.
        assert!(reason(plan(&spec(Some(5), None, None), &inherited, 4, Some(&pool))).contains("the 4 OSTs available"));
    }

    #[test]
    fn inherit_takes_each_field_from_the_nearest_setter() {
        let config = MdsConfig::new(8);
        let fast = PoolName::parse("fast").unwrap();
        let dirs = vec![
            ("/".to_string(), spec(Some(4), Some(8 * MIB), None)),
            ("/a".to_string(), StripeSpec { pool: Some(fast), ..spec(Some(2), None, None) }),
            ("/a/b".to_string(), StripeSpec::default()),
        ];
        let (default, origin) = inherit(&dirs, &config);
        assert_eq!(
            default,
            StripeDefault { count: 2, overstripe: false, size: 8 * MIB, start_ost: -1, pool: Some(fast) }
        );
        assert_eq!(origin.count.as_deref(), Some("/a"));
        assert_eq!(origin.size.as_deref(), Some("/"));
        assert_eq!(origin.pool.as_deref(), Some("/a"));
        assert_eq!(origin.start_ost, None);
        let (fs_default, fs_origin) = inherit(&[], &config);
        assert_eq!(fs_default, StripeDefault { count: 1, overstripe: false, size: MIB, start_ost: -1, pool: None });
        assert_eq!(fs_origin, StripeOrigin::default());
    }

    #[test]
    fn config_is_checked() {
        let bad = |config: MdsConfig| match check_config(&config).unwrap_err() {
            MdsError::InvalidConfig { reason } => reason,
            other => panic!("expected InvalidConfig, got {other:?}"),
        };
        assert_eq!(bad(MdsConfig::new(0)), "OST count 0 is out of range: use 1 to 65536");
        let wide = MdsConfig { default_stripe_count: 3, ..MdsConfig::new(2) };
        assert!(bad(wide).contains("stripe count 3 exceeds the 2 OSTs available"));
        let odd = MdsConfig { default_stripe_size: 1000, ..MdsConfig::new(2) };
        assert!(bad(odd).contains("stripe size 1000 is not a multiple of 65536"));
        assert!(check_config(&MdsConfig::new(1)).is_ok());
    }
}
