//! Argument decoding of every tool of every connector: any JSON object decodes or fails with
//! a clean INVALID_INPUT naming what is wrong, bounded in length.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(serde_json::Value::Object(arguments)) = serde_json::from_slice(data) else {
        return;
    };
    for tool in generated::TOOLS {
        if let Some(Err(e)) =
            generated::decode_arguments(tool.connector, tool.name, arguments.clone())
        {
            assert_eq!(e.code.as_str(), "INVALID_INPUT", "{}: {e}", tool.name);
            assert!(e.message.len() < 4096, "{}: unbounded message", tool.name);
        }
    }
});
