//! Cache advice on a real OSS (`lfs ladvise -a willread|dontneed`): the
//! object files' pages in the OSS's page cache, counted with `mincore(2)`
//! on a mapping of each file, go when told `dontneed` and come back when
//! told `willread`, for the byte ranges the file's layout puts on each
//! object. The cluster's directory must be on a disk file system (tmpfs
//! keeps every page resident); the test says so and passes over it if not.

mod common;

use common::create;
use lanefs_client::{Client, File, NetError};
use lanefs_core::client::ladvise::{Advice, CacheAdvice};
use lanefs_server::cluster::{LocalCluster, LocalClusterConfig};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;
const PAGE: u64 = 4096;

/// The files on the OSTs that hold `file`'s objects, by stripe.
fn object_files(c: &LocalCluster, file: &File) -> Vec<PathBuf> {
    let path = |ost: u32, object: u64| c.data_dir().join(format!("OST{ost:04x}/objects/{object}"));
    file.layout.objects().iter().map(|key| path(key.ost.0, key.object.0)).collect()
}

/// Which of the first `pages` pages of `path` are in the page cache.
fn resident(path: &Path, pages: u64) -> Vec<bool> {
    let file = std::fs::File::open(path).unwrap();
    let len = (pages * PAGE) as usize;
    // SAFETY: a fresh read-only shared mapping of an open file, never
    // touched (touching it would fault pages in); unmapped below.
    let map = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, file.as_raw_fd(), 0) };
    assert_ne!(map, libc::MAP_FAILED, "mmap {}: {}", path.display(), std::io::Error::last_os_error());
    let mut vec = vec![0u8; pages as usize];
    // SAFETY: `map` is page-aligned and `len` long; `vec` has one byte per page.
    let rc = unsafe { libc::mincore(map, len, vec.as_mut_ptr()) };
    let error = std::io::Error::last_os_error();
    // SAFETY: the mapping made above, not used after this.
    unsafe { libc::munmap(map, len) };
    assert_eq!(rc, 0, "mincore {}: {error}", path.display());
    vec.iter().map(|b| b & 1 == 1).collect()
}

fn count(pages: &[bool]) -> usize {
    pages.iter().filter(|&&r| r).count()
}

/// Whether `dir` is on a file system whose page cache can be dropped.
fn on_a_disk(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).unwrap();
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and an out-parameter statfs writes into.
    assert_eq!(unsafe { libc::statfs(path.as_ptr(), &mut st) }, 0);
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    !matches!(st.f_type as i64, TMPFS_MAGIC | RAMFS_MAGIC)
}

/// Waits (readahead runs on after `WILLNEED` returns) until `done`.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "{what} did not happen in 10 s");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn dontneed_drops_the_objects_pages_and_willread_reads_its_range_back_in() {
    let c = LocalCluster::start(LocalClusterConfig { osts: 2, ..Default::default() }).expect("cluster starts");
    if !on_a_disk(c.data_dir()) {
        eprintln!("{} is in memory: its page cache cannot be dropped; nothing to observe", c.data_dir().display());
        return;
    }
    let cl = Client::connect(&c.mds_address(), c.client_options()).unwrap();
    let f = create(&cl, "/advised", 2, MIB);
    // 2 MiB on each object, made durable so that its pages are clean.
    let data: Vec<u8> = (0..4 * MIB).map(|i| (i % 251) as u8).collect();
    cl.pwrite(&f, 0, &data).unwrap();
    cl.fsync(&f).unwrap();
    let objects = object_files(&c, &f);
    let pages = 2 * MIB / PAGE;
    assert!(objects.iter().all(|o| count(&resident(o, pages)) > 0), "written pages are cached on the OSS");

    cl.ladvise(&f, &[Advice::cache(CacheAdvice::DontNeed, 0, 4 * MIB - 1, false)]).unwrap();
    for object in &objects {
        assert_eq!(count(&resident(object, pages)), 0, "{} still cached after dontneed", object.display());
    }

    // File bytes [0, 3 MiB) with 1 MiB stripes over two objects: all of
    // object 0's 2 MiB (file [0, 1M) and [2M, 3M)), object 1's first MiB.
    cl.ladvise(&f, &[Advice::cache(CacheAdvice::WillRead, 0, 3 * MIB - 1, false)]).unwrap();
    let half = (MIB / PAGE) as usize;
    wait_until("the prefetch of the advised range", || {
        count(&resident(&objects[0], pages)) == pages as usize && count(&resident(&objects[1], pages)[..half]) == half
    });
    assert_eq!(count(&resident(&objects[1], pages)[half..]), 0, "object 1's second MiB was not advised");

    // In the background (`-b`): the call returns at once, the pages go.
    cl.ladvise(&f, &[Advice::cache(CacheAdvice::DontNeed, 0, 4 * MIB - 1, true)]).unwrap();
    wait_until("the background dontneed", || objects.iter().all(|o| count(&resident(o, pages)) == 0));
    // The bytes are the same through all of it.
    assert_eq!(cl.pread(&f, 0, 4 * MIB).unwrap(), data);
}

#[test]
fn advice_on_a_vanished_object_fails_naming_its_ost() {
    let c = LocalCluster::start(LocalClusterConfig { osts: 2, ..Default::default() }).expect("cluster starts");
    let cl = Client::connect(&c.mds_address(), c.client_options()).unwrap();
    let f = create(&cl, "/gone", 2, MIB);
    let lost = f.layout.objects()[1];
    std::fs::remove_file(&object_files(&c, &f)[1]).unwrap();
    let error = cl.ladvise(&f, &[Advice::cache(CacheAdvice::WillRead, 0, 2 * MIB - 1, false)]).unwrap_err();
    match error {
        NetError::MissingObject { stripe: 1, ost, object, .. } => {
            assert_eq!((ost, object), (lost.ost.0, lost.object.0))
        }
        other => panic!("{other:?}"),
    }
    // Advice on the object still there only is done.
    cl.ladvise(&f, &[Advice::cache(CacheAdvice::WillRead, 0, MIB - 1, false)]).unwrap();
}
