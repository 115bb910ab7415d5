//! Any sequence of requests, however malformed: the MDS answers each (an
//! error for a bad one), never panics, and keeps every invariant.

use crate::mds;
use lanefs_mds::{CreateMode, MdsReply, MdsRequest, StripeSpec};
use proptest::prelude::*;

fn path() -> impl Strategy<Value = String> {
    let name = prop_oneof![
        8 => prop::sample::select(vec!["a", "b", "f"]).prop_map(str::to_string),
        1 => prop::sample::select(vec![".", "..", "", "x\0y", "é"]).prop_map(str::to_string),
        1 => (250..260usize).prop_map(|n| "n".repeat(n)),
    ];
    prop_oneof![
        8 => (any::<bool>(), prop::collection::vec(name, 0..4))
            .prop_map(|(absolute, names)| format!("{}{}", if absolute { "/" } else { "" }, names.join("/"))),
        1 => any::<String>(),
        1 => (4090..4100usize).prop_map(|n| format!("/{}", "p/".repeat(n / 2))),
    ]
}

fn stripe() -> impl Strategy<Value = StripeSpec> {
    let count = prop::option::of(prop_oneof![-3..6i64, Just(i64::MIN), Just(i64::MAX), Just(2000), Just(2001)]);
    let size = prop::option::of(prop_oneof![
        Just(0u64),
        Just(65536),
        Just(1 << 20),
        Just(100_000),
        Just(1 << 32),
        Just(u64::MAX),
        any::<u64>()
    ]);
    let start_ost = prop::option::of(prop_oneof![-3..6i64, Just(i64::MIN), Just(i64::MAX)]);
    (count, size, start_ost).prop_map(|(count, size, start_ost)| StripeSpec { count, size, start_ost })
}

fn request() -> impl Strategy<Value = MdsRequest> {
    let mode = prop_oneof![Just(CreateMode::Exclusive), Just(CreateMode::OpenOrCreate)];
    prop_oneof![
        path().prop_map(|path| MdsRequest::Mkdir { path }),
        (path(), stripe(), mode).prop_map(|(path, stripe, mode)| MdsRequest::Create { path, stripe, mode }),
        path().prop_map(|path| MdsRequest::Open { path }),
        path().prop_map(|path| MdsRequest::Stat { path }),
        path().prop_map(|path| MdsRequest::Readdir { path }),
        path().prop_map(|path| MdsRequest::Unlink { path }),
        path().prop_map(|path| MdsRequest::Rmdir { path }),
        (path(), path()).prop_map(|(from, to)| MdsRequest::Rename { from, to }),
        (path(), stripe()).prop_map(|(path, stripe)| MdsRequest::SetStripe { path, stripe }),
        path().prop_map(|path| MdsRequest::GetStripe { path }),
        Just(MdsRequest::Statfs),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn any_requests_are_answered_and_keep_the_invariants(
        ost_count in 1..6u32,
        requests in prop::collection::vec(request(), 1..30),
    ) {
        let mut mds = mds(ost_count);
        for request in requests {
            let stat = matches!(request, MdsRequest::Statfs);
            let reply = mds.handle(request);
            prop_assert!(!stat || matches!(reply, MdsReply::Statfs(_)), "{:?}", reply);
            mds.check_invariants();
        }
    }
}
