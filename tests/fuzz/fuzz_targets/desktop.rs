//! What a model controls in a desktop step, as text: key chords, refs, window ids and frame
//! coordinates. Any input gives an answer or a clean error, never a panic; a chord that parses
//! has at most six keys, modifiers first; a frame coordinate that maps lands on the screen area
//! the frame shows.
#![no_main]

use desktop::frames::Frames;
use desktop::model::{Rect, parse_window_handle};
use desktop::refs::Refs;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(keys) = desktop::keys::parse_chord(&text) {
        assert!(!keys.is_empty() && keys.len() <= 6, "{text:?}: {keys:?}");
    }
    let _ = parse_window_handle(&text);
    let mut refs = Refs::default();
    let _ = refs.get(&text);
    refs.replace(1, Vec::new());
    let _ = refs.get(&text);

    // Two numbers and a frame shape from the bytes.
    let n = |i: usize| {
        let b: [u8; 4] = std::array::from_fn(|k| data.get(i + k).copied().unwrap_or(0));
        i32::from_le_bytes(b)
    };
    let area = Rect {
        x: n(0) % 10_000,
        y: n(4) % 10_000,
        w: (n(8).unsigned_abs() % 8000) + 1,
        h: (n(12).unsigned_abs() % 8000) + 1,
    };
    let size = ((n(16).unsigned_abs() % 4000) + 1, (n(20).unsigned_abs() % 4000) + 1);
    let mut frames = Frames::default();
    let id = frames.add(area, size, None, Vec::new());
    if let Ok(frame) = frames.get(&id) {
        if let Ok((x, y)) = frame.to_screen(i64::from(n(24)), i64::from(n(28))) {
            assert!(area.contains(x, y), "({x}, {y}) outside {area:?}");
        }
    }
});
