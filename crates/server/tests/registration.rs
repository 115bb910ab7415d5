//! Which OSS serves which OST: the MDS registers one live OSS per OST
//! index, as Lustre's MGS does. A second OSS for an index is refused while
//! the first one's connection lives and answers; a registration whose OSS
//! is gone passes to the next OSS that asks; an address no client could
//! use is refused before it is stored.

mod common;

use common::{create, open, pattern};
use lanefs_client::{Client, ClientOptions};
use lanefs_mds::Mds;
use lanefs_net::transport::{connect, Address};
use lanefs_proto::codec::{encode, read_frame};
use lanefs_proto::wire::{Role, Wire, MAGIC, PROTOCOL_VERSION};
use lanefs_proto::MdsConfig;
use lanefs_server::cluster::LocalClusterConfig;
use lanefs_server::mds_server::{self, MdsHandle};
use lanefs_server::oss::{self, OssConfig, OssHandle, RegisterError};
use std::path::Path;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// OST indices of the file system the tests make.
const OST_COUNT: u32 = 3;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// An MDS on a Unix socket in `dir`, for [`OST_COUNT`] OSTs.
fn start_mds(rt: &tokio::runtime::Runtime, dir: &Path) -> MdsHandle {
    let mds = Mds::open(&dir.join("mds.db"), MdsConfig::new(OST_COUNT)).unwrap();
    let listen = Address::Unix(dir.join("mds.sock"));
    rt.block_on(mds_server::start(&listen, None, mds, OST_COUNT)).unwrap()
}

/// An OSS for `osts` with its data in `data`, listening on `socket`, and
/// its registration with `mds`.
fn start_oss(
    rt: &tokio::runtime::Runtime,
    mds: &Address,
    data: &Path,
    socket: &Path,
    osts: &[u32],
) -> (OssHandle, Result<(), RegisterError>) {
    let config = OssConfig {
        data_dir: data.to_path_buf(),
        osts: osts.to_vec(),
        ost: LocalClusterConfig::default().ost,
        export_timeout: oss::EXPORT_TIMEOUT_DEFAULT,
        limits: Default::default(),
        faults: Default::default(),
        memory_stores: Default::default(),
    };
    let handle = rt.block_on(oss::start(&Address::Unix(socket.to_path_buf()), None, config)).unwrap();
    let registered =
        rt.block_on(oss::register_with_mds(mds, None, handle.address(), osts, Duration::from_secs(10), |_, _| {}));
    (handle, registered)
}

/// Write a file striped over OSTs 0 and 1 and read it back.
fn write_striped(mds: &str, path: &str) {
    let client = Client::connect(mds, ClientOptions::default()).unwrap();
    // Two stripes over the two OSTs there are: one on each.
    let f = create(&client, path, 2, 64 << 10);
    client.pwrite(&f, 0, &pattern(7, 256 << 10)).unwrap();
    client.fsync(&f).unwrap();
    client.close(f).unwrap();
}

/// A new client reads `path` as [`write_striped`] wrote it.
fn reads_back(mds: &str, path: &str) {
    let client = Client::connect(mds, ClientOptions::default()).unwrap();
    let f = open(&client, path);
    assert_eq!(client.pread(&f, 0, 256 << 10).unwrap(), pattern(7, 256 << 10), "{path}");
}

/// What the MDS answers a `Hello` registering `osts` at `address`, sent
/// on a connection of this test's own (kept open in `held`).
async fn register_raw(
    mds: &Address,
    address: &str,
    osts: &[u32],
    held: &mut Vec<lanefs_net::transport::BoxStream>,
) -> Wire {
    let mut stream = connect(mds, None).await.unwrap();
    let role = Role::Oss { address: address.to_string(), osts: osts.to_vec() };
    let mut hello = Vec::new();
    encode(Wire::Hello { magic: MAGIC, version: PROTOCOL_VERSION, role }, &mut hello).unwrap();
    stream.write_all(&hello).await.unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(10), read_frame(&mut stream)).await;
    held.push(stream);
    answer.expect("the MDS answers").unwrap().expect("a frame")
}

/// A second OSS (another data directory) for the OSTs of a live one is
/// refused, saying which OSS serves them; the files on them still read.
#[test]
fn a_second_oss_for_live_osts_is_refused_and_files_still_read() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    let mds = start_mds(&rt, dir.path());
    let mds_address = mds.address().clone();
    let (_first, registered) = start_oss(&rt, &mds_address, &dir.path().join("a"), &dir.path().join("a.sock"), &[0, 1]);
    registered.unwrap();
    rt.block_on(mds.wait_for_objects(Duration::from_secs(10)));
    write_striped(&mds_address.to_string(), "/before");
    let (_rogue, registered) = start_oss(&rt, &mds_address, &dir.path().join("b"), &dir.path().join("b.sock"), &[0, 1]);
    let Err(RegisterError::Refused(reason)) = registered else {
        panic!("a second OSS took over live OSTs: {registered:?}")
    };
    for part in ["OST index 0", "a.sock", "answers", "stop that OSS first"] {
        assert!(reason.contains(part), "{reason:?} lacks {part:?}");
    }
    // A registration of our own for a live index, with an address of
    // nothing: refused too, and the OSTs keep their OSS.
    let mut held = Vec::new();
    let dead = format!("unix:{}", dir.path().join("nothing.sock").display());
    match rt.block_on(register_raw(&mds_address, &dead, &[1], &mut held)) {
        Wire::Refused { reason } => assert!(reason.contains("OST index 1"), "{reason}"),
        other => panic!("a registration naming a dead address replaced a live OSS: {other:?}"),
    }
    reads_back(&mds_address.to_string(), "/before");
    write_striped(&mds_address.to_string(), "/after");
    reads_back(&mds_address.to_string(), "/after");
}

/// Once the OSS holding OSTs is gone (its MDS connection closed), the OSS
/// that serves them next registers without an MDS restart; one that
/// holds its connection open but does not answer loses its registration
/// to the next that asks.
#[test]
fn the_osts_of_a_gone_oss_can_be_registered_again() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    let mds = start_mds(&rt, dir.path());
    let mds_address = mds.address().clone();
    let data = dir.path().join("a");
    {
        // The first OSS, in a runtime of its own: dropping it closes the
        // registration's connection as the death of its process would.
        let first_rt = runtime();
        let (first, registered) = start_oss(&first_rt, &mds_address, &data, &dir.path().join("a.sock"), &[0, 1]);
        registered.unwrap();
        rt.block_on(mds.wait_for_objects(Duration::from_secs(10)));
        write_striped(&mds_address.to_string(), "/before");
        first_rt.block_on(first.shutdown());
    }
    // The same OSTs at another address: registered, and the file reads.
    let (_second, registered) = start_oss(&rt, &mds_address, &data, &dir.path().join("a2.sock"), &[0, 1]);
    registered.expect("the OSTs of a gone OSS are registered again");
    reads_back(&mds_address.to_string(), "/before");
    // A registration that holds its connection but never answers (this
    // test's own, which reads nothing) holds OST 2 until another OSS asks.
    let mut held = Vec::new();
    let silent = format!("unix:{}", dir.path().join("silent.sock").display());
    assert!(matches!(rt.block_on(register_raw(&mds_address, &silent, &[2], &mut held)), Wire::Welcome { .. }));
    let (_third, registered) = start_oss(&rt, &mds_address, &dir.path().join("c"), &dir.path().join("c.sock"), &[2]);
    registered.expect("an OSS that does not answer loses its OSTs to the next");
}

/// An address no client could use is refused with the reason, before it
/// is stored: new clients still connect and list the namespace.
#[test]
fn a_malformed_oss_address_is_refused_and_clients_still_work() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    let mds = start_mds(&rt, dir.path());
    let mds_address = mds.address().clone();
    let (_oss, registered) = start_oss(&rt, &mds_address, &dir.path().join("a"), &dir.path().join("a.sock"), &[0, 1]);
    registered.unwrap();
    rt.block_on(mds.wait_for_objects(Duration::from_secs(10)));
    write_striped(&mds_address.to_string(), "/kept");
    let mut held = Vec::new();
    for bad in ["no-port-here", "host:99999", "unix:", ""] {
        match rt.block_on(register_raw(&mds_address, bad, &[2], &mut held)) {
            Wire::Refused { reason } => {
                assert!(reason.contains("not one a client could use"), "{bad:?}: {reason}");
            }
            other => panic!("the address {bad:?} was taken: {other:?}"),
        }
    }
    let client = Client::connect(&mds_address.to_string(), ClientOptions::default())
        .expect("a new client connects after a bad registration");
    let names: Vec<String> = client.readdir("/").unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(names, ["kept"]);
    reads_back(&mds_address.to_string(), "/kept");
}
