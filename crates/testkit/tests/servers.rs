//! The local-server helpers start real servers on 127.0.0.1 and stop them on drop.

use std::collections::BTreeMap;
use std::net::TcpStream;

use driftreactor_testkit::moto::MotoServer;
use driftreactor_testkit::pubsub::PubsubEmulator;

#[tokio::test]
async fn moto_starts_answers_and_stops() {
    let Some(moto) = MotoServer::start_or_skip() else {
        return;
    };
    let port = moto.port();
    moto.reset().await.unwrap();
    drop(moto);
    // Dropping kills the process group and reaps its leader: the port is closed now.
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "moto still listening after drop"
    );
}

#[tokio::test]
async fn pubsub_emulator_starts_publishes_pulls_and_stops() {
    let Some(emulator) = PubsubEmulator::start_or_skip() else {
        return;
    };
    emulator.create_topic("testkit-p", "topic-a").await.unwrap();
    emulator
        .create_subscription("testkit-p", "sub-a", "topic-a", 10, None)
        .await
        .unwrap();
    let attrs = BTreeMap::from([("k".to_owned(), "v".to_owned())]);
    emulator
        .publish("testkit-p", "topic-a", b"hello", &attrs)
        .await
        .unwrap();
    let got = emulator.pull_now("testkit-p", "sub-a", 10).await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["text"], "hello");
    assert_eq!(got[0]["message"]["attributes"]["k"], "v");
    let port: u16 = emulator
        .endpoint()
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    drop(emulator);
    // Dropping kills the process group and reaps its leader: the port is closed now.
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "emulator still listening after drop"
    );
}
