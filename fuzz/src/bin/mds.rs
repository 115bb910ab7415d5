//! Fuzz target: the MDS fed a sequence of namespace requests.
fn main() {
    afl::fuzz!(|data: &[u8]| lanefs_fuzz::mds(data));
}
