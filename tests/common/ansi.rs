//! A terminal screen (text with SGR escape sequences, as `tmux capture-pane -e` gives it) as an
//! HTML page, for headless Chromium to render into a screenshot: colours (16, 256 and true
//! colour), bold, dim, italic, underline and reverse.
#![allow(dead_code)]

/// The 16 colours of a dark terminal theme, then the xterm 6x6x6 cube and grey ramp.
fn palette(n: u8) -> String {
    const BASE: [&str; 16] = [
        "#1e1e1e", "#cd3131", "#0dbc79", "#e5e510", "#2472c8", "#bc3fbc", "#11a8cd", "#e5e5e5", "#666666", "#f14c4c",
        "#23d18b", "#f5f543", "#3b8eea", "#d670d6", "#29b8db", "#ffffff",
    ];
    match n {
        0..=15 => BASE[n as usize].to_string(),
        16..=231 => {
            let n = n - 16;
            let level = |v: u8| if v == 0 { 0 } else { 55 + v * 40 };
            format!("#{:02x}{:02x}{:02x}", level(n / 36), level((n / 6) % 6), level(n % 6))
        }
        _ => {
            let g = 8 + (n - 232) * 10;
            format!("#{g:02x}{g:02x}{g:02x}")
        }
    }
}

#[derive(Clone, Default, PartialEq)]
struct Style {
    fg: Option<String>,
    bg: Option<String>,
    bold: bool,
    dim: bool,
    italic: bool,
    underline: bool,
    reverse: bool,
}

impl Style {
    fn css(&self) -> String {
        let (mut fg, mut bg) = (self.fg.clone(), self.bg.clone());
        if self.reverse {
            (fg, bg) = (Some(bg.unwrap_or_else(|| "#1e1e1e".into())), Some(fg.unwrap_or_else(|| "#d4d4d4".into())));
        }
        let mut css = String::new();
        if let Some(c) = fg {
            css.push_str(&format!("color:{c};"));
        }
        if let Some(c) = bg {
            css.push_str(&format!("background:{c};"));
        }
        if self.bold {
            css.push_str("font-weight:bold;");
        }
        if self.dim {
            css.push_str("opacity:0.6;");
        }
        if self.italic {
            css.push_str("font-style:italic;");
        }
        if self.underline {
            css.push_str("text-decoration:underline;");
        }
        css
    }

    /// Applies one SGR sequence's parameters.
    fn apply(&mut self, params: &[u32]) {
        let mut i = 0;
        let params = if params.is_empty() { &[0][..] } else { params };
        while i < params.len() {
            match params[i] {
                0 => *self = Style::default(),
                1 => self.bold = true,
                2 => self.dim = true,
                3 => self.italic = true,
                4 => self.underline = true,
                7 => self.reverse = true,
                22 => (self.bold, self.dim) = (false, false),
                23 => self.italic = false,
                24 => self.underline = false,
                27 => self.reverse = false,
                p @ 30..=37 => self.fg = Some(palette((p - 30) as u8)),
                p @ 90..=97 => self.fg = Some(palette((p - 90 + 8) as u8)),
                p @ 40..=47 => self.bg = Some(palette((p - 40) as u8)),
                p @ 100..=107 => self.bg = Some(palette((p - 100 + 8) as u8)),
                39 => self.fg = None,
                49 => self.bg = None,
                p @ (38 | 48) => {
                    let colour = match params.get(i + 1) {
                        Some(5) => {
                            i += 2;
                            params.get(i).map(|n| palette(*n as u8))
                        }
                        Some(2) => {
                            i += 4;
                            let c = |k: usize| params.get(i + k - 3).copied().unwrap_or(0);
                            Some(format!("#{:02x}{:02x}{:02x}", c(1), c(2), c(3)))
                        }
                        _ => None,
                    };
                    if p == 38 {
                        self.fg = colour;
                    } else {
                        self.bg = colour;
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }
}

fn escape(c: char, out: &mut String) {
    match c {
        '<' => out.push_str("&lt;"),
        '>' => out.push_str("&gt;"),
        '&' => out.push_str("&amp;"),
        c => out.push(c),
    }
}

/// The screen as a `<pre>` of styled spans inside a whole page.
pub fn to_html(screen: &str, title: &str) -> String {
    let mut body = String::new();
    let mut style = Style::default();
    let mut open = false;
    let mut chars = screen.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' && chars.peek() == Some(&'[') {
            chars.next();
            let mut seq = String::new();
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    if c == 'm' {
                        let params: Vec<u32> = seq.split([';', ':']).filter_map(|p| p.parse().ok()).collect();
                        style.apply(&params);
                        if open {
                            body.push_str("</span>");
                        }
                        body.push_str(&format!("<span style=\"{}\">", style.css()));
                        open = true;
                    }
                    break;
                }
                seq.push(c);
            }
            continue;
        }
        escape(c, &mut body);
    }
    if open {
        body.push_str("</span>");
    }
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{title}</title><style>\
         body {{ margin: 0; background: #1e1e1e; }}\
         pre {{ margin: 0; padding: 12px; display: inline-block; color: #d4d4d4; background: #1e1e1e;\
         font: 13px/1.25 'DejaVu Sans Mono', monospace; }}</style></head><body><pre>{body}</pre></body></html>"
    )
}

#[test]
fn colours_and_styles_become_spans_and_text_is_escaped() {
    let html = to_html("\x1b[1;38;5;196mred <b>\x1b[0m \x1b[38;2;1;2;3;48;5;21mrgb\x1b[39;49m", "t");
    assert!(html.contains("<span style=\"color:#ff0000;font-weight:bold;\">red &lt;b&gt;</span>"), "{html}");
    assert!(html.contains("color:#010203;background:#0000ff;\">rgb"), "{html}");
}
