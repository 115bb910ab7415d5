use lanefs_core::client::OpOutput;
use lanefs_core::harness::{Harness, HarnessConfig};
use lanefs_core::ClientId;

const MIB: u64 = 1 << 20;

#[test]
fn two_clients_share_a_file_and_read_each_others_writes() {
    let mut h = Harness::new(HarnessConfig { clients: 2, osts: 2, ..Default::default() }).unwrap();
    let layout = h.create_layout(MIB, 2, Some(0)).unwrap();
    let (a, b) = (ClientId(0), ClientId(1));
    let fa = h.open(a, layout.clone());
    let fb = h.open(b, layout);
    let op = h.write(a, fa, 0, vec![1; 3 * MIB as usize]);
    assert_eq!(h.wait_ok(a, op), OpOutput::Written(3 * MIB));
    let op = h.write(b, fb, MIB, vec![2; MIB as usize]);
    h.wait_ok(b, op);
    let op = h.read(a, fa, 0, 3 * MIB);
    let OpOutput::Read(data) = h.wait_ok(a, op) else { panic!() };
    assert!(data[..MIB as usize].iter().all(|&x| x == 1));
    assert!(data[MIB as usize..2 * MIB as usize].iter().all(|&x| x == 2));
    assert!(data[2 * MIB as usize..].iter().all(|&x| x == 1));
    let op = h.stat(b, fb);
    assert!(matches!(h.wait_ok(b, op), OpOutput::Size { size, .. } if size == 3 * MIB));
    h.drive().unwrap();
    println!("{:?}", h.lock_counters());
}

#[test]
fn the_page_cache_stays_within_its_budget_once_data_is_written_back() {
    use lanefs_core::client::ClientConfig;
    let client = ClientConfig { cached_bytes_max: MIB, ..ClientConfig::default() };
    let mut h = Harness::new(HarnessConfig { clients: 1, osts: 1, client, ..Default::default() }).unwrap();
    let layout = h.create_layout(MIB, 1, Some(0)).unwrap();
    let c = ClientId(0);
    let f = h.open(c, layout);
    for i in 0..16u64 {
        let op = h.write(c, f, i * MIB, vec![i as u8; MIB as usize]);
        h.wait_ok(c, op);
    }
    let op = h.fsync(c, f);
    h.wait_ok(c, op);
    let cached = h.client(c).cache().cached_pages() as u64 * 4096;
    assert!(cached <= 2 * MIB, "{cached} bytes cached with a 1 MiB budget");
    let op = h.read(c, f, 3 * MIB, MIB);
    assert_eq!(h.wait_ok(c, op), OpOutput::Read(vec![3; MIB as usize]));
}
