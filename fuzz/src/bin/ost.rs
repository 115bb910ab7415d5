//! Fuzz target: an OST fed a sequence of `ToOst` messages from a few clients.
fn main() {
    afl::fuzz!(|data: &[u8]| lanefs_fuzz::ost(data));
}
