#![no_main]
//! Fuzz target: see `baton_server::fuzzing::envelope`.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| baton_server::fuzzing::envelope(data));
