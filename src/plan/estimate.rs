//! The estimate: a measured operation's tokens as a range (pure arithmetic over its sizes, the
//! harness's fixed overhead from the price table's data and the runtime's output bound), priced.

use super::session::Measured;
use crate::accounting::{harness_overhead, price_tokens, Price, Usage};

/// Bytes of text a token holds at least and at most, for the range: English prose and JSON run
/// about four bytes a token; code and dense JSON nearer three.
const BYTES_PER_TOKEN_LOW_END: u64 = 4;
const BYTES_PER_TOKEN_HIGH_END: u64 = 3;

/// Model requests one turn takes at the high end: a CLI reads the prompt, runs the launcher, sees
/// its output and ends (more with a rejection); an HTTP agent calls `wf_result` and may be asked
/// again after a rejection. The low end is one request.
fn requests_at_most(harness: &str) -> u64 {
    match harness {
        "claude" | "codex" | "pi" => 4,
        "openai" | "anthropic" => 2,
        _ => 0,
    }
}

/// The most output one turn is given when the runtime sets no `max_tokens`: the HTTP harnesses'
/// own default, and a CLI turn's usual ceiling.
fn default_output_bound(harness: &str) -> u64 {
    match harness {
        "claude" | "codex" | "pi" => 8192,
        "openai" | "anthropic" => 4096,
        _ => 0,
    }
}

/// Whether an agent of this harness spends model tokens at all (`fake` is simulated; `command`
/// is a program that reports its own spend, which cannot be known beforehand).
pub fn spends(harness: &str) -> bool {
    requests_at_most(harness) > 0
}

fn tokens(bytes: u64, per: u64) -> u64 {
    bytes.div_ceil(per)
}

/// The usage of one measured operation at the low and the high end.
pub fn range(m: &Measured) -> (Usage, Usage) {
    let h = m.seat.harness.as_str();
    if !spends(h) {
        return (Usage::default(), Usage::default());
    }
    let (over_lo, over_hi) = harness_overhead(h);
    let sent = m.shown_bytes + m.history_bytes;
    // The overhead is the same prefix for every session of a harness: at the low end it is read
    // from the provider's prompt cache, as the CLIs' requests are.
    let low = Usage {
        input_tokens: tokens(sent, BYTES_PER_TOKEN_LOW_END),
        cache_read_tokens: if m.fresh { over_lo } else { 0 },
        output_tokens: tokens(m.answer_bytes, BYTES_PER_TOKEN_LOW_END),
        ..Usage::default()
    };
    let bound = m.seat.max_tokens.unwrap_or_else(|| default_output_bound(h));
    let high = Usage {
        input_tokens: requests_at_most(h) * (over_hi + tokens(sent, BYTES_PER_TOKEN_HIGH_END)),
        output_tokens: bound.max(tokens(m.answer_bytes, BYTES_PER_TOKEN_HIGH_END)),
        ..Usage::default()
    };
    (low, high)
}

/// USD of a range of usage; `None` when the model has no price.
pub fn priced(price: Option<Price>, (low, high): &(Usage, Usage)) -> Option<(f64, f64)> {
    Some((price_tokens(price, low)?, price_tokens(price, high)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::session::Seat;

    fn measured(harness: &str, fresh: bool, max_tokens: Option<u64>) -> Measured {
        Measured {
            seat: Seat { agent: "a".into(), harness: harness.into(), model: "m".into(), max_tokens },
            fresh,
            shown_bytes: 1200,
            history_bytes: 0,
            answer_bytes: 40,
        }
    }

    #[test]
    fn an_http_turn_is_its_text_plus_the_tools_and_at_most_max_tokens_out() {
        let (low, high) = range(&measured("openai", true, Some(500)));
        let (over_lo, over_hi) = harness_overhead("openai");
        let cached = Usage { input_tokens: 300, cache_read_tokens: over_lo, output_tokens: 10, ..Usage::default() };
        assert_eq!(low, cached);
        assert_eq!(high, Usage { input_tokens: 2 * (over_hi + 400), output_tokens: 500, ..Usage::default() });
    }

    #[test]
    fn a_later_turn_has_no_fresh_overhead_at_the_low_end() {
        let (low, _) = range(&measured("claude", false, None));
        assert_eq!((low.input_tokens, low.cache_read_tokens), (300, 0));
        let (_, high) = range(&measured("claude", false, None));
        assert_eq!(high.output_tokens, 8192);
    }

    #[test]
    fn fake_and_command_agents_spend_nothing_known() {
        assert_eq!(range(&measured("fake", true, None)), (Usage::default(), Usage::default()));
        assert_eq!(range(&measured("command", true, None)), (Usage::default(), Usage::default()));
    }

    #[test]
    fn an_unpriced_model_has_no_usd() {
        let r = range(&measured("openai", true, None));
        assert_eq!(priced(None, &r), None);
        let p = Price { input: 1.0, output: 2.0, ..Price::default() };
        let (lo, hi) = priced(Some(p), &r).expect("priced");
        assert!(lo < hi, "{lo} < {hi}");
    }
}
