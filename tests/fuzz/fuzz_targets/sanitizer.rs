//! The terminal output sanitizer: any bytes, cut anywhere, come out as text without escape
//! sequences or control characters (tabs and newlines kept), and cutting does not change it.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let cut = data.first().map_or(0, |b| usize::from(*b) % (data.len() + 1));
    let mut whole = String::new();
    let mut s = terminal::sanitize::Sanitizer::new();
    s.push(data, &mut whole);
    s.finish(&mut whole);
    let mut pieces = String::new();
    let mut s = terminal::sanitize::Sanitizer::new();
    s.push(&data[..cut], &mut pieces);
    s.push(&data[cut..], &mut pieces);
    s.finish(&mut pieces);
    assert_eq!(whole, pieces, "cut at {cut}");
    assert!(
        !whole
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t'),
        "{whole:?}"
    );
});
