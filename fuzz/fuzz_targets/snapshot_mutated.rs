#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(init: checks::quiet_caught_panics(), |data: &[u8]| checks::snapshot_mutated(data));
