//! Layouts: defaults, inheritance, per-file overrides, round robin, explicit
//! starting OSTs, count -1, object ids, and each refused setting.

use crate::*;
use lanefs_proto::{MdsConfig, MdsError, StripeDefault, StripeOrigin};

#[test]
fn filesystem_default_is_one_stripe_of_one_mib() {
    let mut mds = mds(4);
    let layout = create(&mut mds, "/f").layout;
    assert_eq!((layout.stripe_count(), layout.stripe_size()), (1, MIB));
    let config = MdsConfig { default_stripe_count: 2, default_stripe_size: 4 * MIB, ..MdsConfig::new(4) };
    let mut wide = Mds::open_in_memory(config).unwrap();
    fill_pools(&mut wide);
    let layout = create(&mut wide, "/f").layout;
    assert_eq!((layout.stripe_count(), layout.stripe_size()), (2, 4 * MIB));
}

#[test]
fn round_robin_advances_one_ost_per_file() {
    let mut mds = mds(4);
    let singles: Vec<_> = (0..6).map(|i| osts(&create(&mut mds, &format!("/s{i}")).layout)).collect();
    assert_eq!(singles, [[0], [1], [2], [3], [0], [1]]);
    let pairs: Vec<_> =
        (0..4).map(|i| osts(&create_with(&mut mds, &format!("/p{i}"), spec(Some(2), None, None)).layout)).collect();
    assert_eq!(pairs, [[2, 3], [3, 0], [0, 1], [1, 2]]);
    mds.check_invariants();
}

#[test]
fn explicit_start_ost_wraps_and_leaves_the_rotation_alone() {
    let mut mds = mds(4);
    assert_eq!(osts(&create(&mut mds, "/a").layout), [0]);
    let placed = create_with(&mut mds, "/b", spec(Some(3), None, Some(2))).layout;
    assert_eq!(osts(&placed), [2, 3, 0]);
    assert_eq!(placed.stripe_offset().0, 2);
    assert_eq!(osts(&create(&mut mds, "/c").layout), [1], "the rotation continues where it was");
    let any = create_with(&mut mds, "/d", spec(None, None, Some(-1))).layout;
    assert_eq!(osts(&any), [2]);
}

#[test]
fn count_minus_one_means_every_ost() {
    let mut mds = mds(5);
    let all = create_with(&mut mds, "/all", spec(Some(-1), None, None)).layout;
    assert_eq!(osts(&all), [0, 1, 2, 3, 4]);
    let all_from_3 = create_with(&mut mds, "/all3", spec(Some(-1), None, Some(3))).layout;
    assert_eq!(osts(&all_from_3), [3, 4, 0, 1, 2]);
    mds.check_invariants();
}

#[test]
fn object_ids_count_up_per_ost_and_are_never_reused() {
    let mut mds = mds(2);
    let first = create_with(&mut mds, "/a", spec(Some(2), None, Some(0))).layout;
    assert_eq!(objects(&first), [(0, 1), (1, 1)]);
    let second = create_with(&mut mds, "/b", spec(Some(1), None, Some(1))).layout;
    assert_eq!(objects(&second), [(1, 2)]);
    mds.unlink(&ROOT, "/a").unwrap();
    mds.unlink(&ROOT, "/b").unwrap();
    let third = create_with(&mut mds, "/c", spec(Some(2), None, Some(1))).layout;
    assert_eq!(objects(&third), [(1, 3), (0, 2)]);
    mds.check_invariants();
}

#[test]
fn refused_stripe_settings_name_the_problem() {
    let mut mds = mds(4);
    let refuse = |mds: &mut Mds, stripe| invalid_stripe_reason(create_with_err(mds, "/f", stripe));
    assert_eq!(
        refuse(&mut mds, spec(Some(5), None, None)),
        "stripe count 5 exceeds the 4 OSTs available: use -c 4 or fewer, or add OSTs"
    );
    assert!(refuse(&mut mds, spec(Some(-3), None, None)).starts_with("stripe count -3 is not valid"));
    assert_eq!(
        refuse(&mut mds, spec(None, Some(3 * MIB / 2 + 1), None)),
        "stripe size 1572865 is not a multiple of 65536 (64 KiB): use -S 64k, 1M, 4M, ..."
    );
    assert!(refuse(&mut mds, spec(None, Some(8 << 30), None)).contains("4 GiB or more"));
    assert_eq!(
        refuse(&mut mds, spec(None, None, Some(4))),
        "starting OST index 4 is out of range for 4 OSTs: use -i 0 to -i 3"
    );
    assert!(refuse(&mut mds, spec(None, None, Some(-2))).starts_with("starting OST index -2 is not valid"));
    let message = create_with_err(&mut mds, "/f", spec(Some(9), None, None)).to_string();
    assert_eq!(
        message,
        "invalid stripe settings: stripe count 9 exceeds the 4 OSTs available: use -c 4 or fewer, or add OSTs"
    );
    assert_eq!(mds.statfs().unwrap().file_count, 0);
    // Refused requests consumed no ids: the next file still starts at OST 0, object 1.
    assert_eq!(objects(&create(&mut mds, "/g").layout), [(0, 1)]);
    mds.check_invariants();
}

fn create_with_err(mds: &mut Mds, path: &str, stripe: StripeSpec) -> MdsError {
    try_create(mds, path, &stripe, CreateMode::Exclusive).unwrap_err()
}

#[test]
fn zero_count_and_size_mean_inherit() {
    let mut mds = mds(4);
    mkdir(&mut mds, "/d");
    mds.set_stripe(&ROOT, "/d", &spec(Some(3), Some(2 * MIB), None)).unwrap();
    let layout = create_with(&mut mds, "/d/f", spec(Some(0), Some(0), None)).layout;
    assert_eq!((layout.stripe_count(), layout.stripe_size()), (3, 2 * MIB));
}

#[test]
fn directory_default_is_inherited_below_it() {
    let mut mds = mds(8);
    mkdir(&mut mds, "/a");
    mds.set_stripe(&ROOT, "/a", &spec(Some(4), Some(4 * MIB), Some(2))).unwrap();
    mkdir(&mut mds, "/a/b");
    let deep = create(&mut mds, "/a/b/c").layout;
    assert_eq!((deep.stripe_count(), deep.stripe_size(), osts(&deep)), (4, 4 * MIB, vec![2, 3, 4, 5]));
    // Outside /a, the file-system default.
    let outside = create(&mut mds, "/elsewhere").layout;
    assert_eq!((outside.stripe_count(), outside.stripe_size()), (1, MIB));
    // Defaults are read at create: a subdirectory made before the setstripe inherits too.
    mkdir(&mut mds, "/x");
    mkdir(&mut mds, "/x/old");
    mds.set_stripe(&ROOT, "/x", &spec(Some(2), None, None)).unwrap();
    assert_eq!(create(&mut mds, "/x/old/f").layout.stripe_count(), 2);
    mds.check_invariants();
}

#[test]
fn each_field_can_be_overridden_per_file() {
    let mut mds = mds(8);
    mkdir(&mut mds, "/a");
    mds.set_stripe(&ROOT, "/a", &spec(Some(4), Some(4 * MIB), Some(2))).unwrap();
    let count = create_with(&mut mds, "/a/count", spec(Some(2), None, None)).layout;
    assert_eq!((osts(&count), count.stripe_size()), (vec![2, 3], 4 * MIB));
    let size = create_with(&mut mds, "/a/size", spec(None, Some(MIB), None)).layout;
    assert_eq!((osts(&size), size.stripe_size()), (vec![2, 3, 4, 5], MIB));
    let start = create_with(&mut mds, "/a/start", spec(None, None, Some(6))).layout;
    assert_eq!((osts(&start), start.stripe_size()), (vec![6, 7, 0, 1], 4 * MIB));
    let any = create_with(&mut mds, "/a/any", spec(None, None, Some(-1))).layout;
    assert_eq!(osts(&any), [0, 1, 2, 3], "-1 overrides the directory's start with the rotation");
    let all = create_with(&mut mds, "/a/all", spec(Some(-1), None, None)).layout;
    assert_eq!(osts(&all), [2, 3, 4, 5, 6, 7, 0, 1]);
}

#[test]
fn nearer_directories_override_field_by_field() {
    let mut mds = mds(8);
    mkdir(&mut mds, "/a");
    mkdir(&mut mds, "/a/b");
    mds.set_stripe(&ROOT, "/", &spec(None, Some(8 * MIB), None)).unwrap();
    mds.set_stripe(&ROOT, "/a", &spec(Some(4), Some(2 * MIB), None)).unwrap();
    mds.set_stripe(&ROOT, "/a/b", &spec(Some(2), None, Some(5))).unwrap();
    let layout = create(&mut mds, "/a/b/f").layout;
    assert_eq!((osts(&layout), layout.stripe_size()), (vec![5, 6], 2 * MIB));
    let info = mds.get_stripe(&ROOT, "/a/b").unwrap();
    assert_eq!(info.layout, None);
    assert_eq!(info.default, StripeDefault { count: 2, size: 2 * MIB, start_ost: 5, overstripe: false, pool: None });
    let origin = StripeOrigin {
        count: Some("/a/b".into()),
        size: Some("/a".into()),
        start_ost: Some("/a/b".into()),
        pool: None,
    };
    assert_eq!(info.inherited_from, origin);
    let top = mds.get_stripe(&ROOT, "/").unwrap();
    assert_eq!(top.default, StripeDefault { count: 1, size: 8 * MIB, start_ost: -1, overstripe: false, pool: None });
    assert_eq!(top.inherited_from, StripeOrigin { count: None, size: Some("/".into()), start_ost: None, pool: None });
    // Clearing /a/b's default (all fields unset) falls back to /a and /.
    mds.set_stripe(&ROOT, "/a/b", &StripeSpec::default()).unwrap();
    assert_eq!(
        mds.get_stripe(&ROOT, "/a/b").unwrap().default,
        StripeDefault { count: 4, size: 2 * MIB, start_ost: -1, overstripe: false, pool: None }
    );
    mds.check_invariants();
}

#[test]
fn get_stripe_on_a_file_shows_its_layout_and_its_directory_default() {
    let mut mds = mds(4);
    mkdir(&mut mds, "/d");
    mds.set_stripe(&ROOT, "/d", &spec(Some(-1), None, None)).unwrap();
    let made = create_with(&mut mds, "/d/f", spec(Some(2), None, None));
    let info = mds.get_stripe(&ROOT, "/d/f").unwrap();
    assert_eq!(info.layout, Some(made.layout));
    assert_eq!(info.default, StripeDefault { count: -1, size: MIB, start_ost: -1, overstripe: false, pool: None });
    assert_eq!(info.inherited_from.count.as_deref(), Some("/d"));
    assert_eq!(create(&mut mds, "/d/g").layout.stripe_count(), 4);
    assert_eq!(mds.get_stripe(&ROOT, "/d/nope").unwrap_err(), not_found("/d/nope", "/d/nope"));
}

#[test]
fn set_stripe_refusals() {
    let mut mds = mds(4);
    create(&mut mds, "/f");
    mkdir(&mut mds, "/d");
    let error = mds.set_stripe(&ROOT, "/f", &spec(Some(2), None, None)).unwrap_err();
    assert_eq!(error, MdsError::LayoutAlreadySet { path: "/f".into() });
    assert!(error.to_string().contains("create a new file with the striping you want"));
    assert_eq!(mds.set_stripe(&ROOT, "/nope", &spec(Some(2), None, None)).unwrap_err(), not_found("/nope", "/nope"));
    let too_wide = mds.set_stripe(&ROOT, "/d", &spec(Some(5), None, None)).unwrap_err();
    assert!(invalid_stripe_reason(too_wide).contains("exceeds the 4 OSTs"));
    let odd = mds.set_stripe(&ROOT, "/d", &spec(None, Some(1000), None)).unwrap_err();
    assert!(invalid_stripe_reason(odd).contains("not a multiple of 65536"));
    assert_eq!(mds.get_stripe(&ROOT, "/d").unwrap().inherited_from, StripeOrigin::default(), "nothing was stored");
    mds.check_invariants();
}

#[test]
fn large_ost_counts_cap_all_at_the_layout_maximum() {
    let mut mds = mds(2100);
    let all = create_with(&mut mds, "/all", spec(Some(-1), None, None)).layout;
    assert_eq!(all.stripe_count(), lanefs_core::layout::STRIPE_COUNT_MAX);
    let reason = invalid_stripe_reason(create_with_err(&mut mds, "/f", spec(Some(2001), None, None)));
    assert_eq!(reason, "stripe count 2001 exceeds the maximum of 2000: use -c 2000 or fewer");
}
