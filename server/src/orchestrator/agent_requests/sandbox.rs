//! Where an agent's `fs/*` requests may go: files beneath the session's working directory, and
//! never into the server's data dir (the database, the token, `agents.toml`, other sessions'
//! history), whatever the working directory is (`/` and `$HOME` contain the data dir).
//!
//! A path is resolved by the kernel beneath the working directory (`openat2` with
//! `RESOLVE_BENEATH`): a symlink, dangling or not, that leads out of it fails instead of being
//! followed, and nothing can swap a directory for a symlink between a check and the open.
//! What was opened is then checked by its real path (`/proc/self/fd`) against the data dir.
//!
//! The kernel's own file systems are never a project's files: `/proc` (every process's
//! environment, batond's own with its token, their memory), `/sys` and `/dev` are refused by
//! path and, wherever procfs or sysfs is mounted, by the type of the file system opened; only
//! regular files are read or written. A working directory inside one of them is refused whole.

use std::ffi::CString;
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// Why a request was refused (the agent gets the text).
#[derive(Debug, PartialEq)]
pub enum Refusal {
    /// The request itself is wrong: outside the working directory, in the data dir, not absolute.
    Invalid(String),
    /// The file system said no (missing file, permissions).
    Io(String),
}

/// Which directory a session's working directory was when its agent was launched: its device
/// and inode. A path can be made to lead elsewhere later (a component renamed, replaced by a
/// symlink); the directory it was cannot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkdirPin {
    dev: u64,
    ino: u64,
}

impl WorkdirPin {
    /// The identity of the directory `path` leads to now (symlinks followed).
    pub fn of(path: &Path) -> std::io::Result<WorkdirPin> {
        Ok(WorkdirPin::from_metadata(&std::fs::metadata(path)?))
    }

    fn from_metadata(metadata: &std::fs::Metadata) -> WorkdirPin {
        use std::os::unix::fs::MetadataExt;
        WorkdirPin { dev: metadata.dev(), ino: metadata.ino() }
    }
}

/// The directories a session's file requests are confined to.
#[derive(Debug, Clone)]
pub struct Sandbox {
    /// The session's working directory, symlinks resolved.
    root: PathBuf,
    /// The working directory as the agent was given it (paths it sends start with this one).
    given: PathBuf,
    /// The data dir, symlinks resolved; None when it cannot be resolved (then nothing is in it).
    data_dir: Option<PathBuf>,
    /// The working directory the agent was launched in: every request checks that the path
    /// still leads to it.
    pin: WorkdirPin,
}

/// The mount points of the kernel's file systems (see the module's comment).
const KERNEL_DIRS: [&str; 3] = ["/proc", "/sys", "/dev"];

/// Whether `path` lies in one of [`KERNEL_DIRS`] (compared by components: `/devices` is not
/// `/dev`).
fn in_kernel_dir(path: &Path) -> bool {
    KERNEL_DIRS.iter().any(|dir| path.starts_with(dir))
}

/// Whether `file` is on procfs or sysfs (or another file system of the kernel's state), wherever
/// it is mounted. (`f_type` and the magic numbers have different integer types on different
/// targets: compared as i64, a cast that is a no-op on some.)
#[allow(clippy::unnecessary_cast)]
fn on_kernel_file_system(file: &File) -> bool {
    // SAFETY: statfs is plain data; zeroed is a valid value for every field.
    let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid descriptor and a pointer to a statfs the call fills.
    if unsafe { libc::fstatfs(file.as_raw_fd(), &mut stat) } != 0 {
        return true; // cannot tell: refused
    }
    let kind = stat.f_type as i64;
    [
        libc::PROC_SUPER_MAGIC as i64,
        libc::SYSFS_MAGIC as i64,
        libc::DEVPTS_SUPER_MAGIC as i64,
        libc::DEBUGFS_MAGIC as i64,
        libc::SECURITYFS_MAGIC as i64,
        libc::CGROUP2_SUPER_MAGIC as i64,
    ]
    .contains(&kind)
}

impl Sandbox {
    /// The sandbox of `workdir`, which must still be the directory `pin` identified at launch.
    pub fn new(workdir: &Path, pin: Option<WorkdirPin>, data_dir: &Path) -> Result<Sandbox, Refusal> {
        let pin = pin.ok_or_else(|| {
            Refusal::Io(format!(
                "the session's working directory {} could not be identified when its agent started",
                workdir.display()
            ))
        })?;
        let root = workdir.canonicalize().map_err(|e| Refusal::Io(format!("working directory: {e}")))?;
        if in_kernel_dir(&root) || in_kernel_dir(workdir) {
            return Err(Refusal::Invalid(format!(
                "the session's working directory {} is in the kernel's files ({}), which no session may reach",
                workdir.display(),
                KERNEL_DIRS.join(", ")
            )));
        }
        let sandbox = Sandbox { root, given: workdir.to_path_buf(), data_dir: data_dir.canonicalize().ok(), pin };
        let now = WorkdirPin::of(&sandbox.root).map_err(|e| Refusal::Io(format!("working directory: {e}")))?;
        sandbox.check_pin(now)?;
        Ok(sandbox)
    }

    /// Refuses a working directory that is not the one the agent was launched in.
    fn check_pin(&self, now: WorkdirPin) -> Result<(), Refusal> {
        if now == self.pin {
            return Ok(());
        }
        Err(Refusal::Invalid(format!(
            "the session's working directory {} was replaced since its agent started (it now leads to {}); \
             no file request is served until the session is resumed",
            self.given.display(),
            self.root.display()
        )))
    }

    fn kernel_refusal(&self, path: &Path) -> Refusal {
        Refusal::Invalid(format!(
            "{} is in the kernel's files ({}), which no session may reach",
            path.display(),
            KERNEL_DIRS.join(", ")
        ))
    }

    /// Whether `real` (a resolved path) is in the data dir and out of bounds for this session. A
    /// task's own worktree lives in `DATA_DIR/worktrees`: beneath it is the session's own.
    fn in_data_dir(&self, real: &Path) -> bool {
        let Some(data_dir) = &self.data_dir else { return false };
        let own_worktree = self.root.starts_with(data_dir.join("worktrees")) && real.starts_with(&self.root);
        real.starts_with(data_dir) && !own_worktree
    }

    /// `path` relative to the working directory, refused when it is not absolute, names the
    /// data dir, or does not lie beneath the working directory (lexically; symlinks are left to
    /// the kernel's resolution).
    fn relative(&self, path: &Path) -> Result<PathBuf, Refusal> {
        if !path.is_absolute() {
            return Err(Refusal::Invalid(format!("path must be absolute: {}", path.display())));
        }
        let outside = || {
            Refusal::Invalid(format!(
                "{} is outside the session's working directory {}",
                path.display(),
                self.root.display()
            ))
        };
        let relative =
            path.strip_prefix(&self.root).or_else(|_| path.strip_prefix(&self.given)).map_err(|_| outside())?;
        if relative.components().any(|c| matches!(c, Component::ParentDir)) {
            return Err(outside());
        }
        if in_kernel_dir(path) || in_kernel_dir(&self.root.join(relative)) {
            return Err(self.kernel_refusal(path));
        }
        if self.in_data_dir(path) {
            return Err(self.data_dir_refusal(path));
        }
        Ok(relative.to_path_buf())
    }

    /// A directory beneath the working directory (the working directory itself included), as
    /// the kernel resolves it now: where a terminal's command may run.
    pub fn directory(&self, path: &Path) -> Result<PathBuf, Refusal> {
        let relative = self.relative(path)?;
        let real = self.root.join(&relative).canonicalize().map_err(|e| self.io_refusal(path, e))?;
        if !real.starts_with(&self.root) {
            return Err(self.escape_refusal(path));
        }
        if in_kernel_dir(&real) {
            return Err(self.kernel_refusal(path));
        }
        if self.in_data_dir(&real) {
            return Err(self.data_dir_refusal(path));
        }
        if !real.is_dir() {
            return Err(Refusal::Invalid(format!("{} is not a directory", path.display())));
        }
        Ok(real)
    }

    fn data_dir_refusal(&self, path: &Path) -> Refusal {
        Refusal::Invalid(format!("{} is in the server's data dir, which no session may reach", path.display()))
    }

    /// Opens `path` beneath the working directory (`create`: for writing, created if missing).
    /// Returns the file and whether this call created it.
    fn open(&self, path: &Path, create: bool) -> Result<(File, bool), Refusal> {
        let relative = self.relative(path)?;
        let root = File::open(&self.root).map_err(|e| Refusal::Io(format!("working directory: {e}")))?;
        // The directory opened, not the path: what every open below is resolved beneath.
        let opened = root.metadata().map_err(|e| Refusal::Io(format!("working directory: {e}")))?;
        self.check_pin(WorkdirPin::from_metadata(&opened))?;
        let opened = match self.open_relative(&root, &relative, create, BENEATH) {
            // An absolute symlink is refused by RESOLVE_BENEATH even when it points back inside:
            // such a path is resolved here and opened again with no symlink left to follow (a
            // link swapped in meanwhile makes that open fail).
            Err(e) if e.raw_os_error() == Some(libc::EXDEV) => match resolve_for(path, create) {
                Ok(real) if in_kernel_dir(&real) => return Err(self.kernel_refusal(path)),
                Ok(real) if real.starts_with(&self.root) && !self.in_data_dir(&real) => {
                    let relative = real.strip_prefix(&self.root).unwrap_or(Path::new("")).to_path_buf();
                    self.open_relative(&root, &relative, create, BENEATH | libc::RESOLVE_NO_SYMLINKS)
                }
                Ok(real) if self.in_data_dir(&real) => return Err(self.data_dir_refusal(path)),
                _ => Err(e),
            },
            other => other,
        };
        let (file, created) = opened.map_err(|e| self.io_refusal(path, e))?;
        // What was opened, by its real path: beneath the working directory, not in the data dir.
        let real = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
            .map_err(|e| Refusal::Io(format!("cannot tell what {} is: {e}", path.display())))?;
        if !real.starts_with(&self.root) || self.in_data_dir(&real) {
            if created {
                let _ = std::fs::remove_file(&real);
            }
            return Err(if self.in_data_dir(&real) { self.data_dir_refusal(path) } else { self.escape_refusal(path) });
        }
        if in_kernel_dir(&real) || on_kernel_file_system(&file) {
            return Err(self.kernel_refusal(path));
        }
        if !file.metadata().is_ok_and(|m| m.is_file()) {
            if created {
                let _ = std::fs::remove_file(&real);
            }
            return Err(Refusal::Invalid(format!("{} is not a regular file", path.display())));
        }
        Ok((file, created))
    }

    /// Opens `relative` beneath `root` with `resolve` flags; for writing (`create`), O_EXCL
    /// first tells a file this call creates (removed again if it must be refused) from one that
    /// was there.
    fn open_relative(&self, root: &File, relative: &Path, create: bool, resolve: u64) -> std::io::Result<(File, bool)> {
        if !create {
            return open_beneath(root, relative, libc::O_RDONLY, resolve).map(|f| (f, false));
        }
        match open_beneath(root, relative, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, resolve) {
            Ok(file) => {
                // The agent's file is the user's: the user's mask, not batond's private one.
                if let Some(mode) = crate::umask::user_file_mode() {
                    use std::os::unix::fs::PermissionsExt;
                    file.set_permissions(std::fs::Permissions::from_mode(mode))?;
                }
                Ok((file, true))
            }
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                open_beneath(root, relative, libc::O_WRONLY, resolve).map(|f| (f, false))
            }
            Err(e) => Err(e),
        }
    }

    fn escape_refusal(&self, path: &Path) -> Refusal {
        Refusal::Invalid(format!(
            "{} leads outside the session's working directory {} (through a symlink)",
            path.display(),
            self.root.display()
        ))
    }

    fn io_refusal(&self, path: &Path, e: std::io::Error) -> Refusal {
        match e.raw_os_error() {
            // RESOLVE_BENEATH: a symlink or `..` that leads out of the working directory.
            Some(libc::EXDEV) | Some(libc::ELOOP) => self.escape_refusal(path),
            _ => Refusal::Io(format!("{}: {e}", path.display())),
        }
    }

    /// Reads a text file of at most `max_bytes`.
    pub fn read(&self, path: &Path, max_bytes: u64) -> Result<String, Refusal> {
        let (mut file, _) = self.open(path, false)?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        if size > max_bytes {
            return Err(Refusal::Invalid(format!("{} is {size} bytes; at most {max_bytes} are read", path.display())));
        }
        let mut bytes = Vec::with_capacity(size as usize);
        // A file that grows meanwhile is read no further than the bound.
        Read::by_ref(&mut file)
            .take(max_bytes + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| Refusal::Io(format!("cannot read {}: {e}", path.display())))?;
        if bytes.len() as u64 > max_bytes {
            return Err(Refusal::Invalid(format!("{} is over {max_bytes} bytes", path.display())));
        }
        String::from_utf8(bytes).map_err(|_| Refusal::Io(format!("cannot read {}: not UTF-8 text", path.display())))
    }

    /// Writes `content` to a text file, created if missing, replacing what it held.
    pub fn write(&self, path: &Path, content: &str) -> Result<(), Refusal> {
        let (mut file, _) = self.open(path, true)?;
        file.set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| file.write_all(content.as_bytes()))
            .map_err(|e| Refusal::Io(format!("cannot write {}: {e}", path.display())))
    }
}

/// `path` with every symlink resolved; for a file to create, its parent resolved and its name
/// kept (the name itself may not be a symlink: the open that follows refuses one).
fn resolve_for(path: &Path, create: bool) -> std::io::Result<PathBuf> {
    match path.canonicalize() {
        Err(e) if create && e.kind() == std::io::ErrorKind::NotFound => {
            let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else { return Err(e) };
            Ok(parent.canonicalize()?.join(name))
        }
        other => other,
    }
}

/// What every open resolves with: nothing outside the working directory, no /proc magic links.
const BENEATH: u64 = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;

/// `openat2(dir, relative, flags, resolve)` (`BENEATH` and more): the kernel refuses
/// any resolution that leaves `dir`. Written against the raw system call because the standard
/// library has no `openat2`; on kernels before 5.6 (ENOSYS) the final component is opened with
/// O_NOFOLLOW under a parent resolved first, and the caller's check of the real path still holds.
fn open_beneath(dir: &File, relative: &Path, flags: libc::c_int, resolve: u64) -> std::io::Result<File> {
    let name = if relative.as_os_str().is_empty() { Path::new(".") } else { relative };
    let c_path = CString::new(name.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    let flags = flags | libc::O_CLOEXEC | libc::O_NOCTTY;
    // SAFETY: open_how is plain data; zeroed is a valid value for every field.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = flags as u64;
    how.mode = if flags & libc::O_CREAT != 0 { 0o666 } else { 0 };
    how.resolve = resolve;
    // SAFETY: the pointers are valid for the call; the size is that of the struct passed.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            c_path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd >= 0 {
        // SAFETY: a new descriptor this call owns.
        return Ok(unsafe { File::from_raw_fd(fd as libc::c_int) });
    }
    let error = std::io::Error::last_os_error();
    if error.raw_os_error() != Some(libc::ENOSYS) {
        return Err(error);
    }
    let c_path = CString::new(name.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    // SAFETY: valid descriptor and NUL-terminated path.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), c_path.as_ptr(), flags | libc::O_NOFOLLOW, 0o666 as libc::c_uint) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor this call owns.
    Ok(unsafe { File::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_beneath_the_workdir_and_out_of_the_data_dir() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let data = root.join("data");
        let work = root.join("work");
        std::fs::create_dir_all(&data).unwrap();
        std::fs::create_dir_all(work.join("sub")).unwrap();
        std::fs::write(data.join("token"), "s3cret").unwrap();
        std::fs::write(root.join("outside.txt"), "outside").unwrap();

        let sandbox = Sandbox::new(&work, WorkdirPin::of(&work).ok(), &data).unwrap();
        sandbox.write(&work.join("sub/a.txt"), "hello").unwrap();
        assert_eq!(sandbox.read(&work.join("sub/a.txt"), 100).unwrap(), "hello");
        sandbox.write(&work.join("sub/a.txt"), "hi").unwrap();
        assert_eq!(std::fs::read_to_string(work.join("sub/a.txt")).unwrap(), "hi", "replaced, not appended");
        assert!(
            matches!(sandbox.read(&work.join("sub/a.txt"), 1), Err(Refusal::Invalid(m)) if m.contains("at most 1"))
        );

        // A dangling symlink out of the workdir: the write fails and creates nothing.
        std::os::unix::fs::symlink(root.join("created-outside.txt"), work.join("dangling")).unwrap();
        assert!(
            matches!(sandbox.write(&work.join("dangling"), "x"), Err(Refusal::Invalid(m)) if m.contains("through a symlink"))
        );
        assert!(!root.join("created-outside.txt").exists());
        // A relative symlink that climbs out, and `..`.
        std::os::unix::fs::symlink("..", work.join("up")).unwrap();
        assert!(sandbox.read(&work.join("up/outside.txt"), 100).is_err());
        assert!(sandbox.read(&work.join("../outside.txt"), 100).is_err());
        assert!(sandbox.read(Path::new("relative.txt"), 100).is_err());
        // A symlink that stays inside is followed, relative or absolute.
        std::os::unix::fs::symlink("sub/a.txt", work.join("inside")).unwrap();
        assert_eq!(sandbox.read(&work.join("inside"), 100).unwrap(), "hi");
        std::os::unix::fs::symlink(work.join("sub/a.txt"), work.join("inside-absolute")).unwrap();
        assert_eq!(sandbox.read(&work.join("inside-absolute"), 100).unwrap(), "hi");

        // A workdir that contains the data dir: the data dir is still out of reach.
        let wide = Sandbox::new(&root, WorkdirPin::of(&root).ok(), &data).unwrap();
        assert!(matches!(wide.read(&data.join("token"), 100), Err(Refusal::Invalid(m)) if m.contains("data dir")));
        assert!(wide.write(&data.join("agents.toml"), "x").is_err());
        assert!(!data.join("agents.toml").exists());
        std::os::unix::fs::symlink(&data, root.join("to-data")).unwrap();
        assert!(wide.read(&root.join("to-data/token"), 100).is_err(), "not through a symlink either");
        assert_eq!(wide.read(&root.join("outside.txt"), 100).unwrap(), "outside");

        // Not a regular file: refused.
        assert!(
            matches!(wide.read(&root.join("work"), 100), Err(Refusal::Invalid(m)) if m.contains("not a regular file"))
        );

        // A task's own worktree under DATA_DIR/worktrees is its workdir.
        let worktree = data.join("worktrees/task-1");
        std::fs::create_dir_all(&worktree).unwrap();
        let own = Sandbox::new(&worktree, WorkdirPin::of(&worktree).ok(), &data).unwrap();
        own.write(&worktree.join("f.txt"), "ok").unwrap();
        assert!(own.read(&data.join("token"), 100).is_err());
    }

    #[test]
    fn the_kernels_files_are_out_of_reach_even_from_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).unwrap();
        let everything = Sandbox::new(Path::new("/"), WorkdirPin::of(Path::new("/")).ok(), &data).unwrap();
        let pid = std::process::id();
        for path in [
            "/proc/self/environ".to_string(),
            format!("/proc/{pid}/environ"),
            "/proc/thread-self/environ".to_string(),
            "/proc/self/cmdline".to_string(),
            "/sys/kernel/hostname".to_string(),
            "/dev/null".to_string(),
        ] {
            let read = everything.read(Path::new(&path), 1 << 20);
            assert!(matches!(&read, Err(Refusal::Invalid(m)) if m.contains("kernel's files")), "{path}: {read:?}");
        }
        assert!(everything.write(Path::new("/dev/null"), "x").is_err());
        assert!(everything.write(Path::new("/proc/self/comm"), "x").is_err());
        // Through a symlink from an ordinary directory.
        let link = dir.path().join("env-link");
        std::os::unix::fs::symlink("/proc/self/environ", &link).unwrap();
        let read = everything.read(&link, 1 << 20);
        assert!(matches!(&read, Err(Refusal::Invalid(m)) if m.contains("kernel's files")), "{read:?}");
        // A working directory inside them is refused whole.
        for workdir in ["/proc", "/proc/self", "/sys", "/dev"] {
            assert!(
                Sandbox::new(Path::new(workdir), WorkdirPin::of(Path::new(workdir)).ok(), &data).is_err(),
                "{workdir}"
            );
        }
        // Other files of the root stay readable.
        let own = dir.path().join("notes.txt");
        std::fs::write(&own, "mine").unwrap();
        assert_eq!(everything.read(&own, 100).unwrap(), "mine");
    }

    #[test]
    fn a_working_directory_replaced_after_launch_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let data = root.join("data");
        let work = root.join("work");
        let elsewhere = root.join("elsewhere");
        std::fs::create_dir_all(&data).unwrap();
        std::fs::create_dir_all(&work).unwrap();
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::fs::write(work.join("a.txt"), "mine").unwrap();
        std::fs::write(elsewhere.join("a.txt"), "not the session's").unwrap();
        let pin = WorkdirPin::of(&work).ok();
        assert_eq!(Sandbox::new(&work, pin, &data).unwrap().read(&work.join("a.txt"), 100).unwrap(), "mine");

        // The path now leads to another directory: a symlink, then a plain directory.
        std::fs::rename(&work, root.join("work-moved")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &work).unwrap();
        let refused = Sandbox::new(&work, pin, &data).and_then(|s| s.read(&work.join("a.txt"), 100));
        assert!(matches!(&refused, Err(Refusal::Invalid(m)) if m.contains("was replaced")), "{refused:?}");
        std::fs::remove_file(&work).unwrap();
        std::fs::create_dir(&work).unwrap();
        let refused = Sandbox::new(&work, pin, &data).and_then(|s| s.write(&work.join("b.txt"), "x"));
        assert!(matches!(&refused, Err(Refusal::Invalid(m)) if m.contains("was replaced")), "{refused:?}");
        assert!(!work.join("b.txt").exists());
        // Without an identity from the launch, nothing is served.
        assert!(Sandbox::new(&work, None, &data).is_err());
    }
}
