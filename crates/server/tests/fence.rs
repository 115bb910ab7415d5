//! Fencing, as Lustre's multiple-mount protection: an OST directory is
//! served by one OSS at a time and an MDS database by one MDS. A second
//! server on data in use refuses at once, naming the directory and the
//! server in the way, and touches nothing: the first keeps serving.

mod common;

use common::{open, pattern, verified_write_read, ChildSpec, ServerChild};
use lanefs_client::{Client, ClientOptions};
use lanefs_net::transport::Address;
use lanefs_proto::codec::{encode, read_frame};
use lanefs_proto::wire::{Role, Wire, MAGIC, PROTOCOL_VERSION};
use lanefs_server::cluster::{LocalCluster, LocalClusterConfig};
use lanefs_server::oss::{self, OssConfig};
use std::path::Path;
use std::time::Duration;

#[test]
#[ignore = "the server process of the tests in this file"]
fn server_child() {
    common::child_main();
}

fn config(dir: &Path) -> LocalClusterConfig {
    LocalClusterConfig { osts: 2, data_dir: Some(dir.to_path_buf()), ..Default::default() }
}

fn quick() -> ClientOptions {
    ClientOptions { connect_timeout: Duration::from_secs(2), ..Default::default() }
}

#[test]
fn a_second_cluster_on_a_directory_in_use_is_refused_and_the_first_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let first = LocalCluster::start(config(dir.path())).unwrap();
    let v = Client::connect(&first.mds_address(), quick()).unwrap();
    let err = LocalCluster::start(config(dir.path())).err().expect("the directory is in use");
    assert_eq!(err.kind(), std::io::ErrorKind::ResourceBusy, "{err}");
    let text = err.to_string();
    let pid = std::process::id().to_string();
    let dir_name = dir.path().display().to_string();
    for part in [dir_name.as_str(), "in use by the MDS", pid.as_str(), "mds.sock", "stop that server first"] {
        assert!(text.contains(part), "{text:?} lacks {part:?}");
    }
    // The first is untouched: its clients, and new ones, are served.
    verified_write_read(&v, "/first", 1, 200_000);
    let w = Client::connect(&first.mds_address(), quick()).expect("the first's sockets are still its own");
    verified_write_read(&w, "/second", 2, 200_000);
    // Stopped, it lets the directory go, its data intact.
    drop((v, w));
    drop(first);
    let again = LocalCluster::start(config(dir.path())).unwrap();
    let x = Client::connect(&again.mds_address(), quick()).unwrap();
    assert_eq!(x.pread(&open(&x, "/first"), 0, 200_000).unwrap(), pattern(1, 200_000));
}

#[test]
fn a_second_oss_on_an_ost_directory_in_use_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let any_port = Address::Tcp("127.0.0.1:0".into());
    let keys = tempfile::tempdir().unwrap();
    let files = lanefs_net::auth::ensure_cluster_keys(&keys.path().join("keys")).unwrap();
    let key = lanefs_net::auth::ClusterKey::load(&files.server).unwrap();
    let client_key = lanefs_net::auth::ClusterKey::load(&files.client).unwrap();
    let key = Some(&key);
    let oss_config = |osts: Vec<u32>| OssConfig {
        data_dir: dir.path().to_path_buf(),
        osts,
        ost: Default::default(),
        export_timeout: oss::EXPORT_TIMEOUT_DEFAULT,
        limits: Default::default(),
        faults: Default::default(),
        memory_stores: Default::default(),
    };
    let first = rt.block_on(oss::start(&any_port, key, oss_config(vec![0, 1]))).unwrap();
    let err = rt.block_on(oss::start(&any_port, key, oss_config(vec![1]))).err().expect("OST0001 is in use");
    let text = err.to_string();
    let ost_dir = dir.path().join("OST0001").display().to_string();
    let address = first.address().to_string();
    for part in [ost_dir.as_str(), "in use by the OSS", &std::process::id().to_string(), address.as_str()] {
        assert!(text.contains(part), "{text:?} lacks {part:?}");
    }
    // Another OST of the same directory is free to serve.
    let other = rt.block_on(oss::start(&any_port, key, oss_config(vec![2]))).expect("OST0002 is free");
    // The first still answers.
    let welcomed = rt.block_on(async {
        use tokio::io::AsyncWriteExt;
        let address = Address::parse(&address).unwrap();
        let mut s = lanefs_net::transport::connect(&address, Some(&client_key)).await.unwrap();
        let mut hello = Vec::new();
        encode(Wire::Hello { magic: MAGIC, version: PROTOCOL_VERSION, role: Role::Client }, &mut hello).unwrap();
        s.write_all(&hello).await.unwrap();
        read_frame(&mut s).await
    });
    assert!(matches!(welcomed, Ok(Some(Wire::Welcome { .. }))), "{welcomed:?}");
    rt.block_on(first.shutdown());
    rt.block_on(other.shutdown());
    // Stopped, the first lets its OSTs go.
    let again = rt.block_on(oss::start(&any_port, key, oss_config(vec![0, 1]))).expect("free once stopped");
    rt.block_on(again.shutdown());
}

/// A server killed with SIGKILL holds nothing: the kernel drops its
/// fence, and the next server removes the sockets it left behind.
#[test]
fn a_killed_server_leaves_no_fence_behind() {
    let dir = tempfile::tempdir().unwrap();
    let spec = ChildSpec { osts: 2, data_dir: Some(dir.path().to_path_buf()), ..Default::default() };
    let server = ServerChild::start(&spec);
    let v = Client::connect(&server.mds, quick()).unwrap();
    verified_write_read(&v, "/durable", 3, 100_000);
    drop(v);
    let err = LocalCluster::start(config(dir.path())).err().expect("the child serves it");
    assert!(err.to_string().contains(&format!("process {}", server.pid())), "{err}");
    server.kill();
    assert!(dir.path().join("mds.sock").exists(), "the killed server left its socket");
    let c = LocalCluster::start(config(dir.path())).expect("a dead server fences nothing");
    let x = Client::connect(&c.mds_address(), quick()).unwrap();
    assert_eq!(x.pread(&open(&x, "/durable"), 0, 100_000).unwrap(), pattern(3, 100_000));
}
