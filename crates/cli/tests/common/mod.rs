//! Helpers shared by the binary's integration tests (each test file includes this
//! module with `mod common;`; not every file uses every helper).
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{ChildStdout, Command};

use driftreactor_testkit::aws_e2e::REGION;

/// The line `driftreactor serve` prints on stdout once bound, before the address.
pub const LISTENING: &str = "driftreactor serve: listening on ";

/// `driftreactor` with static AWS credentials for moto (region
/// [`REGION`]); nothing read from profiles or instance metadata.
pub fn driftreactor_for_moto() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_driftreactor"));
    c.env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", REGION)
        .env("AWS_CONFIG_FILE", "/nonexistent/driftreactor-test")
        .env(
            "AWS_SHARED_CREDENTIALS_FILE",
            "/nonexistent/driftreactor-test",
        )
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_SESSION_TOKEN");
    c
}

/// Reads a `driftreactor serve` child's stdout up to its [`LISTENING`] line and returns
/// the address; the rest of stdout is drained on a thread so the child never blocks.
/// `None` when stdout ended first (the server exited before listening).
pub fn listening_addr(stdout: ChildStdout) -> Option<String> {
    let mut lines = BufReader::new(stdout).lines();
    let addr = loop {
        let line = lines.next()?.ok()?;
        if let Some(a) = line.strip_prefix(LISTENING) {
            break a.trim().to_owned();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    Some(addr)
}
