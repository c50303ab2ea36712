//! Server-sent events: splitting a byte stream into `(event, data)` pairs.

/// Accumulates bytes and yields complete events.
#[derive(Default)]
pub struct SseParser {
    buf: Vec<u8>,
}

/// One event: its `event:` name (if any) and its `data:` lines joined.
#[derive(Debug, PartialEq)]
pub struct SseEvent {
    pub event: Option<String>,
    pub data: String,
}

impl SseParser {
    /// Adds bytes; returns the events completed by them.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        loop {
            let text = &self.buf;
            let end = find_blank_line(text);
            let Some((at, len)) = end else { break };
            let block = String::from_utf8_lossy(&text[..at]).into_owned();
            self.buf.drain(..at + len);
            if let Some(e) = parse_block(&block) {
                out.push(e);
            }
        }
        out
    }
}

fn find_blank_line(b: &[u8]) -> Option<(usize, usize)> {
    (0..b.len()).find_map(|i| {
        if b[i..].starts_with(b"\r\n\r\n") {
            Some((i, 4))
        } else if b[i..].starts_with(b"\n\n") {
            Some((i, 2))
        } else {
            None
        }
    })
}

fn parse_block(block: &str) -> Option<SseEvent> {
    let mut event = None;
    let mut data: Vec<&str> = Vec::new();
    for line in block.lines() {
        if let Some(v) = line.strip_prefix("event:") {
            event = Some(v.trim().to_string());
        } else if let Some(v) = line.strip_prefix("data:") {
            data.push(v.strip_prefix(' ').unwrap_or(v));
        }
    }
    (event.is_some() || !data.is_empty()).then(|| SseEvent { event, data: data.join("\n") })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks() {
        let mut p = SseParser::default();
        assert!(p.push(b"event: message_start\ndata: {\"a\"").is_empty());
        let got = p.push(b":1}\n\ndata: [DONE]\r\n\r\n");
        assert_eq!(
            got,
            vec![
                SseEvent { event: Some("message_start".into()), data: "{\"a\":1}".into() },
                SseEvent { event: None, data: "[DONE]".into() },
            ]
        );
    }
}
