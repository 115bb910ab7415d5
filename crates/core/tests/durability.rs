//! Durability: an fsync asks the OSTs of the objects the client wrote since
//! the last fsync to make those writes durable (`OST_SYNC`), and only
//! those; the OSTs answer once their driver has synced.

use lanefs_core::client::OpOutput;
use lanefs_core::harness::{Harness, HarnessConfig};
use lanefs_core::{ClientId, OstIndex};

const KIB: u64 = 1 << 10;
const A: ClientId = ClientId(0);

fn syncs_per_ost(h: &Harness, osts: u32) -> Vec<u64> {
    (0..osts).map(|o| h.ost(OstIndex(o)).counters().syncs).collect()
}

#[test]
fn fsync_syncs_the_objects_written_since_the_last_fsync_and_no_others() {
    let stripe = 64 * KIB;
    let mut h = Harness::new(HarnessConfig { clients: 1, osts: 4, seed: 5, ..Default::default() }).unwrap();
    let layout = h.create_layout(stripe, 4, Some(0)).unwrap();
    let fa = h.open(A, layout);
    let fsync = |h: &mut Harness| {
        let op = h.fsync(A, fa);
        assert_eq!(h.wait_ok(A, op), OpOutput::Synced);
    };
    fsync(&mut h);
    assert_eq!(syncs_per_ost(&h, 4), [0, 0, 0, 0], "nothing written, nothing to sync");

    for (offset, len) in [(100, 10), (2 * stripe, stripe), (2 * stripe + 7, 3)] {
        let op = h.write(A, fa, offset, vec![7; len as usize]);
        assert_eq!(h.wait_ok(A, op), OpOutput::Written(len));
    }
    fsync(&mut h);
    assert_eq!(syncs_per_ost(&h, 4), [1, 0, 1, 0], "one sync per written object");
    fsync(&mut h);
    assert_eq!(syncs_per_ost(&h, 4), [1, 0, 1, 0], "the second fsync has nothing new to sync");

    // A close writes back but does not sync: the next fsync of the file does.
    let fb = h.open(A, h.client(A).layout(fa).unwrap().clone());
    let op = h.write(A, fb, 3 * stripe, vec![1; 10]);
    assert_eq!(h.wait_ok(A, op), OpOutput::Written(10));
    let op = h.close(A, fb);
    assert_eq!(h.wait_ok(A, op), OpOutput::Closed);
    fsync(&mut h);
    assert_eq!(syncs_per_ost(&h, 4), [1, 0, 1, 1]);
    h.drive().unwrap();
}
