//! The `stdlib/` folder as embedded in the binary at build time (see `build.rs`).

include!(concat!(env!("OUT_DIR"), "/stdlib.rs"));

/// The embedded text of `rel` (a path relative to stdlib/, e.g. `council/magi.rhai`).
pub fn file(rel: &str) -> Option<&'static str> {
    FILES.iter().find(|(p, _)| *p == rel).map(|(_, text)| *text)
}

/// The name under which an embedded file appears in errors and records.
pub fn source_name(rel: &str) -> String {
    format!("<embedded>/stdlib/{rel}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_strategies_are_embedded() {
        assert!(super::file("council/magi.rhai").is_some());
        assert!(super::file("council/common.rhai").is_some());
        assert!(super::file("teams.rhai").is_some());
    }
}
