//! A size-rotated log file, as kube-apiserver's audit log rotates with lumberjack.
//!
//! - The file is opened on the first write, appending to what is there; if that write would
//!   bring it to the maximum size or beyond, it is rotated first.
//! - Before a write that would make the file larger than the maximum size, the file is
//!   renamed to a backup `<name>-<UTC time 2006-01-02T15-04-05.000><ext>` (for `audit.log`:
//!   `audit-2024-05-01T10-00-00.000.log`) and a new file is started, with the old file's
//!   permissions (0600 for a new one).
//! - After a rotation (and at opening) old backups are removed: beyond the `max_backups`
//!   newest (0 keeps all), and older than `max_age_days` by the time in their name (0 keeps
//!   all).
//! - A single write larger than the maximum size fails.
//!
//! Compression of backups (`--audit-log-compress`) is not implemented.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::event::civil;

/// Bytes in a megabyte, as the `--audit-log-maxsize` flag counts them.
pub const MEGABYTE: u64 = 1024 * 1024;
/// The maximum size when none is set (lumberjack's default): 100 MB.
pub const DEFAULT_MAX_SIZE: u64 = 100 * MEGABYTE;

/// When to rotate and what to keep.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rotation {
    /// The maximum size of the file in bytes; 0 means [`DEFAULT_MAX_SIZE`].
    pub max_size_bytes: u64,
    /// How many backups to keep; 0 keeps all.
    pub max_backups: usize,
    /// How many days to keep backups; 0 keeps them regardless of age.
    pub max_age_days: u32,
}

/// A log file that rotates itself.
#[derive(Debug)]
pub struct RotatingFile {
    path: PathBuf,
    rotation: Rotation,
    file: Option<BufWriter<File>>,
    size: u64,
    now: fn() -> SystemTime,
}

impl RotatingFile {
    /// A rotating file at `path` (opened on the first write).
    pub fn new(path: impl Into<PathBuf>, rotation: Rotation) -> Self {
        RotatingFile {
            path: path.into(),
            rotation,
            file: None,
            size: 0,
            now: SystemTime::now,
        }
    }

    /// The same, reading the time from `now` (for tests).
    #[cfg(test)]
    pub(crate) fn with_clock(mut self, now: fn() -> SystemTime) -> Self {
        self.now = now;
        self
    }

    fn max(&self) -> u64 {
        if self.rotation.max_size_bytes == 0 {
            DEFAULT_MAX_SIZE
        } else {
            self.rotation.max_size_bytes
        }
    }

    /// Writes `bytes` (one whole line), rotating first if needed. The bytes may sit in a buffer
    /// until [`flush`](Self::flush).
    pub fn write_line(&mut self, bytes: &[u8]) -> io::Result<()> {
        let len = bytes.len() as u64;
        if len > self.max() {
            return Err(io::Error::other(format!(
                "write length {len} exceeds maximum file size {}",
                self.max()
            )));
        }
        if self.file.is_none() {
            self.open_existing_or_new(len)?;
        }
        if self.size + len > self.max() {
            self.rotate()?;
        }
        let file = self
            .file
            .as_mut()
            .expect("invariant: the file is open after opening or rotating");
        file.write_all(bytes)?;
        self.size += len;
        Ok(())
    }

    /// Hands buffered bytes to the operating system.
    pub fn flush(&mut self) -> io::Result<()> {
        match &mut self.file {
            Some(file) => file.flush(),
            None => Ok(()),
        }
    }

    fn open_existing_or_new(&mut self, len: u64) -> io::Result<()> {
        self.mill();
        let size = match fs::metadata(&self.path) {
            Ok(meta) => meta.len(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return self.open_new(),
            Err(e) => return Err(e),
        };
        if size + len >= self.max() {
            return self.rotate();
        }
        match OpenOptions::new().append(true).open(&self.path) {
            Ok(file) => {
                self.file = Some(BufWriter::new(file));
                self.size = size;
                Ok(())
            }
            // Not writable as it is: start afresh, as lumberjack does.
            Err(_) => self.open_new(),
        }
    }

    fn rotate(&mut self) -> io::Result<()> {
        if let Some(mut file) = self.file.take() {
            file.flush()?;
        }
        self.open_new()?;
        self.mill();
        Ok(())
    }

    fn open_new(&mut self) -> io::Result<()> {
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir)?;
        }
        let mut options = OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        let mut mode = 0o600;
        match fs::metadata(&self.path) {
            Ok(_meta) => {
                #[cfg(unix)]
                {
                    use std::os::unix::fs::PermissionsExt;
                    mode = _meta.permissions().mode() & 0o7777;
                }
                fs::rename(&self.path, self.backup_name((self.now)()))?;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(mode);
        }
        let file = options.open(&self.path)?;
        self.file = Some(BufWriter::new(file));
        self.size = 0;
        Ok(())
    }

    /// The file name parts: `audit` and `.log` for `audit.log`.
    fn prefix_and_ext(&self) -> (String, String) {
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match name.rfind('.') {
            Some(dot) => (name[..dot].to_owned(), name[dot..].to_owned()),
            None => (name, String::new()),
        }
    }

    fn dir(&self) -> PathBuf {
        match self.path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
            _ => PathBuf::from("."),
        }
    }

    fn backup_name(&self, at: SystemTime) -> PathBuf {
        let (prefix, ext) = self.prefix_and_ext();
        self.dir()
            .join(format!("{prefix}-{}{ext}", backup_timestamp(at)))
    }

    /// The backups next to the file, newest first, with their times.
    fn backups(&self) -> Vec<(SystemTime, PathBuf)> {
        let (prefix, ext) = self.prefix_and_ext();
        let prefix = format!("{prefix}-");
        let Ok(entries) = fs::read_dir(self.dir()) else {
            return Vec::new();
        };
        let mut found: Vec<(SystemTime, PathBuf)> = entries
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let stem = name.strip_suffix(".gz").unwrap_or(&name);
                let stamp = stem.strip_prefix(&prefix)?.strip_suffix(ext.as_str())?;
                Some((parse_backup_timestamp(stamp)?, e.path()))
            })
            .collect();
        found.sort_by_key(|b| std::cmp::Reverse(b.0));
        found
    }

    /// Removes backups beyond the limits.
    fn mill(&self) {
        if self.rotation.max_backups == 0 && self.rotation.max_age_days == 0 {
            return;
        }
        let mut keep = self.backups();
        let mut remove = Vec::new();
        if self.rotation.max_backups > 0 && keep.len() > self.rotation.max_backups {
            remove.extend(keep.split_off(self.rotation.max_backups));
        }
        if self.rotation.max_age_days > 0 {
            let age = Duration::from_secs(u64::from(self.rotation.max_age_days) * 86_400);
            if let Some(cutoff) = (self.now)().checked_sub(age) {
                let (old, young): (Vec<_>, Vec<_>) =
                    keep.into_iter().partition(|(at, _)| *at < cutoff);
                remove.extend(old);
                keep = young;
            }
        }
        drop(keep);
        for (_, path) in remove {
            if let Err(e) = fs::remove_file(&path) {
                tracing::warn!(path = %path.display(), error = %e, "cannot remove an old audit log");
            }
        }
    }
}

/// `2006-01-02T15-04-05.000` in UTC.
fn backup_timestamp(at: SystemTime) -> String {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let (date, clock) = civil(i64::try_from(since.as_secs()).unwrap_or(i64::MAX));
    format!(
        "{date}T{}.{:03}",
        clock.replace(':', "-"),
        since.subsec_millis()
    )
}

fn parse_backup_timestamp(stamp: &str) -> Option<SystemTime> {
    let b = stamp.as_bytes();
    if b.len() != 23 {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<i64> {
        let part = stamp.get(from..to)?;
        if !part.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        part.parse().ok()
    };
    let seps = [
        (4, b'-'),
        (7, b'-'),
        (10, b'T'),
        (13, b'-'),
        (16, b'-'),
        (19, b'.'),
    ];
    if seps.iter().any(|(at, c)| b[*at] != *c) {
        return None;
    }
    let (year, month, day) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hour, minute, second, millis) = (num(11, 13)?, num(14, 16)?, num(17, 19)?, num(20, 23)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    // Days from civil (Howard Hinnant).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second;
    let secs = u64::try_from(secs).ok()?;
    let millis = u64::try_from(millis).ok()?;
    Some(UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_millis(millis))
}

/// Whether `path` names standard output (`-`).
pub(crate) fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;

    // Each rotation in these tests happens a second after the previous one.
    static TICK: AtomicU64 = AtomicU64::new(0);

    fn ticking_clock() -> SystemTime {
        UNIX_EPOCH
            + Duration::from_secs(1_700_000_000)
            + Duration::from_millis(1_500 * TICK.fetch_add(1, Ordering::SeqCst))
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .expect("read dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn backup_names_are_lumberjacks() {
        let file = RotatingFile::new("/var/log/audit.log", Rotation::default());
        let at = UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        assert_eq!(
            file.backup_name(at),
            PathBuf::from("/var/log/audit-2023-11-14T22-13-20.123.log")
        );
        assert_eq!(parse_backup_timestamp("2023-11-14T22-13-20.123"), Some(at));
        assert_eq!(parse_backup_timestamp("2023-11-14T22:13:20.123"), None);
        let bare = RotatingFile::new("audit", Rotation::default());
        assert_eq!(
            bare.backup_name(at),
            PathBuf::from("./audit-2023-11-14T22-13-20.123")
        );
    }

    #[test]
    fn rotates_before_a_write_that_would_exceed_the_size() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("audit.log");
        let mut file = RotatingFile::new(
            &path,
            Rotation {
                max_size_bytes: 10,
                ..Rotation::default()
            },
        )
        .with_clock(ticking_clock);
        file.write_line(b"12345\n").expect("write");
        file.write_line(b"6789\n").expect("write"); // 11 bytes would exceed: rotate
        file.write_line(b"abcd\n").expect("write"); // exactly 10: no rotation
        file.flush().expect("flush");
        let all = names(dir.path());
        assert_eq!(all.len(), 2, "{all:?}");
        let backup = all.iter().find(|n| *n != "audit.log").expect("a backup");
        assert!(
            backup.starts_with("audit-") && backup.ends_with(".log"),
            "{backup}"
        );
        assert_eq!(fs::read(dir.path().join(backup)).expect("read"), b"12345\n");
        assert_eq!(fs::read(&path).expect("read"), b"6789\nabcd\n");
        assert!(file.write_line(&[b'x'; 11]).is_err());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&path).expect("stat").permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
    }

    #[test]
    fn appends_to_an_existing_file_and_rotates_it_when_full() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("audit.log");
        fs::write(&path, b"old\n").expect("write");
        let rotation = Rotation {
            max_size_bytes: 9,
            ..Rotation::default()
        };
        let mut file = RotatingFile::new(&path, rotation).with_clock(ticking_clock);
        file.write_line(b"new\n").expect("write");
        file.flush().expect("flush");
        assert_eq!(fs::read(&path).expect("read"), b"old\nnew\n");
        drop(file);
        // 8 + 1 reaches the maximum: a reopened file rotates first.
        let mut file = RotatingFile::new(&path, rotation).with_clock(ticking_clock);
        file.write_line(b"x").expect("write");
        file.flush().expect("flush");
        assert_eq!(fs::read(&path).expect("read"), b"x");
        assert_eq!(names(dir.path()).len(), 2);
    }

    #[test]
    fn max_backups_prunes_the_oldest() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("audit.log");
        fs::write(dir.path().join("unrelated.log"), b"keep me").expect("write");
        let mut file = RotatingFile::new(
            &path,
            Rotation {
                max_size_bytes: 4,
                max_backups: 2,
                ..Rotation::default()
            },
        )
        .with_clock(ticking_clock);
        for line in [b"one\n", b"two\n", b"thr\n", b"fou\n", b"fiv\n"] {
            file.write_line(line).expect("write");
        }
        file.flush().expect("flush");
        let all = names(dir.path());
        assert_eq!(all.len(), 4, "{all:?}"); // audit.log, two backups, unrelated.log
        let contents: Vec<Vec<u8>> = all
            .iter()
            .filter(|n| n.starts_with("audit-"))
            .map(|n| fs::read(dir.path().join(n)).expect("read"))
            .collect();
        assert_eq!(contents, [b"thr\n".to_vec(), b"fou\n".to_vec()]);
        assert_eq!(fs::read(&path).expect("read"), b"fiv\n");
    }

    #[test]
    fn max_age_removes_old_backups() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("audit.log");
        let ancient = dir.path().join("audit-2001-01-01T00-00-00.000.log");
        fs::write(&ancient, b"old").expect("write");
        let recent = RotatingFile::new(&path, Rotation::default())
            .backup_name(SystemTime::now() - Duration::from_secs(3600));
        fs::write(&recent, b"recent").expect("write");
        let mut file = RotatingFile::new(
            &path,
            Rotation {
                max_age_days: 30,
                ..Rotation::default()
            },
        );
        file.write_line(b"line\n").expect("write");
        assert!(!ancient.exists());
        assert!(recent.exists());
    }
}
