//! Fuzz target: a client with operations in flight fed any server messages.
fn main() {
    afl::fuzz!(|data: &[u8]| lanefs_fuzz::client(data));
}
