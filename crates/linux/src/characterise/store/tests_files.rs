//! Tests of the store's file on disk (`files.rs`): links refused at the store, its
//! companions and its copy; the private state directory; the copy left at each healthy
//! open and recovery from it.

use std::path::Path;

use super::files::{is_symlink, with_suffix};
use super::tests::{assert_one_line_naming, given, populated, temp};
use super::*;

/// Names in `dir`, to show nothing appeared beside a link's target.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn a_symlink_at_the_store_is_refused_and_its_target_left_alone() {
    let dir = temp();
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let victim = elsewhere.join("passwd");
    std::fs::write(&victim, "root:x:0:0::/root:/bin/sh\n").unwrap();
    let missing = elsewhere.join("created-by-numasched");

    for (name, target) in [("p.db", &victim), ("q.db", &missing)] {
        let path = dir.path().join(name);
        std::os::unix::fs::symlink(target, &path).unwrap();
        for open in [Store::open, Store::open_without_backup] {
            let e = open(&path).unwrap_err();
            assert!(matches!(e, StoreError::Symlink { .. }), "{e:?}");
            let msg = e.to_string();
            assert_one_line_naming(&msg, &path);
            assert!(
                msg.contains("symbolic link") && msg.contains("not followed"),
                "{msg}"
            );
        }
        assert!(is_symlink(&path), "the link itself is left too");
    }
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "root:x:0:0::/root:/bin/sh\n"
    );
    assert!(!missing.exists(), "a dangling link's target is not created");
    assert_eq!(
        names(&elsewhere),
        ["passwd"],
        "no -wal, -shm or .bak beside it"
    );
}

#[test]
fn a_symlink_at_a_companion_file_is_refused() {
    let dir = temp();
    let path = dir.path().join("p.db");
    let mut s = Store::open(&path).unwrap();
    s.set_given("mcf", &given(30.0, None), 1).unwrap();
    drop(s);
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "keep me").unwrap();
    for suffix in ["-wal", "-shm", "-journal"] {
        let link = with_suffix(&path, suffix);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let e = Store::open(&path).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, StoreError::Symlink { .. }), "{e:?}");
        assert_one_line_naming(&msg, &path);
        assert!(
            msg.contains(&format!("{} is a symbolic link", link.display())),
            "{msg}"
        );
        assert!(msg.contains("not followed"), "{msg}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
        std::fs::remove_file(&link).unwrap();
    }
    // With the links gone the store is as it was.
    let s = Store::open(&path).unwrap();
    assert_eq!(s.get("mcf").unwrap().unwrap().mpki.best().unwrap().0, 30.0);
}

#[test]
fn a_created_state_directory_is_private_and_a_linked_one_is_used() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp();
    let state = dir.path().join("var/lib/numasched");
    std::fs::create_dir_all(dir.path().join("var/lib")).unwrap();
    drop(Store::open(&state.join("p.db")).unwrap());
    let mode = std::fs::metadata(&state).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700, "{mode:o}");
    // An administrator moved the state directory to another disk and linked it:
    // the directory is resolved, only the files in it must not be links.
    let linked = dir.path().join("linked");
    std::os::unix::fs::symlink(&state, &linked).unwrap();
    let mut s = Store::open(&linked.join("p.db")).unwrap();
    s.set_given("mcf", &given(1.0, None), 0).unwrap();
    assert_eq!(s.path(), linked.join("p.db"));
    drop(s);
    assert_eq!(
        Store::open(&state.join("p.db"))
            .unwrap()
            .list()
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn a_healthy_open_leaves_a_copy_that_opens_with_the_same_profiles() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp();
    let path = dir.path().join("p.db");
    let bak = dir.path().join("p.db.bak");
    let s = Store::open(&path).unwrap();
    assert_eq!(s.backup(), None, "an empty store is not copied");
    assert!(!bak.exists());
    drop(s);
    let programs = populated(&path);
    let s = Store::open(&path).unwrap();
    assert_eq!(s.backup(), Some(bak.as_path()));
    assert_eq!(s.backup_warning(), None);
    let mode = std::fs::metadata(&bak).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    assert!(!dir.path().join("p.db.bak.tmp").exists());
    // Recovering is putting the copy in place of the store.
    let restored = dir.path().join("restored.db");
    std::fs::copy(&bak, &restored).unwrap();
    let r = Store::open(&restored).unwrap();
    assert_eq!(r.list().unwrap(), programs);
    assert_eq!(
        r.numa_history("milc").unwrap(),
        s.numa_history("milc").unwrap()
    );
    assert!(r.numa_history("milc").unwrap().is_some());
}

#[test]
fn a_corrupt_store_names_its_copy_and_is_left_untouched() {
    let dir = temp();
    let path = dir.path().join("p.db");
    let bak = dir.path().join("p.db.bak");
    let programs = populated(&path);
    {
        let s = Store::open(&path).unwrap();
        assert!(s.backup().is_some());
        s.conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .unwrap();
    }
    let copy = std::fs::read(&bak).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    for b in &mut bytes[4096..8192] {
        *b = 0xA5;
    }
    std::fs::write(&path, &bytes).unwrap();
    let e = Store::open(&path).unwrap_err();
    assert!(
        matches!(&e, StoreError::Corrupt { backup: Some(b), .. } if *b == bak),
        "{e:?}"
    );
    let msg = e.to_string();
    assert_one_line_naming(&msg, &path);
    assert!(msg.contains("corrupt"), "{msg}");
    assert!(
        msg.contains(&format!(
            "the copy made at its last healthy open is {}",
            bak.display()
        )),
        "{msg}"
    );
    assert!(msg.contains("move the damaged file"), "{msg}");
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "never replaced");
    assert_eq!(
        std::fs::read(&bak).unwrap(),
        copy,
        "the copy is not touched"
    );

    // Following the message recovers every profile.
    let aside = dir.path().join("damaged");
    std::fs::create_dir(&aside).unwrap();
    for suffix in ["", "-wal", "-shm"] {
        let f = with_suffix(&path, suffix);
        if f.exists() {
            std::fs::rename(&f, aside.join(f.file_name().unwrap())).unwrap();
        }
    }
    std::fs::copy(&bak, &path).unwrap();
    assert_eq!(Store::open(&path).unwrap().list().unwrap(), programs);
}

#[test]
fn the_copy_never_follows_links_and_a_failed_copy_does_not_fail_the_open() {
    let dir = temp();
    let path = dir.path().join("p.db");
    let bak = dir.path().join("p.db.bak");
    let tmp = dir.path().join("p.db.bak.tmp");
    let programs = populated(&path);
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "keep me").unwrap();

    // A link at the copy: refused, with a warning; the store works.
    std::os::unix::fs::symlink(&victim, &bak).unwrap();
    let s = Store::open(&path).unwrap();
    let w = s.backup_warning().expect("a warning").to_string();
    assert_one_line_naming(&w, &bak);
    assert!(w.contains("symbolic link"), "{w}");
    assert_eq!(s.backup(), None);
    assert_eq!(s.list().unwrap(), programs);
    drop(s);
    assert!(is_symlink(&bak));
    std::fs::remove_file(&bak).unwrap();

    // A link at the temporary name: the link goes, its target stays.
    std::os::unix::fs::symlink(&victim, &tmp).unwrap();
    let s = Store::open(&path).unwrap();
    assert_eq!(s.backup_warning(), None);
    assert_eq!(s.backup(), Some(bak.as_path()));
    assert!(!is_symlink(&bak) && bak.is_file());
    assert!(!tmp.exists() && !is_symlink(&tmp));
    drop(s);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");

    // A copy that cannot be put in place (here a directory holds its name; a full
    // disk fails the same way) is a warning, and leaves no temporary behind.
    std::fs::remove_file(&bak).unwrap();
    std::fs::create_dir(&bak).unwrap();
    std::fs::write(bak.join("inside"), "x").unwrap();
    let s = Store::open(&path).unwrap();
    let w = s.backup_warning().expect("a warning").to_string();
    assert_one_line_naming(&w, &bak);
    assert!(w.contains("no copy"), "{w}");
    assert!(!tmp.exists());
    assert_eq!(s.list().unwrap(), programs);
    assert_eq!(names(&bak), ["inside"]);
}

/// A store someone else could have written is not used (issue 41): another user's
/// file, or one others may write, would decide where a root daemon runs processes.
/// The refusal is one line naming the file and why, and the file is left as it was.
#[test]
fn a_store_others_could_have_written_is_refused_and_left() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp();
    let path = dir.path().join("p.db");
    populated(&path);
    let before = std::fs::read(&path).unwrap();

    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o664)).unwrap();
    for open in [Store::open, Store::open_without_backup] {
        let e = open(&path).unwrap_err();
        assert!(matches!(e, StoreError::Untrusted { .. }), "{e:?}");
        let msg = e.to_string();
        assert_one_line_naming(&msg, &path);
        assert!(msg.contains("others may write it (mode 664)"), "{msg}");
    }
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();

    // Owned by nobody (only root can give a file away; as another user the test
    // cannot make one that is not its own).
    if nix::unistd::geteuid().is_root() {
        std::os::unix::fs::chown(&path, Some(65534), None).unwrap();
        let msg = Store::open(&path).unwrap_err().to_string();
        assert!(msg.contains("owned by uid 65534"), "{msg}");
        std::os::unix::fs::chown(&path, Some(0), None).unwrap();
    }
    assert_eq!(std::fs::read(&path).unwrap(), before, "left as it was");
    assert!(Store::open(&path).is_ok(), "trusted again once fixed");
}

/// A store numasched creates is its owner's alone, whatever the umask: SQLite would
/// have made it group-writable under 002, and the next open would refuse it.
#[test]
fn a_new_store_is_private_to_its_owner() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp();
    let path = dir.path().join("new.db");
    Store::open(&path).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    Store::open(&path).unwrap();
}
