//! Composite layouts (Lustre's PFL, `lfs setstripe -E`): each component's
//! objects allocated as a plain file's would be, kept across a restart,
//! destroyed with the file; what is refused, and why.

use crate::*;
use lanefs_core::layout::Layout;
use lanefs_proto::{ComponentSpec, PoolChange, PoolName};

fn component(end: u64, count: i64) -> ComponentSpec {
    ComponentSpec { end, stripe: spec(Some(count), None, None) }
}

fn composite(parts: Vec<ComponentSpec>) -> StripeSpec {
    StripeSpec { components: Some(parts), ..StripeSpec::default() }
}

fn refused(mds: &mut Mds, stripe: StripeSpec) -> String {
    invalid_stripe_reason(try_create(mds, "/refused", &stripe, CreateMode::Exclusive).unwrap_err())
}

#[test]
fn each_component_gets_its_own_objects() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("mds.db");
    let mut mds = Mds::open(&db, MdsConfig::new(4)).unwrap();
    fill_pools(&mut mds);
    let fast = PoolName::parse("fast").unwrap();
    mds.change_pool(&ROOT, &fast, &PoolChange::New).unwrap();
    mds.change_pool(&ROOT, &fast, &PoolChange::Add(vec![2, 3])).unwrap();
    // -E 64M -c 1 -S 1M -E 1G -c 2 -p fast -E -1 -c 4 (the last keeps the pool, as lfs has it).
    let mut first = component(64 * MIB, 1);
    first.stripe.size = Some(MIB);
    let mut second = component(1 << 30, 2);
    second.stripe.pool = Some(fast);
    let layout = create_with(&mut mds, "/pfl", composite(vec![first, second, component(u64::MAX, 2)])).layout;
    assert!(layout.is_composite());
    let components: Vec<(u64, u64, u32)> = layout.components().iter().map(|c| (c.start, c.end, c.count)).collect();
    assert_eq!(components, [(0, 64 * MIB, 1), (64 * MIB, 1 << 30, 2), (1 << 30, u64::MAX, 2)]);
    let mut in_pool: Vec<u32> = layout.objects()[1..].iter().map(|key| key.ost.0).collect();
    in_pool.sort_unstable();
    assert_eq!(in_pool, [2, 2, 3, 3], "the second and third components in the pool");
    let info = mds.get_stripe(&ROOT, "/pfl").unwrap();
    assert_eq!(info.component_pools, [None, Some(fast), Some(fast)]);
    mds.check_invariants();
    drop(mds);
    let mut mds = Mds::open(&db, MdsConfig::new(4)).unwrap();
    assert_eq!(mds.open_file(&ROOT, "/pfl", Access::Read).unwrap().layout, layout, "kept across a restart");
    mds.unlink(&ROOT, "/pfl").unwrap();
    mds.check_invariants();
    assert!(mds.get_stripe(&ROOT, "/pfl").is_err());
}

#[test]
fn composite_layouts_lanefs_refuses_name_the_fix() {
    let mut mds = mds(4);
    let not_eof = refused(&mut mds, composite(vec![component(64 * MIB, 1)]));
    assert!(not_eof.contains("the last component must reach the end of the file"), "{not_eof}");
    let backwards =
        refused(&mut mds, composite(vec![component(64 * MIB, 1), component(MIB, 1), component(u64::MAX, 1)]));
    assert!(backwards.contains("component 2 ends at 1048576: each -E must be past the one before"), "{backwards}");
    let mut coarse = component(3 * MIB, 1);
    coarse.stripe.size = Some(2 * MIB);
    let unaligned = refused(&mut mds, composite(vec![coarse, component(u64::MAX, 2)]));
    assert!(
        unaligned.contains("component 1 ends at 3145728, not a multiple of its stripe size 2097152"),
        "{unaligned}"
    );
    let too_wide = refused(&mut mds, composite(vec![component(64 * MIB, 1), component(u64::MAX, 5)]));
    assert!(too_wide.starts_with("component 2: stripe count 5 exceeds the 4 OSTs"), "{too_wide}");
    let mixed = StripeSpec { count: Some(2), ..composite(vec![component(u64::MAX, 1)]) };
    assert!(refused(&mut mds, mixed).contains("put -c, -C, -S, -i, -o and -p after each -E"));
    mkdir(&mut mds, "/d");
    let mut listed = component(u64::MAX, 1);
    listed.stripe.osts = Some(vec![0]);
    let dir = mds.set_stripe(&ROOT, "/d", &composite(vec![listed])).unwrap_err();
    assert!(invalid_stripe_reason(dir).contains("an OST list (-o) is kept for files only in lanefs"));
    mds.check_invariants();
}

/// A directory's composite default goes to the files below it that ask
/// for no striping of their own, until a nearer directory has a default;
/// it is kept across a restart, and a plain default replaces it.
#[test]
fn a_directory_default_may_be_composite() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("mds.db");
    let mut mds = Mds::open(&db, MdsConfig::new(4)).unwrap();
    fill_pools(&mut mds);
    mkdir(&mut mds, "/d");
    mkdir(&mut mds, "/d/plain");
    mds.set_stripe(&ROOT, "/d/plain", &spec(Some(3), None, None)).unwrap();
    let template = vec![component(64 * MIB, 1), component(u64::MAX, 2)];
    mds.set_stripe(&ROOT, "/d", &composite(template.clone())).unwrap();
    assert_eq!(mds.get_stripe(&ROOT, "/d").unwrap().default_components, Some(template.clone()));
    let counts = |layout: &Layout| layout.components().iter().map(|c| c.count).collect::<Vec<_>>();
    assert_eq!(counts(&create(&mut mds, "/d/f").layout), [1, 2], "a file asking for nothing gets the template");
    assert_eq!(counts(&create_with(&mut mds, "/d/g", spec(Some(4), None, None)).layout), [4], "its own striping wins");
    assert_eq!(counts(&create(&mut mds, "/d/plain/f").layout), [3], "a nearer default wins");
    drop(mds);
    let mut mds = Mds::open(&db, MdsConfig::new(4)).unwrap();
    assert_eq!(mds.get_stripe(&ROOT, "/d/f").unwrap().default_components, Some(template), "kept across a restart");
    mds.set_stripe(&ROOT, "/d", &spec(Some(2), None, None)).unwrap();
    assert_eq!(mds.get_stripe(&ROOT, "/d").unwrap().default_components, None, "a plain default replaces it");
    assert_eq!(counts(&create(&mut mds, "/d/h").layout), [2]);
    mds.set_stripe(&ROOT, "/d", &composite(vec![component(MIB, 1), component(u64::MAX, 4)])).unwrap();
    mds.delete_stripe(&ROOT, "/d").unwrap();
    assert_eq!(mds.get_stripe(&ROOT, "/d").unwrap().default_components, None, "setstripe -d removes it");
    mds.set_stripe(&ROOT, "/d/plain", &composite(vec![component(MIB, 1), component(u64::MAX, 4)])).unwrap();
    for name in ["/d/plain/f", "/d/f", "/d/g", "/d/h"] {
        mds.unlink(&ROOT, name).unwrap();
    }
    mds.rmdir(&ROOT, "/d/plain").unwrap();
    mds.check_invariants();
}
