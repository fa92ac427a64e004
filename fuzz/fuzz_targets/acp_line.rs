#![no_main]
//! Fuzz target: see `baton_server::fuzzing::acp_line`.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| baton_server::fuzzing::acp_line(data));
