//! Fuzz target: a client with operations in flight, with or without
//! recovery, fed any server messages, reconnects and exchanges with real OSTs.
fn main() {
    afl::fuzz!(|data: &[u8]| lanefs_fuzz::client::run(data));
}
