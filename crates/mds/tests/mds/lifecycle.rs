//! The objects' lifecycle as the MDS books it: pools of precreated objects,
//! and the queue of objects to destroy.

use crate::*;
use lanefs_mds::Pool;

fn bare(ost_count: u32) -> Mds {
    Mds::open_in_memory(MdsConfig::new(ost_count)).unwrap()
}

fn precreate(mds: &mut Mds, ost: u32, last_id: u64) -> Pool {
    mds.record_precreated(OstIndex(ost), ObjectId(last_id)).unwrap()
}

fn queued(mds: &Mds, ost: u32) -> Vec<u64> {
    mds.queued_destroys(OstIndex(ost), 100).unwrap().into_iter().map(|object| object.0).collect()
}

fn no_objects(error: MdsError) -> u32 {
    match error {
        MdsError::NoObjects { ost, .. } => ost,
        other => panic!("expected NoObjects, got {other:?}"),
    }
}

#[test]
fn files_get_only_objects_their_osts_have_precreated() {
    let mut mds = bare(2);
    let error = try_create(&mut mds, "/f", &StripeSpec::default(), CreateMode::Exclusive).unwrap_err();
    assert_eq!(no_objects(error.clone()), 0);
    assert!(error.to_string().starts_with("no object available on OST0000: its pool of precreated objects is empty"));
    assert_eq!(mds.statfs().unwrap().file_count, 0);
    let pool = precreate(&mut mds, 0, 2);
    assert_eq!((pool.next_object, pool.precreated, pool.available()), (ObjectId(1), ObjectId(2), 2));
    assert_eq!(objects(&create_with(&mut mds, "/a", spec(None, None, Some(0))).layout), [(0, 1)]);
    assert_eq!(objects(&create_with(&mut mds, "/b", spec(None, None, Some(0))).layout), [(0, 2)]);
    assert_eq!(mds.pool(OstIndex(0)).unwrap().available(), 0);
    let error = try_create(&mut mds, "/c", &spec(None, None, Some(0)), CreateMode::Exclusive).unwrap_err();
    assert_eq!(no_objects(error), 0);
    // A lower LAST_ID than recorded (a late answer) changes nothing.
    assert_eq!(precreate(&mut mds, 0, 1).precreated, ObjectId(2));
    assert_eq!(precreate(&mut mds, 0, 5).available(), 3);
    assert!(mds.record_precreated(OstIndex(2), ObjectId(5)).is_err(), "no OST 2");
    mds.check_invariants();
}

/// As Lustre's round-robin allocator skips OSTs it cannot reserve an
/// object on, a file whose starting OST the MDS chooses goes around an
/// empty pool; a file that names its OSTs, or needs them all, does not.
#[test]
fn an_empty_pool_is_skipped_only_when_the_mds_chooses_the_osts() {
    let mut mds = bare(3);
    precreate(&mut mds, 0, 10);
    precreate(&mut mds, 2, 10);
    let singles: Vec<_> = (0..3).map(|i| osts(&create(&mut mds, &format!("/s{i}")).layout)).collect();
    assert_eq!(singles, [[0], [2], [2]], "OST 1's turn goes to OST 2");
    assert_eq!(osts(&create_with(&mut mds, "/pair", spec(Some(2), None, None)).layout), [0, 2]);
    let named = try_create(&mut mds, "/named", &spec(Some(2), None, Some(0)), CreateMode::Exclusive).unwrap_err();
    assert_eq!(no_objects(named), 1);
    let all = try_create(&mut mds, "/all", &spec(Some(-1), None, None), CreateMode::Exclusive).unwrap_err();
    assert_eq!(no_objects(all), 1);
    mds.check_invariants();
}

#[test]
fn removals_queue_their_objects_in_the_same_transaction() {
    let mut mds = mds(3);
    let doomed = create_with(&mut mds, "/doomed", spec(Some(2), None, Some(1))).layout;
    assert_eq!(objects(&doomed), [(1, 1), (2, 1)]);
    let unlinked = mds.unlink(&ROOT, "/doomed").unwrap();
    assert_eq!(unlinked, Some(doomed));
    assert_eq!((queued(&mds, 0), queued(&mds, 1), queued(&mds, 2)), (vec![], vec![1], vec![1]));
    // A replacing rename queues the replaced file's objects; the moved file keeps its own.
    let kept = create_with(&mut mds, "/kept", spec(Some(1), None, Some(0))).layout;
    let replaced = create_with(&mut mds, "/replaced", spec(Some(1), None, Some(0))).layout;
    assert_eq!(mds.rename(&ROOT, "/kept", "/replaced").unwrap(), Some(replaced));
    assert_eq!(queued(&mds, 0), [2]);
    assert_eq!(mds.open_file(&ROOT, "/replaced", Access::Read).unwrap().layout, kept);
    // A removal that fails queues nothing.
    mkdir(&mut mds, "/d");
    create(&mut mds, "/d/f");
    assert!(mds.rmdir(&ROOT, "/d").is_err());
    assert!(mds.unlink(&Credentials::user(5, 5), "/d/f").is_err());
    assert_eq!((queued(&mds, 0), queued(&mds, 1), queued(&mds, 2)), (vec![2], vec![1], vec![1]));
    mds.check_invariants();
    // Acknowledged destroys leave the queue; a repeated acknowledgement is harmless.
    mds.record_destroyed(OstIndex(1), &[ObjectId(1)]).unwrap();
    mds.record_destroyed(OstIndex(1), &[ObjectId(1)]).unwrap();
    assert_eq!((queued(&mds, 0), queued(&mds, 1), queued(&mds, 2)), (vec![2], vec![], vec![1]));
    mds.check_invariants();
}

#[test]
fn the_queue_is_read_in_bounded_batches() {
    let mut mds = mds(1);
    for i in 0..5 {
        create(&mut mds, &format!("/f{i}"));
        mds.unlink(&ROOT, &format!("/f{i}")).unwrap();
    }
    let batch = mds.queued_destroys(OstIndex(0), 3).unwrap();
    assert_eq!(batch, [ObjectId(1), ObjectId(2), ObjectId(3)]);
    mds.record_destroyed(OstIndex(0), &batch).unwrap();
    assert_eq!(queued(&mds, 0), [4, 5]);
    let huge = mds.queued_destroys(OstIndex(0), usize::MAX).unwrap();
    assert_eq!(huge.len(), 2, "a batch never exceeds DESTROY_BATCH_MAX");
}

#[test]
fn pools_queue_and_owners_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("mds.db");
    let config = MdsConfig { root_owner: lanefs_proto::Owner { uid: 7, gid: 8 }, ..MdsConfig::new(2) };
    {
        let mut mds = Mds::open(&db, config).unwrap();
        precreate(&mut mds, 0, 40);
        precreate(&mut mds, 1, 3);
        create_with(&mut mds, "/f", spec(Some(2), None, Some(0)));
        mds.unlink(&ROOT, "/f").unwrap();
        create_with(&mut mds, "/g", spec(Some(1), None, Some(1)));
    }
    // Another owner in the configuration does not change an existing root.
    let mut mds = Mds::open(&db, MdsConfig::new(2)).unwrap();
    let root = mds.stat(&ROOT, "/").unwrap();
    assert_eq!((root.uid, root.gid, root.permissions), (7, 8, 0o755));
    assert_eq!((queued(&mds, 0), queued(&mds, 1)), (vec![1], vec![1]));
    let pools = (mds.pool(OstIndex(0)).unwrap(), mds.pool(OstIndex(1)).unwrap());
    assert_eq!((pools.0.available(), pools.1.available()), (39, 1));
    assert_eq!(objects(&create_with(&mut mds, "/h", spec(Some(2), None, Some(1))).layout), [(1, 3), (0, 2)]);
    mds.check_invariants();
}
