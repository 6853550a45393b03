//! This process's standard input and output as asynchronous streams.
//!
//! Tokio's `stdin()` and `stdout()` do each read and each write on its blocking thread pool,
//! so every message crosses threads twice more than it must (a wake-up costs tens of µs on
//! a loaded or virtual machine). An MCP client starts the gateway with pipes (Python's SDK,
//! most clients) or sockets (Node's `child_process`), which the reactor can wait on: those
//! are read and written in non-blocking mode on the runtime's own threads. Anything else
//! (a terminal, a file) keeps tokio's stdio.
//!
//! Non-blocking mode belongs to the open file description, which every descriptor
//! duplicated from it shares, in this process and in any other that inherited it. An MCP
//! client's pipes are the gateway's alone (the client holds the other ends), but a terminal
//! is the shell's too, and a pipe may also be this process's standard error (`2>&1`), which
//! is written with blocking writes that must not fail with `EAGAIN`: those stay blocking.
//! The mode a stream had is put back when it is dropped, so whoever shares it afterwards
//! finds it as it was.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::UnixStream as StdUnixStream;
use std::pin::Pin;
use std::task::{Context, Poll};

use rustix::fs::OFlags;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::UnixStream;
use tokio::net::unix::pipe;

pub(super) type Input = Box<dyn AsyncRead + Send + Unpin>;
pub(super) type Output = Box<dyn AsyncWrite + Send + Unpin>;

/// Standard input: on the reactor when it is a pipe or a socket.
pub(super) fn input() -> Input {
    let Some((fd, kind)) = ours(io::stdin().as_fd()) else {
        return Box::new(tokio::io::stdin());
    };
    // `from_owned_fd` checks the access mode and sets non-blocking mode.
    let stream: Option<Input> = match kind {
        Kind::Pipe => Reactor::new(fd, pipe::Receiver::from_owned_fd).map(|s| Box::new(s) as _),
        Kind::Socket => Reactor::new(fd, socket).map(|s| Box::new(s) as _),
    };
    stream.unwrap_or_else(|| Box::new(tokio::io::stdin()))
}

/// Standard output: on the reactor when it is a pipe or a socket.
pub(super) fn output() -> Output {
    let Some((fd, kind)) = ours(io::stdout().as_fd()) else {
        return Box::new(tokio::io::stdout());
    };
    let stream: Option<Output> = match kind {
        Kind::Pipe => Reactor::new(fd, pipe::Sender::from_owned_fd).map(|s| Box::new(s) as _),
        Kind::Socket => Reactor::new(fd, socket).map(|s| Box::new(s) as _),
    };
    stream.unwrap_or_else(|| Box::new(tokio::io::stdout()))
}

enum Kind {
    Pipe,
    Socket,
}

/// A copy of `fd` when it is a pipe or a Unix socket that is not also standard error.
fn ours(fd: BorrowedFd<'_>) -> Option<(OwnedFd, Kind)> {
    let file = File::from(fd.try_clone_to_owned().ok()?);
    let meta = file.metadata().ok()?;
    if same_file(&meta, io::stderr().as_fd()) {
        return None;
    }
    let kind = meta.file_type();
    let kind = if kind.is_fifo() {
        Kind::Pipe
    } else if kind.is_socket() {
        Kind::Socket
    } else {
        return None;
    };
    Some((OwnedFd::from(file), kind))
}

/// A Unix socket in non-blocking mode (an inet socket, whose address is of another family,
/// is not taken).
fn socket(fd: OwnedFd) -> io::Result<UnixStream> {
    let socket = StdUnixStream::from(fd);
    socket.local_addr()?;
    socket.set_nonblocking(true)?;
    UnixStream::from_std(socket)
}

/// Whether `meta` is the file (pipe, socket…) of `other`; when unknown, as if it were, so
/// that the stream stays as it is.
fn same_file(meta: &std::fs::Metadata, other: BorrowedFd<'_>) -> bool {
    let Ok(other) = other.try_clone_to_owned() else {
        return false; // no standard error
    };
    match File::from(other).metadata() {
        Ok(o) => o.dev() == meta.dev() && o.ino() == meta.ino(),
        Err(_) => true,
    }
}

/// A standard stream on the reactor, put back in blocking mode when dropped if it was so.
struct Reactor<S: AsFd> {
    inner: S,
    was_blocking: bool,
}

impl<S: AsFd> Reactor<S> {
    /// `fd` made into `S` by `make`, which sets non-blocking mode.
    fn new(fd: OwnedFd, make: impl FnOnce(OwnedFd) -> io::Result<S>) -> Option<Reactor<S>> {
        let was_blocking = !rustix::fs::fcntl_getfl(&fd)
            .ok()?
            .contains(OFlags::NONBLOCK);
        Some(Reactor {
            inner: make(fd).ok()?,
            was_blocking,
        })
    }
}

impl<S: AsFd> Drop for Reactor<S> {
    fn drop(&mut self) {
        if self.was_blocking {
            let _ = rustix::io::ioctl_fionbio(self.inner.as_fd(), false);
        }
    }
}

impl<S: AsFd + AsyncRead + Unpin> AsyncRead for Reactor<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsFd + AsyncWrite + Unpin> AsyncWrite for Reactor<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    /// Only flushes: a socket's shutdown would end it for every copy of the descriptor,
    /// this process's standard output among them.
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
}
