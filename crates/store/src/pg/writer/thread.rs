//! The writer's thread, with a runtime of its own, and its loop: what is queued is committed
//! in groups (`group.rs`), until the store closes.

use tokio::sync::{mpsc, oneshot};

use super::Writer;
use crate::group;
use crate::rows::Message;

impl Writer {
    /// Runs the writer on a thread of its own, with its connection, until the store
    /// closes; the receiver answers when it has stopped.
    ///
    /// On the server's runtime, the writer's task waited behind the request handlers each
    /// time PostgreSQL answered it (a group then took about 700 µs, of which PostgreSQL's
    /// work and the WAL flush are about 250): every write of the process waits for the
    /// writer, so its latency is everyone's.
    pub(in crate::pg) fn spawn(
        mut self,
        rx: mpsc::UnboundedReceiver<Message>,
    ) -> std::io::Result<oneshot::Receiver<()>> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (done, stopped) = oneshot::channel();
        std::thread::Builder::new()
            .name("holdpoint-pg-writer".into())
            .spawn(move || {
                runtime.block_on(async move {
                    // Connected ahead of the first group; should it fail, that group
                    // tries again and says why.
                    let _ = self.client().await;
                    self.serve(rx).await;
                });
                let _ = done.send(());
            })?;
        Ok(stopped)
    }

    /// Applies transactions until the store closes.
    async fn serve(mut self, mut rx: mpsc::UnboundedReceiver<Message>) {
        while let Some(first) = rx.recv().await {
            let Some(group) = group::gather(first, &mut rx) else {
                break;
            };
            self.commit_group(group.jobs).await;
            if group.closing {
                break;
            }
        }
    }
}
