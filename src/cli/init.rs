//! `awf init`: writes a commented `awf.toml` and an example workflow, refusing to overwrite.

use anyhow::{bail, Context, Result};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct InitArgs {
    /// Folder to initialise (default: the current folder)
    #[arg(default_value = ".")]
    dir: PathBuf,
}

const CONFIG: &str = r#"# awf configuration. With no runtime configured, agents use the `fake` harness:
# offline, free, and every answer is simulated.
default_runtime = "fake"

[runtimes.fake]
harness = "fake"
model = "fake"

[limits]
max_concurrency = 16
max_agents = 1000
nudges = 2
# budget_usd = 5.0
# budget_tokens = 2000000
# deadline = "30m"

# USD per million tokens, overriding the built-in table.
# [prices."my-model"]
# input = 1.0
# output = 4.0
"#;

const EXAMPLE: &str = r#"// A first workflow: three agents each propose a name in parallel, a fourth picks one.
export const META = #{
    name: "hello",
    description: "Ask three agents for a name, then let a judge pick one",
    args: #{ type: "object", properties: #{ topic: #{ type: "string" } } },
};

fn run(args) {
    let topic = args.topic ?? "a tool that runs agent workflows";
    let ideas = ctx.stage("ideas", #{ result: #{ type: "array" } }, || {
        ctx.parallel([1, 2, 3], |n, i| {
            let a = ctx.agents.open(#{ key: `ideas-${n}` });
            a.ask(`Propose one short name for ${topic}.`)
        }, #{ label: "ideas" })
    });
    let judge = ctx.agents.open(#{ key: "judge" });
    let pick = judge.ask(`Pick the best name among: ${ideas}`,
        #{ type: "object", properties: #{ name: #{ type: "string" }, why: #{ type: "string" } },
           required: ["name", "why"] });
    #{ ideas: ideas, pick: pick }
}
"#;

pub fn exec(args: InitArgs) -> Result<i32> {
    let config = args.dir.join("awf.toml");
    let example = args.dir.join("scripts").join("hello.rhai");
    for p in [&config, &example] {
        if p.exists() {
            bail!("{} already exists; awf init does not overwrite files", p.display());
        }
    }
    std::fs::create_dir_all(example.parent().unwrap_or(&args.dir))
        .with_context(|| format!("cannot create {}", args.dir.display()))?;
    std::fs::write(&config, CONFIG).with_context(|| format!("cannot write {}", config.display()))?;
    std::fs::write(&example, EXAMPLE).with_context(|| format!("cannot write {}", example.display()))?;
    out!("wrote {} and {}", config.display(), example.display());
    out!("run it with: awf script run {}", example.display());
    Ok(super::EXIT_OK)
}
