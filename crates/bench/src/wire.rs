//! A lean HTTP/1.1 client for the load generator: one keep-alive connection, one request at a
//! time, written and read by the task that sends it.
//!
//! The load generator shares the machine's two cores with the server it measures, so every
//! microsecond it spends is taken from the server's figures. A general client (reqwest over
//! hyper's pool) hands each request to a connection task and back, parses the URL, builds
//! header maps; this one writes the request's bytes and parses the answer with `httparse`,
//! which is what a load generator such as `wrk` does.

use std::io::Write;
use std::net::SocketAddr;

use anyhow::{Context, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The most headers an answer may carry.
const MAX_HEADERS: usize = 32;

pub struct Connection {
    stream: TcpStream,
    /// `Host` and credential (`Authorization` or `Cookie`) lines, the same for every request.
    preamble: String,
    /// Bytes read and not yet consumed.
    read: Vec<u8>,
    write: Vec<u8>,
}

impl Connection {
    /// A connection whose requests carry a bearer token.
    pub async fn open(addr: SocketAddr, token: &str) -> anyhow::Result<Connection> {
        Self::with(addr, &format!("Authorization: Bearer {token}")).await
    }

    /// A connection whose requests carry a browser's session cookie (`name=value`).
    pub async fn session(addr: SocketAddr, cookie: &str) -> anyhow::Result<Connection> {
        Self::with(addr, &format!("Cookie: {cookie}")).await
    }

    async fn with(addr: SocketAddr, credential: &str) -> anyhow::Result<Connection> {
        let stream = TcpStream::connect(addr)
            .await
            .with_context(|| format!("could not connect to {addr}"))?;
        stream.set_nodelay(true)?;
        Ok(Connection {
            stream,
            preamble: format!("Host: {addr}\r\n{credential}\r\n"),
            read: Vec::with_capacity(4096),
            write: Vec::with_capacity(1024),
        })
    }

    /// Sends a request (with a JSON body, if any) and returns the answer's body once its
    /// status is `expect`.
    pub async fn send(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        expect: u16,
    ) -> anyhow::Result<Vec<u8>> {
        self.write.clear();
        self.write.extend_from_slice(method.as_bytes());
        self.write.push(b' ');
        self.write.extend_from_slice(path.as_bytes());
        self.write.extend_from_slice(b" HTTP/1.1\r\n");
        self.write.extend_from_slice(self.preamble.as_bytes());
        if let Some(body) = body {
            write!(
                self.write,
                "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                body.len()
            )?;
            self.write.extend_from_slice(body);
        } else {
            self.write.extend_from_slice(b"\r\n");
        }
        self.stream.write_all(&self.write).await?;
        let (status, body) = self.answer().await?;
        if status != expect {
            bail!(
                "{method} {path}: expected status {expect}, got {status}: {}",
                String::from_utf8_lossy(&body)
            );
        }
        Ok(body)
    }

    /// Reads one answer: its status and its body (sized by `Content-Length`).
    async fn answer(&mut self) -> anyhow::Result<(u16, Vec<u8>)> {
        loop {
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut response = httparse::Response::new(&mut headers);
            if let httparse::Status::Complete(head) = response.parse(&self.read)? {
                let status = response.code.context("an answer without a status")?;
                let mut length = None;
                for h in response.headers.iter() {
                    if h.name.eq_ignore_ascii_case("content-length") {
                        length = Some(std::str::from_utf8(h.value)?.trim().parse::<usize>()?);
                    } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                        bail!("a chunked answer; this client reads only sized bodies");
                    }
                }
                let length = length.context("an answer without Content-Length")?;
                while self.read.len() < head + length {
                    self.fill().await?;
                }
                let body = self.read[head..head + length].to_vec();
                self.read.drain(..head + length);
                return Ok((status, body));
            }
            self.fill().await?;
        }
    }

    async fn fill(&mut self) -> anyhow::Result<()> {
        if self.stream.read_buf(&mut self.read).await? == 0 {
            bail!("the server closed the connection");
        }
        Ok(())
    }
}
