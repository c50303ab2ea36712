//! A plan as the text `awf script plan` prints (the command prints it; this layer never does).

use super::{Basis, Cut, Plan};

/// `1234` as `1.2k`, `1234567` as `1.2M`.
pub fn tokens(n: u64) -> String {
    match n {
        0..=999 => n.to_string(),
        1_000..=999_999 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

fn range(r: [u64; 2]) -> String {
    format!("{}-{} tokens", tokens(r[0]), tokens(r[1]))
}

fn usd(r: [f64; 2]) -> String {
    format!("${:.4}-${:.4}", r[0], r[1])
}

fn plural(n: u64, one: &str) -> String {
    format!("{n} {one}{}", if n == 1 { "" } else { "s" })
}

/// The plan as lines of text.
pub fn text(p: &Plan) -> String {
    let mut s = format!(
        "plan of {} (planned in {} ms, on the fake harness: one path, the one its answers take)\n",
        p.script, p.plan_ms
    );
    let stages = if p.stages.is_empty() { "(none)".to_string() } else { p.stages.join(" → ") };
    s.push_str(&format!("stages: {stages}\n"));
    // Kinds are said when there is more than turns.
    let kinds = if p.operation_kinds.keys().any(|k| k != "turn") {
        let each: Vec<String> = p.operation_kinds.iter().map(|(k, n)| format!("{k} {n}")).collect();
        format!(" ({})", each.join(", "))
    } else {
        String::new()
    };
    s.push_str(&format!(
        "{}, {}{kinds}; widest step: {} at once\n",
        plural(p.agents, "agent"),
        plural(p.operations, "operation"),
        p.widest
    ));
    for (model, m) in &p.by_model {
        let mine: Vec<String> =
            p.agent_list.iter().filter(|a| &a.model == model).map(|a| format!("{} ×{}", a.key, a.operations)).collect();
        s.push_str(&format!(
            "  {} / {model}: {}, {} ({})\n",
            m.harness,
            plural(m.agents, "agent"),
            plural(m.operations, "operation"),
            mine.join(", ")
        ));
    }
    if !p.checkpoints.is_empty() {
        s.push_str(&format!("checkpoints answered with their schema's example: {}\n", p.checkpoints.join(", ")));
    }
    let basis = match p.basis {
        Basis::Estimate => "estimated from the prompts' sizes".to_string(),
        Basis::History => format!("from what {} really spent", runs(&p.history_runs)),
        Basis::Mixed => format!("estimated, and from what {} really spent", runs(&p.history_runs)),
        Basis::Nothing => "nothing here spends model tokens".to_string(),
    };
    s.push_str(&format!("estimated spend ({basis}):\n"));
    for (model, m) in &p.by_model {
        let cost = match m.usd {
            Some(u) => usd(u),
            None => "unpriced".to_string(),
        };
        let from = match m.basis {
            Basis::History => " (history)",
            Basis::Nothing => " (spends no model tokens)",
            _ => "",
        };
        s.push_str(&format!("  {model}: {}, {cost}{from}\n", range(m.tokens)));
    }
    s.push_str(&format!("  total: {}, {}", range(p.tokens), usd(p.usd)));
    if !p.unpriced.is_empty() {
        s.push_str(&format!(" (without {}: no price; add [prices] to awf.toml)", p.unpriced.join(", ")));
    }
    s.push('\n');
    match &p.cut {
        None => {}
        Some(Cut::Bound { after_ms, stage }) => s.push_str(&format!(
            "cut: still running after {after_ms} ms{} (it waits on something the fake never gives); the plan covers what ran until then\n",
            at(stage)
        )),
        Some(Cut::Failed { error, stage }) => {
            s.push_str(&format!("cut: the script failed on the fake answers{}: {error}\n", at(stage)))
        }
        Some(Cut::Stopped { reason }) => s.push_str(&format!("cut: the script stopped itself: {reason}\n")),
    }
    s
}

fn at(stage: &Option<String>) -> String {
    stage.as_ref().map(|s| format!(" in stage {s}")).unwrap_or_default()
}

fn runs(ids: &[String]) -> String {
    match ids {
        [one] => format!("run {one}"),
        _ => format!("{} earlier runs", ids.len()),
    }
}

/// The plan beside what the run spent: `planned ...; spent ...: within the plan`.
pub fn against(p: &Plan, tokens_spent: u64, usd_spent: f64) -> String {
    let verdict = if usd_spent > p.usd[1] || tokens_spent > p.tokens[1] {
        "above the plan's high end"
    } else if usd_spent < p.usd[0] || tokens_spent < p.tokens[0] {
        "below the plan's low end"
    } else {
        "within the plan"
    };
    format!(
        "planned {}, {}; spent {} tokens, ${usd_spent:.4}: {verdict}",
        range(p.tokens),
        usd(p.usd),
        tokens(tokens_spent)
    )
}
