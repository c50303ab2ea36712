//! A throwaway runs folder (`awf script plan` runs its workflow there, on the fake harness):
//! made private under the system's temporary folder, removed with everything in it when dropped.

use std::io;
use std::path::{Path, PathBuf};

/// A runs folder that lives as long as this value.
pub struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    /// Makes a new, empty, private (0700) folder.
    pub fn new() -> io::Result<Scratch> {
        let suffix = uuid::Uuid::new_v4().simple().to_string();
        // Short: the run folder inside holds a Unix socket, whose path has a length limit.
        let name = format!("awf-plan-{}-{}", std::process::id(), &suffix[..12]);
        let dir = std::env::temp_dir().join(name);
        super::private::create_dir(&dir)?;
        Ok(Scratch { dir })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // Best effort: what cannot be removed stays in the temporary folder, which the system cleans.
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_scratch_folder_is_gone_once_dropped() {
        let s = super::Scratch::new().expect("scratch");
        let dir = s.path().to_path_buf();
        std::fs::create_dir_all(dir.join("run")).expect("mkdir");
        assert!(dir.is_dir());
        drop(s);
        assert!(!dir.exists(), "{} is still there", dir.display());
    }
}
