//! Reads arbitrary UTF-8 as EDN. The reader must never panic, `parse` and `parse_spanned`
//! must agree, and whatever parses must print to text that reads back to an equal value and
//! prints identically again (printing is a fixed point).
//!
//! Run with `cd fuzz && cargo fuzz run edn_read` (see the crate's README for stable Rust).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let parsed = vev_edn::parse(text);
    let spanned = vev_edn::parse_spanned(text);
    assert_eq!(
        parsed,
        spanned.map(|s| s.value),
        "parse and parse_spanned disagree on {text:?}"
    );
    let _ = vev_edn::parse_all(text);
    if let Ok(value) = parsed {
        let printed = value.to_string();
        let reparsed = vev_edn::parse(&printed);
        assert_eq!(
            reparsed.as_ref(),
            Ok(&value),
            "{text:?} printed as {printed:?}"
        );
        if let Ok(reparsed) = reparsed {
            assert_eq!(
                reparsed.to_string(),
                printed,
                "printing is not a fixed point for {text:?}"
            );
        }
    }
});
