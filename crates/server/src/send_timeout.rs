//! A connection that fails its writes once the peer has accepted nothing for
//! `server.send_timeout` while the server had bytes for it.
//!
//! A client that stops reading (a live event stream in a tab that froze, a program stopped in a
//! debugger) would otherwise keep its connection, its file descriptor and its place under
//! `limits.streams` forever: its kernel keeps acknowledging with a zero window, so TCP never
//! gives up. What the server holds for it meanwhile is bounded (hyper's write buffer, then the
//! kernel's socket buffer; the stream is not read from the log while neither has room), so the
//! cut-off is about the places it keeps, not memory. A stream cut off this way resumes with
//! `Last-Event-ID` like any other.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

pub struct SendTimeout<T> {
    inner: T,
    limit: Duration,
    /// Running while a write waits for room; reset by any progress.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<T> SendTimeout<T> {
    pub fn new(inner: T, limit: Duration) -> Self {
        SendTimeout {
            inner,
            limit,
            stalled: None,
        }
    }

    /// Called when a write could not proceed: fails it once the stall has lasted too long.
    fn stall(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        let limit = self.limit;
        let sleep = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(Instant::now() + limit)));
        ready!(sleep.as_mut().poll(cx));
        self.stalled = None;
        Poll::Ready(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "the client accepted nothing for {} (server.send_timeout)",
                humantime::format_duration(limit)
            ),
        ))
    }

    fn watch<R>(&mut self, cx: &mut Context<'_>, r: Poll<io::Result<R>>) -> Poll<io::Result<R>> {
        match r {
            Poll::Pending => self.stall(cx).map(Err),
            ready => {
                self.stalled = None;
                ready
            }
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for SendTimeout<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for SendTimeout<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.watch(cx, r)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.watch(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_flush(cx);
        self.watch(cx, r)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.watch(cx, r)
    }
}
