//! The store watch (DESIGN "Store watch"): a SQLite core checks, every [`WATCH_INTERVAL`], that
//! its store path and serving lock still name the files it opened (device and inode). A file
//! removed or replaced under a serving core would otherwise go unnoticed: SQLite keeps writing
//! into the unlinked file, and everything committed from then on is gone at the next start.
//! PostgreSQL's postmaster stops the same way when its lock file goes.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

/// How often the files are checked.
pub const WATCH_INTERVAL: Duration = Duration::from_secs(1);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileId {
    device: u64,
    inode: u64,
}

impl FileId {
    fn of(metadata: &std::fs::Metadata) -> FileId {
        FileId { device: metadata.dev(), inode: metadata.ino() }
    }
}

/// One watched file: its path and the file it named when the core opened it.
#[derive(Debug)]
struct Watched {
    what: &'static str,
    path: PathBuf,
    opened: FileId,
}

impl Watched {
    /// What became of the file, if it is no longer the one opened.
    fn check(&self) -> Option<String> {
        let path = self.path.display();
        match std::fs::metadata(&self.path) {
            Ok(metadata) if FileId::of(&metadata) == self.opened => None,
            Ok(_) => Some(format!("the {} {path} was replaced by another file", self.what)),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                Some(format!("the {} {path} was removed", self.what))
            }
            Err(error) => Some(format!("the {} {path} cannot be checked: {error}", self.what)),
        }
    }
}

/// The files a SQLite core serves from.
#[derive(Debug)]
pub struct StoreFiles {
    files: [Watched; 2],
}

impl StoreFiles {
    /// `store` as it is now (the core has just opened it) and the serving lock file it holds.
    pub fn new(store: &Path, lock_path: &Path, lock: &std::fs::File) -> std::io::Result<StoreFiles> {
        let store_id = FileId::of(&std::fs::metadata(store)?);
        let lock_id = FileId::of(&lock.metadata()?);
        Ok(StoreFiles {
            files: [
                Watched { what: "store file", path: store.to_path_buf(), opened: store_id },
                Watched { what: "serving lock", path: lock_path.to_path_buf(), opened: lock_id },
            ],
        })
    }

    /// Why the core can no longer serve from these files, if it cannot.
    pub fn check(&self) -> Option<String> {
        self.files.iter().find_map(Watched::check)
    }

    /// Resolves, with the reason, once a check fails; checks every `interval`.
    pub async fn changed(self, interval: Duration) -> String {
        let mut ticks = tokio::time::interval(interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let files = Arc::new(self);
        loop {
            ticks.tick().await;
            let checked = Arc::clone(&files);
            // A stat can block on a stalled file system; never on a runtime thread.
            match tokio::task::spawn_blocking(move || checked.check()).await {
                Ok(None) => {}
                Ok(Some(reason)) => return reason,
                Err(error) => return format!("the store watch failed: {error}"),
            }
        }
    }
}

/// Whether the store a core serves is gone; once it is, calls in flight answer "not
/// committed" and the core stops.
#[derive(Clone)]
pub struct StoreGone(Arc<watch::Sender<Option<String>>>);

impl Default for StoreGone {
    fn default() -> Self {
        StoreGone(Arc::new(watch::Sender::new(None)))
    }
}

impl StoreGone {
    pub fn declare(&self, reason: String) {
        self.0.send_if_modified(|gone| {
            let first = gone.is_none();
            if first {
                *gone = Some(reason);
            }
            first
        });
    }

    pub fn reason(&self) -> Option<String> {
        self.0.borrow().clone()
    }

    pub fn is_gone(&self) -> bool {
        self.0.borrow().is_some()
    }

    /// Resolves once the store is declared gone.
    pub async fn wait(&self) {
        let mut gone = self.0.subscribe();
        let _ = gone.wait_for(Option::is_some).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The watched files, and both held open as a serving core holds them (so a removed
    /// file's inode is not free for the next file made).
    fn files(dir: &Path) -> (StoreFiles, [std::fs::File; 2]) {
        let store = dir.join("world.db");
        std::fs::write(&store, b"db").unwrap();
        let lock_path = dir.join("world.db.serving.lock");
        let lock = std::fs::File::create(&lock_path).unwrap();
        let files = StoreFiles::new(&store, &lock_path, &lock).unwrap();
        (files, [std::fs::File::open(&store).unwrap(), lock])
    }

    #[test]
    fn the_same_files_pass_and_a_removed_or_replaced_one_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let (watched, _open) = files(dir.path());
        assert_eq!(watched.check(), None);
        // Rewritten in place is still the same file.
        std::fs::write(dir.path().join("world.db"), b"more").unwrap();
        assert_eq!(watched.check(), None);

        std::fs::remove_file(dir.path().join("world.db")).unwrap();
        let store = dir.path().join("world.db").display().to_string();
        assert_eq!(watched.check(), Some(format!("the store file {store} was removed")));
        std::fs::write(dir.path().join("world.db"), b"db").unwrap();
        assert_eq!(watched.check(), Some(format!("the store file {store} was replaced by another file")));

        let dir = tempfile::tempdir().unwrap();
        let (watched, _open) = files(dir.path());
        let lock = dir.path().join("world.db.serving.lock");
        std::fs::rename(dir.path().join("world.db"), dir.path().join("elsewhere")).unwrap();
        std::fs::rename(dir.path().join("elsewhere"), dir.path().join("world.db")).unwrap();
        assert_eq!(watched.check(), None, "moved away and back is the same file");
        std::fs::remove_file(&lock).unwrap();
        assert_eq!(watched.check(), Some(format!("the serving lock {} was removed", lock.display())));
    }

    #[test]
    fn gone_is_declared_once_with_the_first_reason() {
        let gone = StoreGone::default();
        assert!(!gone.is_gone());
        gone.declare("first".into());
        gone.declare("second".into());
        assert_eq!(gone.reason().as_deref(), Some("first"));
        tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(gone.wait());
    }
}
