//! The `codec` target: any bytes to the frame decoder, as one frame body
//! (`codec::decode`) and as a stream of frames (`codec::read_frame`).
//! Every message decoded must encode and decode to itself.

use lanefs_proto::codec::{decode, encode, read_frame};
use lanefs_proto::wire::Wire;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RUNTIME.get_or_init(|| tokio::runtime::Builder::new_current_thread().build().expect("a runtime"))
}

fn round_trip(message: Wire) {
    let mut frame = Vec::new();
    encode(message.clone(), &mut frame).expect("a decoded message encodes");
    let again = decode(frame[4..].to_vec()).expect("an encoded message decodes");
    assert_eq!(again, message, "decode(encode(m)) != m");
}

/// The frame decoder on `data` as one frame body and as a stream.
pub fn run(data: &[u8]) {
    if let Ok(message) = decode(data.to_vec()) {
        round_trip(message);
    }
    runtime().block_on(async {
        let mut stream = data;
        while let Ok(Some(message)) = read_frame(&mut stream).await {
            round_trip(message);
        }
    });
}
