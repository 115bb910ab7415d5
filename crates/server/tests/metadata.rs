//! The MDS on a real local cluster: the objects' lifecycle it owns
//! (precreation, destruction, a missing object), the permissions it checks
//! for what clients report, and listings of any size.

use lanefs_client::{Client, ClientOptions, File, NetError};
use lanefs_core::layout::Layout;
use lanefs_mds::Mds;
use lanefs_proto::{Access, CreateMode, Credentials, MdsConfig, MdsReply, MdsRequest, Owner, StripeSpec};
use lanefs_server::cluster::{LocalCluster, LocalClusterConfig};
use lanefs_server::mds_objects::PRECREATE_BATCH_MIN;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const KIB: u64 = 1 << 10;

fn cluster(osts: u32) -> LocalCluster {
    LocalCluster::start(LocalClusterConfig { osts, ..Default::default() }).expect("cluster starts")
}

fn client(c: &LocalCluster) -> Client {
    Client::connect(&c.mds_address(), ClientOptions::default()).expect("client connects")
}

fn client_as(c: &LocalCluster, credentials: Credentials) -> Client {
    let options = ClientOptions { credentials, ..Default::default() };
    Client::connect(&c.mds_address(), options).expect("client connects")
}

fn create_request(path: &str, count: i64, start_ost: Option<i64>) -> MdsRequest {
    MdsRequest::Create {
        path: path.into(),
        stripe: StripeSpec { count: Some(count), size: Some(64 * KIB), start_ost, ..StripeSpec::default() },
        mode: CreateMode::Exclusive,
        access: Access::ReadWrite,
        permissions: 0o644,
    }
}

fn create(cl: &Client, path: &str, count: i64) -> File {
    match cl.mds(create_request(path, count, None)).unwrap() {
        MdsReply::File(info) => cl.open_layout(path, info.layout).unwrap(),
        other => panic!("create answered {other:?}"),
    }
}

fn open(cl: &Client, path: &str) -> File {
    match cl.mds(MdsRequest::Open { path: path.into(), access: Access::Read }).unwrap() {
        MdsReply::File(info) => cl.open_layout(path, info.layout).unwrap(),
        other => panic!("open answered {other:?}"),
    }
}

/// The files on the OSTs that hold `layout`'s objects.
fn object_files(c: &LocalCluster, layout: &Layout) -> Vec<PathBuf> {
    let path = |ost: u32, object: u64| c.data_dir().join(format!("OST{ost:04x}/objects/{object}"));
    layout.objects().iter().map(|key| path(key.ost.0, key.object.0)).collect()
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn bytes(seed: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed)).collect()
}

#[test]
fn the_first_creates_find_objects_precreated_at_registration() {
    let c = cluster(2);
    for ost in 0..2 {
        let last_id = std::fs::read_to_string(c.data_dir().join(format!("OST{ost:04x}/LAST_ID"))).unwrap();
        assert!(last_id.trim().parse::<u64>().unwrap() >= PRECREATE_BATCH_MIN, "OST {ost}: LAST_ID {last_id}");
    }
    let cl = client(&c);
    let started = Instant::now();
    let f = create(&cl, "/first", 2);
    assert!(started.elapsed() < Duration::from_secs(5), "the create waited {:?}", started.elapsed());
    for file in object_files(&c, &f.layout) {
        assert_eq!(std::fs::metadata(&file).unwrap().len(), 0, "{} exists before any write", file.display());
    }
}

#[test]
fn the_mds_destroys_the_objects_of_removed_files() {
    let c = cluster(2);
    let cl = client(&c);
    let f = create(&cl, "/doomed", 2);
    cl.pwrite(&f, 0, &bytes(1, 200_000)).unwrap();
    cl.fsync(&f).unwrap();
    let replaced = create(&cl, "/replaced", 1);
    let keeper = create(&cl, "/keeper", 1);
    let (doomed, replaced, keeper) =
        (object_files(&c, &f.layout), object_files(&c, &replaced.layout), object_files(&c, &keeper.layout));
    assert!(doomed.iter().chain(&replaced).all(|file| file.exists()));
    cl.mds(MdsRequest::Unlink { path: "/doomed".into() }).unwrap();
    cl.mds(MdsRequest::Rename { from: "/keeper".into(), to: "/replaced".into() }).unwrap();
    wait_until("the removed files' objects are gone", || doomed.iter().chain(&replaced).all(|file| !file.exists()));
    assert!(keeper.iter().all(|file| file.exists()), "the renamed file keeps its objects");
}

#[test]
fn objects_removed_while_their_oss_is_down_are_destroyed_when_it_is_back() {
    let mut c = cluster(1);
    let cl = client(&c);
    let f = create(&cl, "/f", 1);
    cl.pwrite(&f, 0, &bytes(2, 10_000)).unwrap();
    cl.close(f.clone()).unwrap();
    let files = object_files(&c, &f.layout);
    c.stop_oss();
    cl.mds(MdsRequest::Unlink { path: "/f".into() }).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(files[0].exists(), "nobody could destroy it: its OSS is down");
    c.start_oss().unwrap();
    wait_until("the object is destroyed once its OSS is back", || !files[0].exists());
}

/// Creates take objects from the pools without the OSS; when a pool is
/// empty and its OSS is down, a file that names the OST fails saying so,
/// and one whose OST the MDS chooses goes to an OST with objects left.
#[test]
fn creates_need_no_oss_until_a_pool_runs_dry_then_fail_naming_the_ost() {
    let mut c = cluster(2);
    let cl = client(&c);
    c.stop_oss();
    let mut made = 0;
    let error = loop {
        match cl.mds(create_request(&format!("/on0-{made}"), 1, Some(0))) {
            Ok(_) => made += 1,
            Err(error) => break error,
        }
        assert!(made < 100_000, "a pool without end");
    };
    assert!(made >= PRECREATE_BATCH_MIN / 2, "only {made} creates from the pool");
    let text = error.to_string();
    assert!(text.contains("no object available on OST0000") && text.contains("cannot create objects"), "{text}");
    // The MDS chooses: OST 1 still has objects.
    let chosen = cl.mds(MdsRequest::Create {
        path: "/anywhere".into(),
        stripe: StripeSpec::default(),
        mode: CreateMode::Exclusive,
        access: Access::Write,
        permissions: 0o644,
    });
    let Ok(MdsReply::File(info)) = chosen else { panic!("{chosen:?}") };
    assert_eq!(info.layout.objects()[0].ost.0, 1, "OST 0 skipped");
    c.start_oss().unwrap();
    wait_until("the pool is refilled", || cl.mds(create_request(&format!("/on0-{made}"), 1, Some(0))).is_ok());
}

#[test]
fn a_vanished_object_fails_the_read_of_its_stripe_naming_it() {
    let c = cluster(2);
    let writer = client(&c);
    let f = create(&writer, "/striped", 2);
    writer.pwrite(&f, 0, &bytes(3, 256 * KIB as usize)).unwrap();
    writer.close(f.clone()).unwrap();
    drop(writer);
    let lost = &f.layout.objects()[1];
    std::fs::remove_file(&object_files(&c, &f.layout)[1]).unwrap();
    let reader = client(&c);
    let g = open(&reader, "/striped");
    assert_eq!(reader.pread(&g, 0, 64 * KIB).unwrap(), bytes(3, 64 * KIB as usize), "stripe 0 is there");
    let error = reader.pread(&g, 64 * KIB, 64 * KIB).unwrap_err();
    match &error {
        NetError::MissingObject { path, stripe, ost, object } => {
            assert_eq!((path.as_str(), *stripe, *ost, *object), ("/striped", 1, lost.ost.0, lost.object.0));
        }
        other => panic!("expected MissingObject, got {other:?}"),
    }
    let text = error.to_string();
    assert!(text.contains(&format!("object {} of stripe 1 is missing on OST0001", lost.object.0)), "{text}");
    let size = reader.size(&g);
    assert!(matches!(size, Err(NetError::MissingObject { stripe: 1, .. })), "a glimpse too: {size:?}");
}

#[test]
fn permissions_are_checked_for_the_credentials_each_client_sends() {
    let c = cluster(1);
    let owner = client(&c);
    let me = owner.credentials().clone();
    let stranger = client_as(&c, Credentials::user(me.uid.wrapping_add(4242), me.gid.wrapping_add(4242)));
    owner.mds(MdsRequest::Mkdir { path: "/shared".into(), permissions: 0o755 }).unwrap();
    let f = create(&owner, "/shared/f", 1);
    owner.pwrite(&f, 0, b"mine").unwrap();
    owner.close(f).unwrap();
    let attr = match owner.mds(MdsRequest::Stat { path: "/shared/f".into() }).unwrap() {
        MdsReply::Attr(attr) => attr,
        other => panic!("{other:?}"),
    };
    assert_eq!((attr.uid, attr.gid, attr.permissions), (me.uid, me.gid, 0o644));
    let error = stranger.mds(MdsRequest::Mkdir { path: "/shared/x".into(), permissions: 0o755 }).unwrap_err();
    assert!(error.to_string().contains("lacks write and search (wx) permission on /shared"), "{error}");
    let write = MdsRequest::Open { path: "/shared/f".into(), access: Access::Write };
    assert!(stranger.mds(write).unwrap_err().to_string().contains("lacks write (w) permission on /shared/f"));
    assert_eq!(stranger.pread(&open(&stranger, "/shared/f"), 0, 4).unwrap(), b"mine");
    assert!(stranger.mds(MdsRequest::Unlink { path: "/shared/f".into() }).is_err());
    owner.mds(MdsRequest::SetAttr { path: "/shared".into(), permissions: Some(0o700), uid: None, gid: None }).unwrap();
    assert!(stranger.readdir("/shared").unwrap_err().to_string().contains("lacks read (r) permission on /shared"));
    let stat = stranger.mds(MdsRequest::Stat { path: "/shared/f".into() }).unwrap_err();
    assert!(stat.to_string().contains("lacks search (x) permission on /shared"), "{stat}");
    assert_eq!(owner.readdir("/shared").unwrap().len(), 1);
}

#[test]
fn root_squash_takes_roots_privileges_away() {
    let squash = Owner { uid: 65534, gid: 65534 };
    let c =
        LocalCluster::start(LocalClusterConfig { osts: 1, root_squash: Some(squash), ..Default::default() }).unwrap();
    let root = client_as(&c, Credentials::ROOT);
    // The root directory is the test's user's, 0755: whoever that is, the
    // squashed root is someone else, with the others' bits.
    let error = root.mds(MdsRequest::Mkdir { path: "/d".into(), permissions: 0o755 }).unwrap_err().to_string();
    assert!(error.contains("uid 65534 lacks write and search (wx) permission on /"), "{error}");
    assert!(root.readdir("/").unwrap().is_empty(), "reading is for everyone");
}

/// Old listings came in one reply: past the 16 MiB header limit, the MDS
/// could not send it and `ls` waited forever. 61,100 names of 255 bytes are
/// more than 16 MiB of listing; they come in pages of at most 1 MiB.
#[test]
fn a_listing_larger_than_a_frame_comes_in_pages() {
    const ENTRIES: usize = 61_100;
    let mut mds = Mds::open_in_memory(MdsConfig::new(1)).unwrap();
    mds.mkdir(&Credentials::ROOT, "/big", 0o755).unwrap();
    let name = |i: usize| format!("{i:06}{}", "n".repeat(249));
    for i in 0..ENTRIES {
        mds.mkdir(&Credentials::ROOT, &format!("/big/{}", name(i)), 0o755).unwrap();
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let listen = lanefs_net::transport::Address::Unix(dir.path().join("mds.sock"));
    let server = runtime.block_on(lanefs_server::mds_server::start(&listen, None, mds, 1)).unwrap();
    let cl = Client::connect(&server.address().to_string(), ClientOptions::default()).unwrap();
    let mut listed = 0;
    let mut pages = 0;
    for page in cl.readdir_pages("/big") {
        let page = page.unwrap();
        assert!(page.len() <= lanefs_proto::READDIR_ENTRIES_MAX);
        assert_eq!(page[0].name, name(listed), "pages follow each other");
        listed += page.len();
        pages += 1;
    }
    assert_eq!(listed, ENTRIES);
    assert!(pages >= 16, "{pages} pages of at most 1 MiB for over 16 MiB");
    drop(cl);
    runtime.block_on(server.shutdown());
}

/// The MDS records an open only of a file that exists: an id no file has
/// (or a directory's) takes no room in its table of open files.
#[test]
fn only_files_that_exist_are_recorded_open() {
    let c = cluster(1);
    let cl = client(&c);
    create(&cl, "/f", 1);
    let MdsReply::Attr(file) = cl.mds(MdsRequest::Stat { path: "/f".into() }).unwrap() else { panic!("stat") };
    cl.mds_opened(file.fid).expect("a file that exists is recorded open");
    cl.mds_closed(file.fid).unwrap();
    for fid in [lanefs_proto::Fid(1 << 40), lanefs_proto::Fid::ROOT] {
        let refused = cl.mds_opened(fid).unwrap_err().to_string();
        assert!(refused.contains("not recorded open") && refused.contains(&lanefs_proto::fid_name(fid)), "{refused}");
    }
}
