//! The demo's claims, as tests: default locking on a shared file causes
//! callbacks; lockahead and file per process cause none; every byte verifies.

use lanefs_core::harness::demo::{run, DemoConfig};

#[test]
fn demo_shows_false_sharing_only_with_default_locking() {
    let runs = run(DemoConfig::default()).unwrap();
    for r in &runs {
        println!("{r:?}");
    }
    let by = |n: &str| runs.iter().find(|r| r.name == n).unwrap().clone();
    let (default, ahead, fpp) = (by("ssf-default"), by("ssf-lockahead"), by("fpp"));
    assert!(default.blocking_callbacks > 0, "{default:?}");
    assert_eq!(ahead.blocking_callbacks, 0, "{ahead:?}");
    assert_eq!(fpp.blocking_callbacks, 0, "{fpp:?}");
    for r in &runs {
        assert_eq!(r.bytes_written, 64 << 20);
        assert_eq!(r.bytes_verified, r.bytes_written, "{r:?}");
    }
}
