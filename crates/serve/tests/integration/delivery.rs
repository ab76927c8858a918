//! Acknowledge only after commit, through a real in-process pull adapter: a spool
//! directory of message files (a file is the bus message; deleting it is the ack).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use driftreactor_event::Provider;
use driftreactor_serve::SourceRegistry;
use driftreactor_source::{
    Ack, Delivery, MessageSender, PayloadFormat, ShutdownSignal, Source, SourceError, SourceMessage,
};

use crate::common::*;

/// What the adapter saw when a message's acknowledgement resolved.
#[derive(Debug, Clone)]
struct AckSeen {
    file: String,
    delivery: Delivery,
    /// Every event id of the message was in the journal (separate connection) at the
    /// moment the acknowledgement resolved.
    committed: bool,
}

/// Sends each `*.json` file of `dir` as an Event Grid message; after the pipeline
/// answers: deletes it (ack), moves it to `dead/` (rejected), or keeps it (failed,
/// redelivered on the next pass). Follows the `Source` contract.
struct SpoolSource {
    dir: PathBuf,
    journal: PathBuf,
    seen: Arc<Mutex<Vec<AckSeen>>>,
}

fn ids_of(payload: &[u8]) -> Vec<String> {
    serde_json::from_slice::<Vec<serde_json::Value>>(payload)
        .map(|v| {
            v.iter()
                .filter_map(|e| e["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn spool_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
}

impl Source for SpoolSource {
    fn name(&self) -> &'static str {
        "test_spool"
    }

    fn run(
        self: Box<Self>,
        out: MessageSender,
        shutdown: ShutdownSignal,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), SourceError>> + Send>> {
        Box::pin(async move {
            std::fs::create_dir_all(self.dir.join("dead")).unwrap();
            loop {
                let mut waits = Vec::new();
                for file in spool_files(&self.dir) {
                    let payload = std::fs::read(&file).unwrap();
                    let (ack, wait) = Ack::pair();
                    let msg = SourceMessage {
                        provider: Provider::Azure,
                        format: PayloadFormat::AzureEvent,
                        message_id: file.file_name().unwrap().to_string_lossy().into_owned(),
                        payload: payload.clone(),
                        attributes: Default::default(),
                        received_at: SystemTime::now(),
                        ack,
                    };
                    if out.send(msg).await.is_err() {
                        return Err(SourceError::ChannelClosed);
                    }
                    waits.push((file, payload, wait));
                }
                for (file, payload, wait) in waits {
                    let delivery = wait.wait().await;
                    let ids = ids_of(&payload);
                    let committed = !ids.is_empty()
                        && ids.iter().all(|id| journal_has(&self.journal, "azure", id));
                    if delivery.should_ack() {
                        std::fs::remove_file(&file).unwrap();
                    } else if let Delivery::Rejected(_) = delivery {
                        std::fs::rename(
                            &file,
                            self.dir.join("dead").join(file.file_name().unwrap()),
                        )
                        .unwrap();
                    }
                    self.seen.lock().unwrap().push(AckSeen {
                        file: file.file_name().unwrap().to_string_lossy().into_owned(),
                        delivery,
                        committed,
                    });
                }
                tokio::select! {
                    () = shutdown.cancelled() => return Ok(()),
                    () = tokio::time::sleep(Duration::from_millis(50)) => {}
                }
            }
        })
    }
}

#[tokio::test]
async fn a_pull_message_is_acknowledged_only_after_its_events_are_committed() {
    let dir = tempfile::tempdir().unwrap();
    let spool = dir.path().join("spool");
    std::fs::create_dir_all(&spool).unwrap();
    for i in 0..10 {
        std::fs::write(
            spool.join(format!("m{i:02}.json")),
            eg_batch(&format!("pull-{i}"), 2),
        )
        .unwrap();
    }
    // A redelivery of m00 under another message name, and a poison message.
    std::fs::write(spool.join("m50-redelivery.json"), eg_batch("pull-0", 2)).unwrap();
    std::fs::write(spool.join("m60-poison.json"), b"{ not json").unwrap();

    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut registry = SourceRegistry::new();
    let (seen2, journal) = (seen.clone(), dir.path().join("journal.sqlite"));
    registry.register("test_spool", move |table: toml::Table| {
        let seen = seen2.clone();
        let journal = journal.clone();
        async move {
            let dir = PathBuf::from(table["dir"].as_str().ok_or("dir is missing")?);
            Ok(Box::new(SpoolSource { dir, journal, seen }) as Box<dyn Source>)
        }
    });
    let h = Harness::start_with(
        &format!(
            "[[sources]]\ntype = \"test_spool\"\nname = \"spool\"\ndir = \"{}\"\n",
            spool.display()
        ),
        registry,
        Some(dir),
    )
    .await;

    assert!(
        eventually(20, || seen.lock().unwrap().len() >= 12).await,
        "every message answered"
    );
    let seen = seen.lock().unwrap().clone();
    for s in &seen {
        match &s.delivery {
            Delivery::Recorded | Delivery::Duplicate => {
                assert!(
                    s.committed,
                    "{} was acknowledged before its events were committed",
                    s.file
                );
            }
            Delivery::Rejected(reason) => assert_eq!(s.file, "m60-poison.json", "{reason}"),
            Delivery::Failed(reason) => panic!("{}: {reason}", s.file),
        }
    }
    let redelivery = seen
        .iter()
        .find(|s| s.file == "m50-redelivery.json")
        .unwrap();
    assert_eq!(redelivery.delivery, Delivery::Duplicate);
    assert!(
        spool_files(&spool).is_empty(),
        "acknowledged files are deleted"
    );
    assert!(
        spool.join("dead/m60-poison.json").exists(),
        "the poison message is left for the DLQ"
    );
    assert_eq!(h.journal_rows(), 20, "each event exactly once");

    let (status, ready) = h.get_json("/readyz").await;
    assert_eq!(status, 200, "{ready}");
    let sources = ready["sources"].as_array().unwrap();
    assert!(
        sources
            .iter()
            .any(|s| s["name"] == "spool" && s["status"] == "running"),
        "{ready}"
    );
    h.stop().await;
}
