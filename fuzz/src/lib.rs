//! Fuzz targets for the code that takes input from peers: the frame
//! decoder, the OST, the client's handling of server messages, and the MDS.
//!
//! Each target is a function of one input (`&[u8]`, its module's `run`)
//! that must never panic; the binaries in `src/bin` hand them to AFL
//! (`cargo afl fuzz`), and the `seeds` binary writes the seed corpus from
//! real exchanges. Inputs other than the codec's are sequences of
//! [`ost::OstAction`], [`client::ClientAction`] or `(Credentials,
//! MdsRequest)` values, each bincode-encoded as the wire encodes headers
//! (fixed-width little-endian integers, enum tags as `u32`): AFL mutates
//! real messages, and a protocol change shows up as seeds that no longer
//! decode (regenerate them, see `README.md`).
//!
//! What each target checks after every input it feeds:
//! - [`codec`]: `decode` and `read_frame` answer an error or a message, and
//!   a decoded message encodes and decodes to itself;
//! - [`ost`]: `Ost::check_invariants`, and every request that expects an
//!   answer gets exactly one (at the end, once syncs and glimpses are done
//!   and recovery is over; a restart loses what it had not answered);
//! - [`client`]: `Client::check_invariants`, and the invariants of the
//!   real OSTs it exchanges messages with;
//! - [`mds`]: `Mds::check_invariants`, and `Statfs` answered as such.
//!
//! The targets mirror the proptests of `make test`
//! (`crates/core/tests/hostile.rs`, `crates/mds/tests/mds/hostile.rs`,
//! `crates/proto/tests/codec_props.rs`): a property found broken here is
//! pinned there, or in a unit test, once fixed.

pub mod client;
pub mod codec;
pub mod mds;
pub mod ost;

use bincode::Options;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Actions decoded from one input, at most: keeps every run short.
pub const ACTIONS_MAX: usize = 256;

/// The encoding of every input: the wire's header encoding, bounded by the
/// input's own length so that no length field makes the decoder allocate.
pub fn options(limit: usize) -> impl Options {
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .with_little_endian()
        .with_limit(limit as u64)
        .allow_trailing_bytes()
}

/// The values at the front of `data`, up to the first that does not decode.
pub fn decode_all<T: DeserializeOwned>(data: &[u8]) -> Vec<T> {
    let mut rest = data;
    let mut values = Vec::new();
    while !rest.is_empty() && values.len() < ACTIONS_MAX {
        match options(data.len()).deserialize_from(&mut rest) {
            Ok(value) => values.push(value),
            Err(_) => break,
        }
    }
    values
}

/// The input that decodes to `values`.
pub fn encode_all<T: Serialize>(values: &[T]) -> Vec<u8> {
    let mut out = Vec::new();
    for value in values {
        options(usize::MAX).serialize_into(&mut out, value).expect("encodable");
    }
    out
}

/// An input of a target that takes a flags byte first: `flags`, then
/// `values`.
pub fn encode_with_flags<T: Serialize>(flags: u8, values: &[T]) -> Vec<u8> {
    let mut out = vec![flags];
    out.extend(encode_all(values));
    out
}
