//! Restriping a file in place (`lanefs migrate`) through the client
//! library: the bytes stay; readers and writers that keep the file open
//! wait out the copy and go on with its new layout; the old objects are
//! gone.

mod common;

use lanefs_client::migrate::migrate;
use lanefs_client::{Client, NetError};
use lanefs_proto::StripeSpec;
use lanefs_server::cluster::{LocalCluster, LocalClusterConfig};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

const MIB: u64 = 1 << 20;

fn cluster() -> LocalCluster {
    LocalCluster::start(LocalClusterConfig { osts: 4, ..Default::default() }).unwrap()
}

fn client(c: &LocalCluster) -> Client {
    Client::connect(&c.mds_address(), c.client_options()).unwrap()
}

fn striping(count: i64, size: u64) -> Option<StripeSpec> {
    Some(StripeSpec { count: Some(count), size: Some(size), ..StripeSpec::default() })
}

#[test]
fn a_file_keeps_its_bytes_and_its_open_handles_while_it_is_restriped() {
    let c = cluster();
    let (a, b, m) = (client(&c), client(&c), client(&c));
    let file = common::create(&a, "/f", 1, MIB);
    let data = common::pattern(1, (9 * MIB + 12_345) as usize);
    // Dirty in a's cache: the migration's group lock has it flushed first.
    a.pwrite(&file, 0, &data).unwrap();
    let reader = common::open(&b, "/f");
    assert_eq!(b.pread(&reader, 0, 100).unwrap(), data[..100]);
    let migrated = migrate(&m, "/f", striping(3, MIB)).unwrap();
    assert_eq!(migrated.size, data.len() as u64);
    assert_eq!((migrated.old.stripe_count(), migrated.new.stripe_count()), (1, 3));
    // The open handles go on, on the new layout.
    assert_eq!(b.pread(&reader, 0, data.len() as u64).unwrap(), data);
    a.pwrite(&file, 100, b"after").unwrap();
    a.fsync(&file).unwrap();
    assert_eq!(b.pread(&reader, 100, 5).unwrap(), b"after");
    assert_eq!(b.size(&reader).unwrap(), data.len() as u64);
    // The old object is gone from its OST.
    let stale = b.open_layout("/f", migrated.old.clone()).unwrap();
    let gone = b.pread(&stale, 0, 10).unwrap_err();
    assert!(matches!(gone, NetError::MissingObject { .. }), "{gone}");
    // A new open has the new layout; with no striping given, a migration
    // keeps the file's own on other objects.
    let again = migrate(&m, "/f", None).unwrap();
    assert_eq!((again.new.stripe_count(), again.new.stripe_size()), (3, MIB));
    assert!(again.new.objects().iter().all(|object| !migrated.new.objects().contains(object)));
    let fresh = common::open(&m, "/f");
    assert_eq!(fresh.layout, again.new);
    let mut expected = data.clone();
    expected[100..105].copy_from_slice(b"after");
    assert_eq!(m.pread(&fresh, 0, data.len() as u64).unwrap(), expected);
    for (cl, f) in [(&a, file), (&b, reader), (&m, fresh)] {
        cl.close(f).unwrap();
    }
}

/// A file of holes and bytes keeps both: a hole is not written (it holds
/// no space on the new objects) and the size past a hole at the end stays.
#[test]
fn holes_stay_holes_and_the_size_stays() {
    let c = cluster();
    let a = client(&c);
    let file = common::create(&a, "/sparse", 2, MIB);
    a.pwrite(&file, 20 * MIB, b"island").unwrap();
    a.truncate(&file, 64 * MIB).unwrap();
    a.fsync(&file).unwrap();
    let migrated = migrate(&a, "/sparse", striping(4, MIB)).unwrap();
    assert_eq!(migrated.size, 64 * MIB);
    let (size, space) = a.size_and_space(&file).unwrap();
    assert_eq!(size, 64 * MIB);
    assert!(space < 8 * MIB, "{space} bytes held: the holes were written");
    assert_eq!(a.pread(&file, 20 * MIB, 6).unwrap(), b"island");
    assert_eq!(a.pread(&file, 0, 4096).unwrap(), vec![0; 4096]);
}

/// Readers and a writer that keep the file open through several
/// migrations: every read finds the file's bytes, every write is kept.
#[test]
fn readers_and_a_writer_go_on_through_migrations() {
    let c = cluster();
    let setup = client(&c);
    const CHUNK: u64 = 64 << 10;
    const CHUNKS: u64 = 96;
    let base = common::pattern(7, (CHUNK * CHUNKS) as usize);
    let file = common::create(&setup, "/busy", 2, MIB);
    setup.pwrite(&file, 0, &base).unwrap();
    setup.fsync(&file).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    // The reader reads the first half, which nobody writes.
    let reader = {
        let (stop, reads, base) = (stop.clone(), reads.clone(), base.clone());
        let cl = client(&c);
        std::thread::spawn(move || {
            let f = common::open(&cl, "/busy");
            let half = CHUNK * CHUNKS / 2;
            while !stop.load(Ordering::Relaxed) {
                assert_eq!(cl.pread(&f, 0, half).unwrap(), base[..half as usize], "a read found other bytes");
                reads.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    // The writer rewrites the second half, chunk by chunk.
    let writer = {
        let cl = client(&c);
        std::thread::spawn(move || {
            let f = common::open(&cl, "/busy");
            for i in CHUNKS / 2..CHUNKS {
                cl.pwrite(&f, i * CHUNK, &common::pattern(1000 + i, CHUNK as usize)).unwrap();
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            cl.fsync(&f).unwrap();
            cl.close(f).unwrap();
        })
    };
    let m = client(&c);
    for count in [4, 1, 3, 2] {
        migrate(&m, "/busy", striping(count, MIB)).unwrap();
    }
    writer.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    reader.join().unwrap();
    assert!(reads.load(Ordering::Relaxed) > 0);
    let check = client(&c);
    let f = common::open(&check, "/busy");
    for i in 0..CHUNKS {
        let want = if i < CHUNKS / 2 {
            base[(i * CHUNK) as usize..((i + 1) * CHUNK) as usize].to_vec()
        } else {
            common::pattern(1000 + i, CHUNK as usize)
        };
        assert_eq!(check.pread(&f, i * CHUNK, CHUNK).unwrap(), want, "chunk {i}");
    }
}
