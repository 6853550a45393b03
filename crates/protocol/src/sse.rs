//! Reading the live event stream: a `text/event-stream` cut into frames at blank lines.

/// One server-sent event.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct SseFrame {
    /// The `id:` field: for Holdpoint's stream, the event's position in the log.
    pub id: Option<String>,
    /// The `event:` field; `message` when absent.
    pub event: String,
    /// The `data:` lines, joined with newlines.
    pub data: String,
}

/// Collects the bytes of a stream as they arrive and yields whole frames. Comments and
/// heartbeats (frames without data) are skipped.
#[derive(Default, Debug)]
pub struct SseDecoder {
    buffer: Vec<u8>,
}

impl SseDecoder {
    pub fn push(&mut self, bytes: &[u8]) {
        self.buffer.extend_from_slice(bytes);
    }

    /// The next whole frame received, if any.
    pub fn next_frame(&mut self) -> Option<SseFrame> {
        loop {
            let end = self.buffer.windows(2).position(|w| w == b"\n\n")?;
            let block: Vec<u8> = self.buffer.drain(..end + 2).collect();
            if let Some(frame) = parse(&String::from_utf8_lossy(&block)) {
                return Some(frame);
            }
        }
    }
}

fn parse(block: &str) -> Option<SseFrame> {
    let mut frame = SseFrame {
        id: None,
        event: "message".to_owned(),
        data: String::new(),
    };
    let mut has_data = false;
    for line in block.lines() {
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "id" => frame.id = Some(value.to_owned()),
            "event" => frame.event = value.to_owned(),
            "data" => {
                if has_data {
                    frame.data.push('\n');
                }
                frame.data.push_str(value);
                has_data = true;
            }
            _ => {}
        }
    }
    has_data.then_some(frame)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_cut_at_blank_lines_whatever_the_chunks() {
        let stream = b": heartbeat\n\nid: 7\nevent: hold.created\ndata: {\"a\":\ndata: 1}\n\nretry: 5\n\ndata: x\n\n";
        for size in 1..stream.len() {
            let mut d = SseDecoder::default();
            let mut frames = Vec::new();
            for chunk in stream.chunks(size) {
                d.push(chunk);
                frames.extend(std::iter::from_fn(|| d.next_frame()));
            }
            assert_eq!(
                frames,
                vec![
                    SseFrame {
                        id: Some("7".into()),
                        event: "hold.created".into(),
                        data: "{\"a\":\n1}".into()
                    },
                    SseFrame {
                        id: None,
                        event: "message".into(),
                        data: "x".into()
                    }
                ],
                "chunks of {size}"
            );
        }
    }

    #[test]
    fn a_character_split_between_chunks_survives() {
        let mut d = SseDecoder::default();
        let text = "data: é\n\n".as_bytes();
        d.push(&text[..7]);
        assert_eq!(d.next_frame(), None);
        d.push(&text[7..]);
        assert_eq!(d.next_frame().map(|f| f.data), Some("é".into()));
    }
}
