//! Tests of the store: its contents, learning, import and export, and the errors an
//! operator sees. Those about the file on disk are in `tests_files.rs`.

use std::path::Path;

use numasched_model::character::{resolve, PenaltySource};
use numasched_model::profile::ProfileSet;
use rusqlite::Connection;

use super::*;

pub(super) fn temp() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

pub(super) fn given(mpki: f64, np: Option<f64>) -> GivenProfile {
    GivenProfile {
        mpki: Some(mpki),
        numa_penalty: np,
        ..GivenProfile::default()
    }
}

#[test]
fn creates_a_versioned_wal_store_and_its_directory() {
    let dir = temp();
    let path = dir.path().join("var/lib/numasched/profiles.db");
    // Only the store's own directory is made: a mistyped path is no tree.
    let e = Store::open(&path).expect_err("var/lib missing");
    assert!(e.to_string().contains("does not exist"), "{e}");
    assert!(!dir.path().join("var").exists());
    std::fs::create_dir_all(dir.path().join("var/lib")).unwrap();
    let s = Store::open(&path).unwrap();
    assert_eq!(s.path(), path);
    let v: i32 = s
        .conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, SCHEMA_VERSION);
    let mode: String = s
        .conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    assert!(s.list().unwrap().is_empty());
    drop(s);
    // Reopening an existing store is not a migration.
    assert!(Store::open(&path).unwrap().list().unwrap().is_empty());
}

#[test]
fn set_get_list_and_replace_keep_learned_numbers() {
    let dir = temp();
    let path = dir.path().join("p.db");
    let mut s = Store::open(&path).unwrap();
    let g = GivenProfile {
        mpki: Some(30.0),
        numa_penalty: Some(1.15),
        cache_reuse: Some(0.3),
        bandwidth_gbps: Some(4.0),
    };
    s.set_given("mcf", &g, 100).unwrap();
    s.set_given("lbm", &given(22.0, None), 101).unwrap();
    s.learn("mcf", Quantity::Mpki, 28.0, 102).unwrap();
    let f = s.learn("mcf", Quantity::Mpki, 32.0, 103).unwrap();
    assert_eq!((f.value, f.samples, f.updated), (30.0, 2, 103));

    let names: Vec<_> = s.list().unwrap().into_iter().map(|p| p.program).collect();
    assert_eq!(names, ["lbm", "mcf"]);
    let mcf = s.get("mcf").unwrap().unwrap();
    assert_eq!(mcf.mpki.best(), Some((30.0, Origin::Learned)));
    assert_eq!(mcf.mpki.given.unwrap().value, 30.0);
    assert_eq!(mcf.numa_penalty.best(), Some((1.15, Origin::Given)));
    assert_eq!(mcf.cache_reuse.given.unwrap().updated, 100);
    assert_eq!(mcf.bandwidth_gbps.best(), Some((4.0, Origin::Given)));
    assert!(s.get("nothing").unwrap().is_none());

    // Setting one value changes that value only; the others given stay, and what
    // was learned stays.
    s.set_given("mcf", &given(31.0, None), 200).unwrap();
    let mcf = s.get("mcf").unwrap().unwrap();
    assert_eq!(mcf.mpki.given.unwrap().value, 31.0);
    assert!(mcf.mpki.learned.is_some());
    assert_eq!(mcf.numa_penalty.given.unwrap().value, 1.15);
    assert_eq!(mcf.cache_reuse.given.unwrap().value, 0.3);
    // A penalty alone, for a program with no MPKI given.
    let penalty = GivenProfile {
        numa_penalty: Some(1.3),
        ..GivenProfile::default()
    };
    s.set_given("milc", &penalty, 201).unwrap();
    let milc = s.get("milc").unwrap().unwrap();
    assert_eq!(milc.numa_penalty.given.unwrap().value, 1.3);
    assert!(milc.mpki.given.is_none());

    // Survives a restart.
    drop(s);
    let s = Store::open(&path).unwrap();
    assert_eq!(s.list().unwrap().len(), 3);
}

#[test]
fn out_of_range_values_are_refused_by_field() {
    let dir = temp();
    let mut s = Store::open(&dir.path().join("p.db")).unwrap();
    for (g, field) in [
        (given(-1.0, None), "mpki"),
        (given(f64::NAN, None), "mpki"),
        (given(1.0, Some(0.9)), "numa_penalty"),
        (given(1.0, Some(f64::INFINITY)), "numa_penalty"),
        (
            GivenProfile {
                cache_reuse: Some(1.5),
                ..given(1.0, None)
            },
            "cache_reuse",
        ),
        (
            GivenProfile {
                bandwidth_gbps: Some(-0.1),
                ..given(1.0, None)
            },
            "bandwidth_gbps",
        ),
    ] {
        let e = s.set_given("x", &g, 0).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{field}: ")), "{e}");
    }
    assert!(s.set_given(" ", &given(1.0, None), 0).is_err());
    assert!(s.list().unwrap().is_empty());
}

#[test]
fn export_then_import_round_trips_in_both_formats() {
    let dir = temp();
    let mut a = Store::open(&dir.path().join("a.db")).unwrap();
    a.set_given(
        "mcf",
        &GivenProfile {
            mpki: Some(30.0),
            numa_penalty: Some(1.15),
            cache_reuse: Some(0.75),
            bandwidth_gbps: Some(2.5),
        },
        1,
    )
    .unwrap();
    a.set_given("gcc", &given(1.5, None), 1).unwrap();
    // No MPKI: the file format cannot hold it.
    a.learn("orphan", Quantity::BandwidthGbps, 1.0, 1).unwrap();
    let (programs, skipped) = a.export().unwrap();
    assert_eq!(skipped, ["orphan"]);
    for (ext, toml) in [("toml", true), ("json", false)] {
        let file = dir.path().join(format!("out.{ext}"));
        std::fs::write(&file, render_profiles(&programs, toml).unwrap()).unwrap();
        // The simulator reads it too.
        let set = ProfileSet::load(&file).unwrap();
        assert_eq!(set.get("mcf").unwrap().bandwidth_gbps, Some(2.5));
        let mut b = Store::open(&dir.path().join(format!("b-{ext}.db"))).unwrap();
        assert_eq!(b.import_file(&file, 1).unwrap(), 2);
        let (back, _) = b.export().unwrap();
        assert_eq!(back, programs, "{ext}");
        // A reuse the file did not state is not invented from the format's default.
        assert!(b.get("gcc").unwrap().unwrap().cache_reuse.given.is_none());
    }
}

#[test]
fn import_errors_name_file_and_field_and_change_nothing() {
    let dir = temp();
    let mut s = Store::open(&dir.path().join("p.db")).unwrap();
    let file = dir.path().join("bad.toml");
    std::fs::write(
        &file,
        "[[profiles]]\nname='a'\nmpki=1\n[[profiles]]\nname='b'\nmpki=2\nnuma_penalty=0.5\n",
    )
    .unwrap();
    let e = s.import_file(&file, 0).unwrap_err().to_string();
    assert!(e.starts_with(&file.display().to_string()), "{e}");
    assert!(e.contains("profiles[1].numa_penalty"), "{e}");
    assert!(!e.contains('\n'));
    assert!(s.list().unwrap().is_empty(), "all or nothing");
    let missing = dir.path().join("missing.json");
    let e = s.import_file(&missing, 0).unwrap_err().to_string();
    assert!(e.starts_with(&missing.display().to_string()), "{e}");
}

#[test]
fn a_corrupt_file_is_reported_and_left_alone() {
    let dir = temp();
    let path = dir.path().join("p.db");
    let junk = b"this is not a database, it is someone's notes\n".repeat(100);
    std::fs::write(&path, &junk).unwrap();
    let e = Store::open(&path).unwrap_err();
    assert!(matches!(e, StoreError::Corrupt { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(msg.starts_with(&path.display().to_string()), "{msg}");
    assert!(msg.contains("corrupt"), "{msg}");
    assert_eq!(std::fs::read(&path).unwrap(), junk, "never replaced");
}

#[test]
fn a_damaged_store_is_reported() {
    let dir = temp();
    let path = dir.path().join("p.db");
    {
        let mut s = Store::open(&path).unwrap();
        for i in 0..200 {
            s.set_given(&format!("prog{i}"), &given(i as f64, None), 0)
                .unwrap();
        }
        // Fold the WAL into the main file so the damage below hits real pages.
        s.conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .unwrap();
    }
    let mut bytes = std::fs::read(&path).unwrap();
    assert!(bytes.len() > 8192);
    // Scribble over the second page (the first table's b-tree), keep the header.
    for b in &mut bytes[4096..8192] {
        *b = 0xA5;
    }
    std::fs::write(&path, &bytes).unwrap();
    let e = Store::open(&path).unwrap_err();
    assert!(matches!(e, StoreError::Corrupt { .. }), "{e:?}");
}

#[test]
fn another_programs_database_or_a_newer_schema_is_refused() {
    let dir = temp();
    let foreign = dir.path().join("other.db");
    Connection::open(&foreign)
        .unwrap()
        .execute_batch("CREATE TABLE invoices (id INTEGER);")
        .unwrap();
    let e = Store::open(&foreign).unwrap_err();
    assert!(matches!(e, StoreError::Foreign { .. }), "{e:?}");
    assert!(e.to_string().contains("invoices"));

    let newer = dir.path().join("newer.db");
    drop(Store::open(&newer).unwrap());
    Connection::open(&newer)
        .unwrap()
        .pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .unwrap();
    let e = Store::open(&newer).unwrap_err();
    assert!(matches!(e, StoreError::TooNew { found, .. } if found == SCHEMA_VERSION + 1));
}

#[test]
fn an_unwritable_place_is_reported_with_its_path() {
    let dir = temp();
    // A directory that cannot be created: its parent is a file.
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, "x").unwrap();
    let path = blocker.join("sub/p.db");
    let e = Store::open(&path).unwrap_err();
    assert!(matches!(e, StoreError::NotWritable { .. }), "{e:?}");
    assert!(e.to_string().starts_with(&path.display().to_string()));
}

#[test]
fn a_read_only_file_is_reported() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp();
    let path = dir.path().join("p.db");
    drop(Store::open(&path).unwrap());
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
    if std::fs::OpenOptions::new().write(true).open(&path).is_ok() {
        eprintln!("skipped: permissions do not bind this user (root)");
        return;
    }
    let e = Store::open(&path).unwrap_err();
    assert!(matches!(e, StoreError::NotWritable { .. }), "{e:?}");
    assert!(e.to_string().starts_with(&path.display().to_string()));
}

#[test]
fn a_writer_holding_the_lock_is_reported_as_locked() {
    let dir = temp();
    let path = dir.path().join("p.db");
    let mut s = Store::open(&path).unwrap();
    let other = Connection::open(&path).unwrap();
    other
        .execute_batch("BEGIN IMMEDIATE; INSERT INTO numa_history VALUES ('x', 0, 0, 0, 0, 0);")
        .unwrap();
    let e = s.set_given("mcf", &given(1.0, None), 0).unwrap_err();
    assert!(matches!(e, StoreError::Locked { .. }), "{e:?}");
    assert!(e.to_string().contains("locked"));
    other.execute_batch("ROLLBACK").unwrap();
    s.set_given("mcf", &given(1.0, None), 0).unwrap();
}

pub(super) fn assert_one_line_naming(msg: &str, path: &Path) {
    assert!(msg.starts_with(&path.display().to_string()), "{msg}");
    assert!(!msg.contains('\n'), "{msg}");
}

/// A store holding given and learned numbers, closed.
pub(super) fn populated(path: &Path) -> Vec<StoredProgram> {
    let p = LearnParams {
        min_samples: 1,
        ..LearnParams::default()
    };
    let mut s = Store::open(path).unwrap();
    for i in 0..50 {
        s.set_given(&format!("prog{i}"), &given(i as f64, Some(1.1)), 1)
            .unwrap();
    }
    s.learn("milc", Quantity::Mpki, 20.0, 2).unwrap();
    s.observe_epochs("milc", &[(1.0, 1.0), (1.3, 0.0)], 3, &p)
        .unwrap();
    s.list().unwrap()
}

#[test]
fn a_full_or_read_only_store_fails_writes_with_its_path_and_keeps_its_data() {
    let dir = temp();
    let path = dir.path().join("p.db");
    let programs = populated(&path);
    let mut s = Store::open(&path).unwrap();
    // A name longer than a page holds needs an overflow page: the file must grow.
    let long = "x".repeat(3000);
    for (fault, kind) in [(Fault::Full, "full"), (Fault::ReadOnly, "readonly")] {
        s.inject(fault);
        let e = s.learn(&long, Quantity::Mpki, 1.0, 9).unwrap_err();
        let msg = e.to_string();
        assert_one_line_naming(&msg, &path);
        assert!(msg.contains(kind), "{msg}");
        match fault {
            Fault::Full => assert!(matches!(e, StoreError::Full { .. }), "{e:?}"),
            _ => assert!(matches!(e, StoreError::NotWritable { .. }), "{e:?}"),
        }
        let e = s
            .observe_epochs(&long, &[(1.0, 1.0)], 9, &LearnParams::default())
            .unwrap_err();
        assert_one_line_naming(&e.to_string(), &path);
        if fault == Fault::ReadOnly {
            let e = s.set_given("prog1", &given(99.0, None), 9).unwrap_err();
            assert_one_line_naming(&e.to_string(), &path);
        }
        // Another connection sees the store whole and unchanged.
        let other = Store::open_without_backup(&path).unwrap();
        assert_eq!(other.list().unwrap(), programs);
        s.inject(Fault::Lifted);
        let check: String = s
            .conn
            .query_row("PRAGMA quick_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(check, "ok");
    }
    s.learn(&long, Quantity::Mpki, 1.0, 9).unwrap();
    assert!(s.get(&long).unwrap().is_some());
}

fn learn_series(h: NumaHistory, series: &[(f64, f64)], p: &LearnParams) -> NumaHistory {
    series
        .iter()
        .fold(h, |h, &(cpi, f)| h.observe(cpi, f, p).unwrap_or(h))
}

#[test]
fn penalty_is_remote_over_local_cpi_once_both_sides_have_enough() {
    let p = LearnParams {
        min_samples: 3,
        ..LearnParams::default()
    };
    // Local CPI 1.0 ± noise, remote 1.3 ± noise: np ≈ 1.3.
    let local: Vec<(f64, f64)> = [0.98, 1.02, 1.0, 0.99, 1.01]
        .iter()
        .map(|&c| (c, 1.0))
        .collect();
    let remote: Vec<(f64, f64)> = [1.28, 1.32, 1.3].iter().map(|&c| (c, 0.0)).collect();
    let h = learn_series(NumaHistory::default(), &local, &p);
    assert_eq!(
        estimate_penalty(&h, p.min_samples),
        None,
        "no remote side yet"
    );
    let h = learn_series(h, &remote[..2], &p);
    assert_eq!(
        estimate_penalty(&h, p.min_samples),
        None,
        "two are not enough"
    );
    let h = learn_series(h, &remote[2..], &p);
    let np = estimate_penalty(&h, p.min_samples).unwrap();
    assert!((np - 1.3).abs() < 1e-12, "{np}");
}

#[test]
fn mixed_epochs_are_ignored_and_noise_below_one_is_clamped() {
    let p = LearnParams {
        min_samples: 1,
        ..LearnParams::default()
    };
    let h = NumaHistory::default();
    assert_eq!(h.observe(5.0, 0.5, &p), None);
    let h = learn_series(h, &[(1.0, 0.95), (2.0, 0.5), (0.9, 0.05)], &p);
    assert_eq!((h.local.n, h.remote.n), (1, 1));
    assert_eq!(estimate_penalty(&h, 1), Some(1.0));
    assert_eq!(estimate_penalty(&NumaHistory::default(), 0), None);
}

#[test]
fn old_epochs_fade_so_the_estimate_follows_a_changed_program() {
    let p = LearnParams {
        min_samples: 2,
        max_samples: 8,
        ..LearnParams::default()
    };
    let mut h = NumaHistory::default();
    for _ in 0..20 {
        h = learn_series(h, &[(1.0, 1.0), (1.5, 0.0)], &p);
    }
    assert!((estimate_penalty(&h, 2).unwrap() - 1.5).abs() < 1e-9);
    assert!(h.local.n < 8 && h.remote.n < 8);
    // The program changes: remote now costs 1.1×. A long run pulls the estimate there.
    for _ in 0..40 {
        h = learn_series(h, &[(1.0, 1.0), (1.1, 0.0)], &p);
    }
    let np = estimate_penalty(&h, 2).unwrap();
    assert!((np - 1.1).abs() < 0.01, "{np}");
}

#[test]
fn observed_epochs_persist_and_the_learned_penalty_wins() {
    let dir = temp();
    let path = dir.path().join("p.db");
    let p = LearnParams {
        min_samples: 2,
        ..LearnParams::default()
    };
    let mut s = Store::open(&path).unwrap();
    s.set_given("milc", &given(20.0, Some(1.35)), 0).unwrap();
    assert_eq!(s.observe_epoch("milc", 1.0, 1.0, 1, &p).unwrap(), None);
    assert_eq!(s.observe_epoch("milc", 1.2, 0.0, 2, &p).unwrap(), None);
    drop(s);
    let mut s = Store::open(&path).unwrap();
    assert_eq!(s.observe_epoch("milc", 1.0, 0.97, 3, &p).unwrap(), None);
    let np = s.observe_epoch("milc", 1.2, 0.02, 4, &p).unwrap().unwrap();
    assert!((np - 1.2).abs() < 1e-12);
    // A mixed epoch changes nothing but still reports the estimate.
    assert_eq!(s.observe_epoch("milc", 9.0, 0.5, 5, &p).unwrap(), Some(np));
    let h = s.numa_history("milc").unwrap().unwrap();
    assert_eq!((h.local.n, h.remote.n), (2, 2));

    let milc = s.get("milc").unwrap().unwrap();
    let learned = milc.numa_penalty.learned.unwrap();
    assert_eq!((learned.samples, learned.updated), (2, 4));
    let c = resolve(&milc.evidence());
    assert_eq!(c.source, PenaltySource::Learned);
    assert!((c.numa_penalty - 1.2).abs() < 1e-12);
    assert_eq!(c.mpki, 20.0);

    // Forgetting what was learned brings the user's profile back.
    s.forget_learned("milc").unwrap();
    let c = resolve(&s.get("milc").unwrap().unwrap().evidence());
    assert_eq!((c.numa_penalty, c.source), (1.35, PenaltySource::Profile));
    assert!(s.numa_history("milc").unwrap().is_none());

    for (cpi, f, field) in [
        (f64::NAN, 1.0, "cpi"),
        (0.0, 1.0, "cpi"),
        (1.0, 1.5, "ran_local"),
    ] {
        let e = s
            .observe_epoch("milc", cpi, f, 6, &p)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with(field), "{e}");
    }
}

#[test]
fn fractions_are_written_back_as_typed() {
    let dir = temp();
    let mut s = Store::open(&dir.path().join("p.db")).unwrap();
    let g = GivenProfile {
        mpki: Some(30.0),
        cache_reuse: Some(0.9),
        ..GivenProfile::default()
    };
    s.set_given("mcf", &g, 1).unwrap();
    let (programs, _) = s.export().unwrap();
    let text = super::render_profiles(&programs, true).unwrap();
    assert!(text.contains("streaming_fraction = 0.1\n"), "{text}");
}

fn session(np: f64, spread: f64, at: i64) -> Measurement {
    Measurement {
        result: numasched_model::character::measured::MeasuredPenalty {
            numa_penalty: np,
            spread,
            uncertain: spread > numasched_model::character::measured::UNCERTAIN_SPREAD,
            cache_slowdown: None,
        },
        local_node: 0,
        remote_node: 1,
        local_s: vec![10.0, 10.2],
        remote_s: vec![14.0, 14.4],
        pressured_s: Vec::new(),
        machine: "host: 2 nodes, 8 CPUs, 2 LLCs".into(),
        command: "job --night".into(),
        measured_at: at,
        mpki: None,
    }
}

#[test]
fn a_measured_program_is_listed_and_its_penalty_ranks_before_a_profile() {
    let dir = temp();
    let mut s = Store::open(&dir.path().join("p.db")).unwrap();
    // Known only by its measurement: still listed.
    s.put_measurement("job", &session(1.41, 0.03, 1_795_824_000))
        .unwrap();
    let all = s.list().unwrap();
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].program, "job");
    let m = all[0].measured.as_ref().unwrap();
    assert_eq!(m.local_s, vec![10.0, 10.2]);
    assert_eq!(m.describe(), "measured 2026-11-28: penalty 0.41 ± 0.03");
    // A built-in or user profile of the same name: the measurement wins.
    s.set_given("job", &given(20.0, Some(1.2)), 5).unwrap();
    let c = resolve(&s.get("job").unwrap().unwrap().evidence());
    assert_eq!((c.numa_penalty, c.source), (1.41, PenaltySource::Measured));
    assert_eq!(c.mpki, 20.0, "the profile's MPKI stays in use");
    // A new session replaces the last; an uncertain one ranks below the profile.
    s.put_measurement("job", &session(1.9, 0.5, 6)).unwrap();
    let p = s.get("job").unwrap().unwrap();
    assert!(p.measured.as_ref().unwrap().result.uncertain);
    let c = resolve(&p.evidence());
    assert_eq!((c.numa_penalty, c.source), (1.2, PenaltySource::Profile));
}

#[test]
fn a_version_1_store_gains_the_measurements_table_and_keeps_its_facts() {
    let dir = temp();
    let path = dir.path().join("p.db");
    {
        let mut s = Store::open(&path).unwrap();
        s.set_given("mcf", &given(30.0, Some(1.15)), 1).unwrap();
    }
    {
        let c = Connection::open(&path).unwrap();
        c.execute_batch("DROP TABLE measurements; PRAGMA user_version = 1;")
            .unwrap();
    }
    let mut s = Store::open(&path).unwrap();
    assert_eq!(
        s.get("mcf").unwrap().unwrap().mpki.given.unwrap().value,
        30.0
    );
    s.put_measurement("mcf", &session(1.3, 0.01, 2)).unwrap();
    assert!(s.get("mcf").unwrap().unwrap().measured.is_some());
}

/// A version 2 store (measurements without MPKI) is brought up to date: its session
/// reads back with no MPKI, and a new one keeps the MPKI counted, which then ranks
/// before a learned MPKI and after one counted on this run.
#[test]
fn a_version_2_store_gains_mpki_and_a_counted_mpki_ranks_before_learned() {
    let dir = temp();
    let path = dir.path().join("p.db");
    {
        let mut s = Store::open(&path).unwrap();
        s.put_measurement("job", &session(1.3, 0.01, 2)).unwrap();
    }
    {
        let c = Connection::open(&path).unwrap();
        c.execute_batch("ALTER TABLE measurements DROP COLUMN mpki; PRAGMA user_version = 2;")
            .unwrap();
    }
    let mut s = Store::open(&path).unwrap();
    let old = s.measurement("job").unwrap().expect("kept");
    assert_eq!(old.mpki, None);
    assert_eq!(old.result.numa_penalty, 1.3);
    let counted = Measurement {
        mpki: Some(12.5),
        ..session(1.4, 0.01, 3)
    };
    s.put_measurement("job", &counted).unwrap();
    assert_eq!(s.measurement("job").unwrap().expect("new").mpki, Some(12.5));
    let e = s.get("job").unwrap().expect("listed").evidence();
    assert_eq!(e.bench_mpki, Some(12.5));
    let c = numasched_model::character::resolve(&numasched_model::character::Evidence {
        learned_mpki: Some(3.0),
        ..e
    });
    assert_eq!(c.mpki, 12.5);
    let c = numasched_model::character::resolve(&numasched_model::character::Evidence {
        measured_mpki: Some(7.0),
        ..e
    });
    assert_eq!(c.mpki, 7.0);
}
