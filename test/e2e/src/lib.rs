//! Shared pieces of genplane's end-to-end tests.

#![warn(missing_docs)]

/// The value the crash-test writer stores under `key`: derived from the key, so that a reader
/// can check any key it finds without knowing what was acknowledged. About 1 KiB, the size of a
/// small Kubernetes object.
pub fn crash_value(key: &str) -> Vec<u8> {
    let mut value = format!("{{\"key\":\"{key}\",\"padding\":\"").into_bytes();
    let mut state = key.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    while value.len() < 1000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        value.push(b'a' + (state % 26) as u8);
    }
    value.extend_from_slice(b"\"}");
    value
}
