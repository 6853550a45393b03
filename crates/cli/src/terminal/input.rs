//! Lines typed at the terminal (or piped in), read on a thread of their own.
//!
//! A line is read only when one is asked for: while an editor runs on the same terminal, no
//! read is pending that could take its keystrokes. A request that is abandoned (the hold was
//! decided elsewhere) stays pending, and its line goes to the next prompt.

use std::io::BufRead;
use std::sync::mpsc;

use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

pub struct Input {
    ask: mpsc::Sender<()>,
    lines: UnboundedReceiver<Option<String>>,
    pending: bool,
}

impl Input {
    pub fn stdin() -> Input {
        let (ask, asked) = mpsc::channel::<()>();
        let (send, lines) = unbounded_channel();
        std::thread::spawn(move || {
            let stdin = std::io::stdin();
            while asked.recv().is_ok() {
                let mut line = String::new();
                let read = match stdin.lock().read_line(&mut line) {
                    Ok(0) | Err(_) => None,
                    Ok(_) => Some(line.trim_end_matches(['\n', '\r']).to_owned()),
                };
                if send.send(read).is_err() {
                    return;
                }
            }
        });
        Input {
            ask,
            lines,
            pending: false,
        }
    }

    /// The next line, without its line ending; `None` at the end of the input.
    /// Cancel-safe.
    pub async fn line(&mut self) -> Option<String> {
        if !self.pending {
            if self.ask.send(()).is_err() {
                return None;
            }
            self.pending = true;
        }
        let line = self.lines.recv().await.flatten();
        self.pending = false;
        line
    }
}
