//! GROUP locks through the client library: what it refuses, and how long a
//! write waits behind another client's group lock.

mod common;

use lanefs_client::{Client, ClientOptions, File};
use lanefs_core::Errno;
use lanefs_proto::{Access, MdsReply, MdsRequest};
use lanefs_server::cluster::{LocalCluster, LocalClusterConfig};
use std::time::{Duration, Instant};

/// A file of one stripe of 1 MiB (the default layout).
fn create(cl: &Client, path: &str) -> File {
    common::create(cl, path, 1, 1 << 20)
}

/// Group id 0 is no group: refused with `EINVAL` before anything is sent,
/// as Lustre refuses it.
#[test]
fn a_group_lock_of_gid_0_is_refused() {
    let c = LocalCluster::start(LocalClusterConfig { osts: 1, ..Default::default() }).unwrap();
    let a = Client::connect(&c.mds_address(), c.client_options()).unwrap();
    let file = create(&a, "/g0");
    let refused = a.group_lock(&file, 0).unwrap_err();
    assert_eq!(refused.errno(), Errno::EINVAL, "{refused}");
    assert!(refused.to_string().contains("not 0"), "{refused}");
    a.group_lock(&file, 7).unwrap();
    a.group_unlock(&file, 7).unwrap();
}

/// A write behind another client's group lock fails once the writer's
/// timeout has passed, with `ETIMEDOUT` and a message that says what it
/// waited for, instead of waiting for as long as the group lock is held;
/// once the group lock is released, the next write goes through.
#[test]
fn a_write_behind_a_group_lock_fails_after_the_clients_timeout() {
    let c = LocalCluster::start(LocalClusterConfig { osts: 1, ..Default::default() }).unwrap();
    let a = Client::connect(&c.mds_address(), c.client_options()).unwrap();
    let timeout = Duration::from_secs(2);
    let options: ClientOptions = c.client_options().with_timeout(timeout);
    let b = Client::connect(&c.mds_address(), options).unwrap();
    let file = create(&a, "/held");
    a.group_lock(&file, 7).unwrap();
    let theirs = match b.mds(MdsRequest::Open { path: "/held".into(), access: Access::ReadWrite }).unwrap() {
        MdsReply::File(info) => b.open_layout("/held", info.layout).unwrap(),
        other => panic!("open answered {other:?}"),
    };
    let started = Instant::now();
    let failed = b.pwrite(&theirs, 0, b"from b").unwrap_err();
    let waited = started.elapsed();
    assert_eq!(failed.errno(), Errno::ETIMEDOUT, "{failed}");
    assert!(failed.to_string().contains("lock"), "names what it waited for: {failed}");
    assert!(waited >= timeout && waited < timeout * 5, "failed after {waited:?}");
    a.group_unlock(&file, 7).unwrap();
    b.pwrite(&theirs, 0, b"from b").unwrap();
    b.fsync(&theirs).unwrap();
    assert_eq!(a.pread(&file, 0, 6).unwrap(), b"from b");
}
