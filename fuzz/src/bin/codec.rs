//! Fuzz target: the frame decoder (`decode` and `read_frame`) on any bytes.
fn main() {
    afl::fuzz!(|data: &[u8]| lanefs_fuzz::codec::run(data));
}
