//! Fuzz target: an OST, with or without recovery, fed a sequence of `ToOst`
//! messages from a few clients, syncs answered or failed, and restarts.
fn main() {
    afl::fuzz!(|data: &[u8]| lanefs_fuzz::ost::run(data));
}
