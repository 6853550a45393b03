//! The gateway's standard input and output: MCP lines relayed between the client and the SDK,
//! adapted for 2025-11-25's tasks on the way (see `wire`), and the end of the client's input
//! told at once.

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, ReadHalf, WriteHalf};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::wire::{self, Outbound};

mod streams;

/// Room for messages between the relay and the SDK.
const PIPE: usize = 256 * 1024;

/// Starts relaying this process's standard input and output; the SDK's side of the relay.
/// `ended` is canceled when the client's input ends (or fails): the SDK notices only after
/// waiting seconds for the calls in flight, and those calls are exactly the ones waiting on
/// holds that must be withdrawn now.
pub fn relay(ended: CancellationToken) -> (ReadHalf<DuplexStream>, WriteHalf<DuplexStream>) {
    let (ours, theirs) = tokio::io::duplex(PIPE);
    let (from_sdk, to_sdk) = tokio::io::split(ours);
    // The relay's own answers, to lines the SDK cannot read (see `wire::check`).
    let (answers, answered) = mpsc::channel(16);
    tokio::spawn(inbound(streams::input(), to_sdk, answers, ended));
    tokio::spawn(outbound(from_sdk, answered, streams::output()));
    tokio::io::split(theirs)
}

async fn inbound(
    input: impl tokio::io::AsyncRead + Unpin,
    mut to_sdk: WriteHalf<DuplexStream>,
    answers: mpsc::Sender<Vec<u8>>,
    ended: CancellationToken,
) {
    let mut input = BufReader::new(input);
    let mut line = Vec::new();
    loop {
        line.clear();
        match input.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let message = line.trim_ascii();
        if message.is_empty() {
            continue;
        }
        let changed = wire::inbound(message);
        let message = changed.as_deref().unwrap_or(message);
        if let Err(unreadable) = wire::check(message) {
            if !unreadable.notification && answers.send(unreadable.answer).await.is_err() {
                break;
            }
            continue;
        }
        let written = match to_sdk.write_all(message).await {
            Ok(()) => to_sdk.write_all(b"\n").await,
            Err(e) => Err(e),
        };
        if written.is_err() {
            break;
        }
    }
    ended.cancel();
    let _ = to_sdk.shutdown().await;
}

async fn outbound(
    from_sdk: ReadHalf<DuplexStream>,
    mut answered: mpsc::Receiver<Vec<u8>>,
    mut output: impl tokio::io::AsyncWrite + Unpin,
) {
    let mut from_sdk = BufReader::new(from_sdk);
    let mut adapt = Outbound::default();
    let mut line = Vec::new();
    loop {
        // A line of the SDK's is written whole: a read cut short by an answer of the relay's
        // goes on into `line` at the next turn.
        tokio::select! {
            read = from_sdk.read_until(b'\n', &mut line) => {
                if matches!(read, Ok(0) | Err(_)) {
                    break;
                }
                let written = match adapt.adapt(&line) {
                    Some(mut changed) => {
                        changed.push(b'\n');
                        output.write_all(&changed).await
                    }
                    None => output.write_all(&line).await,
                };
                line.clear();
                if written.is_err() || output.flush().await.is_err() {
                    break;
                }
            }
            Some(mut answer) = answered.recv() => {
                answer.push(b'\n');
                if output.write_all(&answer).await.is_err() || output.flush().await.is_err() {
                    break;
                }
            }
        }
    }
}
