//! Private records: every folder awf makes for a run is created 0700 and every file it writes there
//! 0600, with that mode from the start (never loosened and tightened after), whatever the umask:
//! prompts, values, reasons and copied credentials are for the operator's eyes only.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

pub const DIR_MODE: u32 = 0o700;
pub const FILE_MODE: u32 = 0o600;

/// Creates `dir` and any missing parents, each 0700; an existing folder is left as it is.
pub fn create_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(DIR_MODE).create(dir)
}

/// Creates `dir` (and missing parents) 0700, and makes it 0700 if it already existed: a control
/// folder from an earlier attempt is closed again.
pub fn ensure_dir(dir: &Path) -> io::Result<()> {
    create_dir(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(DIR_MODE))
}

/// Opens `path` for appending, creating it 0600.
pub fn append(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).mode(FILE_MODE).open(path)
}

/// Opens `path` for writing (created 0600, or truncated).
pub fn create(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).write(true).truncate(true).mode(FILE_MODE).open(path)
}

/// Writes `bytes` to `path` (created 0600, or truncated).
pub fn write(path: &Path, bytes: impl AsRef<[u8]>) -> io::Result<()> {
    create(path)?.write_all(bytes.as_ref())
}

/// Writes `bytes` to `path` (0600) whole or not at all: through a temporary file beside it and a
/// rename, so that a reader never sees it empty or half written.
pub fn write_whole(path: &Path, bytes: impl AsRef<[u8]>) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// Copies the contents of `from` to `to` (created 0600, whatever `from`'s mode).
pub fn copy(from: &Path, to: &Path) -> io::Result<u64> {
    let mut source = File::open(from)?;
    let mut f = OpenOptions::new().create(true).write(true).truncate(true).mode(FILE_MODE).open(to)?;
    io::copy(&mut source, &mut f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).expect("stat").permissions().mode() & 0o777
    }

    #[test]
    fn folders_and_files_are_created_for_the_owner_only() {
        let tmp = tempfile::tempdir().expect("tmp");
        let dir = tmp.path().join("a/b");
        create_dir(&dir).expect("mkdir");
        assert_eq!((mode(&tmp.path().join("a")), mode(&dir)), (0o700, 0o700));
        write(&dir.join("w"), "x").expect("write");
        append(&dir.join("l")).and_then(|mut f| f.write_all(b"y")).expect("append");
        let open = dir.join("open");
        std::fs::write(&open, "z").expect("write");
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        copy(&open, &dir.join("c")).expect("copy");
        write_whole(&dir.join("t"), "old").expect("write");
        write_whole(&dir.join("t"), "new").expect("rewrite");
        assert_eq!(std::fs::read_to_string(dir.join("t")).expect("read"), "new");
        assert!(!dir.join("t.tmp").exists(), "no temporary file is left");
        for f in ["w", "l", "c", "t"] {
            assert_eq!(mode(&dir.join(f)), 0o600, "{f}");
        }
    }
}
