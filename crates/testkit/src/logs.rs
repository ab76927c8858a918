//! Log capture for tests that assert on what a source logs (sources log from spawned
//! tasks, so a thread-local subscriber would miss them): one global subscriber per
//! test binary, writing to a shared buffer and to stderr.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

/// Installs (once) a global subscriber (driftreactor crates at DEBUG, others at WARN) and returns the shared buffer of
/// every line logged since, from every test of the binary.
pub fn capture() -> Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_env_filter(tracing_subscriber::EnvFilter::new(
                "warn,driftreactor_aws=debug,driftreactor_gcp=debug,driftreactor_azure=debug",
            ))
            .with_writer(move || LogWriter(writer.clone()))
            .finish();
        let _ = tracing::subscriber::set_global_default(subscriber);
        buffer
    })
    .clone()
}

/// The captured text so far.
pub fn text(buffer: &Arc<Mutex<Vec<u8>>>) -> String {
    String::from_utf8_lossy(&buffer.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
}

struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        std::io::stderr().write_all(buf)?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
