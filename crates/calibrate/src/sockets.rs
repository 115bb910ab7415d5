//! The host's sockets, as a local lanefs cluster's clients and servers
//! use them: the one-way latency (half the median round trip of a 64-byte
//! message echoed back, between two threads) and the bandwidth of 1 MiB
//! writes streamed to a reader, over a Unix socket pair and over TCP on
//! loopback.

use crate::{gib_s, median};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

const MESSAGE_BYTES: usize = 64;
const CHUNK_BYTES: usize = 1 << 20;

#[derive(Clone, Debug)]
pub struct Socket {
    /// Half the median round trip.
    pub one_way: Duration,
    /// Half the 10th and the 90th percentile round trip: a thread woken
    /// from sleep takes far longer than one already running, and which a
    /// round trip meets depends on the scheduler, so the spread is shown.
    pub one_way_spread: (Duration, Duration),
    pub gib_s: f64,
}

pub fn measure_unix(round_trips: usize, bytes: u64) -> Result<Socket, String> {
    let failed = |e: std::io::Error| format!("a Unix socket pair: {e}");
    let (a, b) = UnixStream::pair().map_err(failed)?;
    let (one_way, one_way_spread) = latency(a, b, round_trips).map_err(failed)?;
    let (a, b) = UnixStream::pair().map_err(failed)?;
    let gib_s = bandwidth(a, b, bytes).map_err(failed)?;
    Ok(Socket { one_way, one_way_spread, gib_s })
}

pub fn measure_tcp(round_trips: usize, bytes: u64) -> Result<Socket, String> {
    let failed = |e: std::io::Error| format!("TCP on 127.0.0.1: {e}");
    let pair = || -> std::io::Result<(TcpStream, TcpStream)> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let a = TcpStream::connect(listener.local_addr()?)?;
        let (b, _) = listener.accept()?;
        a.set_nodelay(true)?;
        b.set_nodelay(true)?;
        Ok((a, b))
    };
    let (a, b) = pair().map_err(failed)?;
    let (one_way, one_way_spread) = latency(a, b, round_trips).map_err(failed)?;
    let (a, b) = pair().map_err(failed)?;
    let gib_s = bandwidth(a, b, bytes).map_err(failed)?;
    Ok(Socket { one_way, one_way_spread, gib_s })
}

/// Half the median round trip, and half its 10th and 90th percentiles.
fn latency<S: Read + Write + Send>(
    mut a: S,
    mut b: S,
    round_trips: usize,
) -> std::io::Result<(Duration, (Duration, Duration))> {
    std::thread::scope(|scope| {
        let echo = scope.spawn(move || -> std::io::Result<()> {
            let mut message = [0u8; MESSAGE_BYTES];
            for _ in 0..round_trips {
                b.read_exact(&mut message)?;
                b.write_all(&message)?;
            }
            Ok(())
        });
        let mut message = [7u8; MESSAGE_BYTES];
        let mut samples = Vec::with_capacity(round_trips);
        for _ in 0..round_trips {
            let began = Instant::now();
            a.write_all(&message)?;
            a.read_exact(&mut message)?;
            samples.push(began.elapsed());
        }
        echo.join().expect("the echoing thread")?;
        let middle = median(&mut samples);
        let at = |fraction: f64| samples[((samples.len() - 1) as f64 * fraction) as usize] / 2;
        Ok((middle / 2, (at(0.1), at(0.9))))
    })
}

fn bandwidth<S: Read + Write + Send>(mut a: S, mut b: S, bytes: u64) -> std::io::Result<f64> {
    std::thread::scope(|scope| {
        let reader = scope.spawn(move || -> std::io::Result<u64> {
            let mut buffer = vec![0u8; CHUNK_BYTES];
            let mut read = 0u64;
            while read < bytes {
                let n = b.read(&mut buffer)?;
                if n == 0 {
                    break;
                }
                read += n as u64;
            }
            Ok(read)
        });
        let chunk = vec![3u8; CHUNK_BYTES];
        let began = Instant::now();
        let mut written = 0u64;
        while written < bytes {
            a.write_all(&chunk)?;
            written += CHUNK_BYTES as u64;
        }
        let read = reader.join().expect("the reading thread")?;
        let elapsed = began.elapsed();
        if read != written {
            return Err(std::io::Error::other(format!("{read} bytes arrived of {written} sent")));
        }
        Ok(gib_s(read, elapsed))
    })
}
