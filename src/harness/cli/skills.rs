//! Skills given to a CLI agent (agent spec `skills`): each folder checked (it holds `SKILL.md`),
//! copied into the agent's home where its CLI looks for skills (Claude Code:
//! `$CLAUDE_CONFIG_DIR/skills/<name>`; pi: `$PI_CODING_AGENT_DIR/skills/<name>`, named to pi with
//! `--no-skills --skill <dir>` so that it loads no others), and recorded in
//! `agents/<slug>/skills.json` (name, source, sha256 of its files).

use crate::config::HarnessKind;
use serde_json::json;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// One skill folder, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    /// The folder's name: the skill's folder in the agent's home.
    pub name: String,
    pub source: PathBuf,
}

/// Why an agent's skills cannot be given to it.
#[derive(Debug, thiserror::Error)]
pub enum SkillError {
    #[error("harness `{0}` cannot be given skills (skills work with the claude and pi harnesses, which load them from their home)")]
    Unsupported(HarnessKind),
    #[error("skill folder {} does not exist", .0.display())]
    Missing(PathBuf),
    #[error("skill {} is not a folder (a skill is a folder holding SKILL.md)", .0.display())]
    NotAFolder(PathBuf),
    #[error("skill folder {} has no SKILL.md", .0.display())]
    NoSkillMd(PathBuf),
    #[error("skill folder {} has no usable name", .0.display())]
    NoName(PathBuf),
    #[error("skills {} and {} have the same folder name `{name}`", first.display(), second.display())]
    SameName { name: String, first: PathBuf, second: PathBuf },
    /// Copying a skill into the agent's home, or recording it, failed: what, and the I/O error.
    #[error("{doing}: {source}")]
    Io { doing: String, source: std::io::Error },
}

/// Whether a harness can be given skills, or why not.
pub fn supported(harness: HarnessKind) -> Result<(), SkillError> {
    match harness {
        HarnessKind::Claude | HarnessKind::Pi => Ok(()),
        other => Err(SkillError::Unsupported(other)),
    }
}

/// Checks the skill folders (absolute paths): each exists, is a folder and holds `SKILL.md`; no
/// two share a name.
pub fn check(paths: &[PathBuf]) -> Result<Vec<Skill>, SkillError> {
    let mut out: Vec<Skill> = Vec::new();
    for p in paths {
        if !p.exists() {
            return Err(SkillError::Missing(p.clone()));
        }
        if !p.is_dir() {
            return Err(SkillError::NotAFolder(p.clone()));
        }
        if !p.join("SKILL.md").is_file() {
            return Err(SkillError::NoSkillMd(p.clone()));
        }
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if name.is_empty() || name.starts_with('.') {
            return Err(SkillError::NoName(p.clone()));
        }
        if let Some(other) = out.iter().find(|s| s.name == name) {
            return Err(SkillError::SameName { name, first: other.source.clone(), second: p.clone() });
        }
        out.push(Skill { name, source: p.clone() });
    }
    Ok(out)
}

/// Copies each skill into `<home>/skills/<name>` and writes `<agent_dir>/skills.json`; returns
/// the copies' folders.
pub fn install(skills: &[Skill], home: &Path, agent_dir: &Path) -> Result<Vec<PathBuf>, SkillError> {
    let io = |doing: String| move |source| SkillError::Io { doing, source };
    let mut dirs = Vec::new();
    let mut record = Vec::new();
    for s in skills {
        let to = home.join("skills").join(&s.name);
        super::copy_tree(&s.source, &to, &|_| true).map_err(io(format!(
            "cannot copy skill {} into {}",
            s.source.display(),
            to.display()
        )))?;
        let sha256 = hash(&s.source).map_err(io(format!("cannot read skill {}", s.source.display())))?;
        record.push(json!({ "name": s.name, "source": s.source.display().to_string(), "sha256": sha256 }));
        dirs.push(to);
    }
    let text = serde_json::to_string_pretty(&record).unwrap_or_default();
    let file = agent_dir.join("skills.json");
    crate::record::private::write(&file, &text).map_err(io(format!("cannot write {}", file.display())))?;
    Ok(dirs)
}

/// The sha256 of a folder's files: each relative path and content, in path order.
fn hash(dir: &Path) -> std::io::Result<String> {
    let mut files = Vec::new();
    collect(dir, dir, &mut files)?;
    files.sort();
    let mut h = Sha256::new();
    for rel in files {
        h.update(rel.as_bytes());
        h.update([0]);
        h.update(std::fs::read(dir.join(&rel))?);
        h.update([0]);
    }
    Ok(format!("{:x}", h.finalize()))
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<String>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let ty = entry.file_type()?;
        if ty.is_dir() {
            collect(root, &entry.path(), out)?;
        } else if ty.is_file() {
            let rel = entry.path().strip_prefix(root).map(|p| p.display().to_string()).unwrap_or_default();
            out.push(rel);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_without_skill_md_and_clashing_names_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let good = dir.path().join("a/lint");
        std::fs::create_dir_all(&good).expect("mkdir");
        std::fs::write(good.join("SKILL.md"), "---\nname: lint\n---\n").expect("write");
        let empty = dir.path().join("empty");
        std::fs::create_dir_all(&empty).expect("mkdir");
        assert_eq!(check(std::slice::from_ref(&good)).expect("good").len(), 1);
        let e = check(&[dir.path().join("nope")]).expect_err("missing");
        assert!(matches!(e, SkillError::Missing(_)), "{e}");
        let e = check(&[empty]).expect_err("no SKILL.md");
        assert!(matches!(e, SkillError::NoSkillMd(_)), "{e}");
        let e = check(&[good.join("SKILL.md")]).expect_err("a file");
        assert!(e.to_string().contains("is not a folder"), "{e}");
        let twin = dir.path().join("b/lint");
        std::fs::create_dir_all(&twin).expect("mkdir");
        std::fs::write(twin.join("SKILL.md"), "x").expect("write");
        let e = check(&[good.clone(), twin]).expect_err("same name");
        assert!(e.to_string().contains("same folder name `lint`"), "{e}");
        assert!(matches!(supported(HarnessKind::Codex), Err(SkillError::Unsupported(HarnessKind::Codex))));

        let home = dir.path().join("home");
        let skills = check(&[good]).expect("good");
        let dirs = install(&skills, &home, dir.path()).expect("install");
        assert!(dirs[0].join("SKILL.md").is_file());
        let record: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("skills.json")).expect("record"))
                .expect("json");
        assert_eq!(record[0]["name"], "lint");
        assert_eq!(record[0]["sha256"].as_str().map(str::len), Some(64));
    }
}
