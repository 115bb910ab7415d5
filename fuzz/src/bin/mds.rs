//! Fuzz target: the MDS fed a sequence of namespace requests, each with its
//! caller's credentials.
fn main() {
    afl::fuzz!(|data: &[u8]| lanefs_fuzz::mds::run(data));
}
