//! Connections that have proved no key never take the places of those
//! that have: a TCP server handshakes in a pool of its own, and counts a
//! connection against its connection cap only once it is through (see
//! `lanefs_net::hello`).

mod common;

use lanefs_client::Client;
use lanefs_net::auth::KeyRootSquash;
use lanefs_net::limits::{ServerLimits, HANDSHAKES_PER_SOURCE_MAX};
use lanefs_server::cluster::{LocalCluster, LocalClusterConfig};
use std::time::Duration;

/// A cluster on TCP whose servers serve at most `connections_max`
/// connections each. The keyed client writes at / as root: these tests
/// are about admission, not squashing, so the client key's root is not
/// squashed.
fn tcp_cluster(connections_max: usize) -> LocalCluster {
    let limits = ServerLimits { connections_max: Some(connections_max), ..Default::default() };
    let config = LocalClusterConfig {
        osts: 1,
        unix_sockets: false,
        limits,
        key_root_squash: KeyRootSquash::Off,
        ..Default::default()
    };
    LocalCluster::start(config).unwrap()
}

/// More bare TCP connects than the servers' connection cap, held open
/// and never sending a byte, beside a keyed client: the client connects,
/// writes and reads.
#[test]
fn bare_connections_do_not_take_the_places_of_keyed_clients() {
    let connections_max = 4;
    let cluster = tcp_cluster(connections_max);
    let flood_per_server = 10 * connections_max;
    let mut flood = Vec::new();
    for address in [cluster.mds_address(), cluster.oss_address().unwrap()] {
        for _ in 0..flood_per_server {
            flood.push(std::net::TcpStream::connect(&address).expect("the kernel takes the connection"));
        }
    }
    // Let the servers accept them all.
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while std::time::Instant::now() < deadline {
        let (oss, mds) = cluster.server_stats();
        if oss.handshakes + oss.connections >= flood_per_server && mds.handshakes >= flood_per_server {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let client = Client::connect(&cluster.mds_address(), cluster.client_options())
        .expect("a keyed client connects beside the bare connections");
    common::verified_write_read(&client, "/beside-the-flood", 1, 300_000);
    let (oss, mds) = cluster.server_stats();
    assert!(mds.connections <= connections_max && oss.connections <= connections_max, "{mds:?} {oss:?}");
    drop(flood);
}

/// One address holds at most its share of the handshake pool: a flood
/// of bare connects from 127.0.0.2, several times that share, leaves room
/// for a keyed client from 127.0.0.1.
#[test]
fn one_address_cannot_fill_the_handshake_pool() {
    let cluster = tcp_cluster(4);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let flood_per_server = 3 * HANDSHAKES_PER_SOURCE_MAX;
    let flood = rt.block_on(async {
        let mut flood = Vec::new();
        for address in [cluster.mds_address(), cluster.oss_address().unwrap()] {
            let address: std::net::SocketAddr = address.parse().unwrap();
            for _ in 0..flood_per_server {
                let socket = tokio::net::TcpSocket::new_v4().unwrap();
                socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
                flood.push(socket.connect(address).await.expect("the kernel takes the connection"));
            }
        }
        flood
    });
    std::thread::sleep(Duration::from_millis(300));
    let (oss, mds) = cluster.server_stats();
    assert!(mds.handshakes <= HANDSHAKES_PER_SOURCE_MAX, "{mds:?}");
    assert!(oss.handshakes <= HANDSHAKES_PER_SOURCE_MAX, "{oss:?}");
    let client = Client::connect(&cluster.mds_address(), cluster.client_options())
        .expect("a keyed client from another address connects");
    common::verified_write_read(&client, "/beside-one-address", 2, 300_000);
    drop(flood);
}
