//! Integration tests of `driftreactor serve`: real server on 127.0.0.1, real SQLite
//! journal, push endpoints driven over HTTP, a real in-process pull adapter, and the
//! service killed with SIGKILL mid-stream.

mod after_commit;
mod api;
mod azure_push;
mod common;
mod delivery;
mod gcp_push;
mod kill9;
mod mcp;
mod reload;
mod retention;
mod stream;
